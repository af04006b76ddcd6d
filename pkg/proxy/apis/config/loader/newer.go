package loader

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"

	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/scheme"
)

// v1alpha1Spelling says where v1alpha1 keeps what a v1alpha2-only field sets, so
// that a warning can point at the field that does take effect. Keys are v1alpha2
// paths or prefixes ending in "."; "" means v1alpha1 cannot express it.
func v1alpha1Spelling(path string, mode config.ProxyMode) string {
	block := "iptables"
	switch mode {
	case config.ProxyModeIPVS:
		block = "ipvs"
	case config.ProxyModeNFTables:
		block = "nftables"
	}
	masqBlock := "iptables"
	if mode == config.ProxyModeNFTables {
		masqBlock = "nftables"
	}
	switch {
	case strings.HasPrefix(path, "linux.conntrack."):
		return "conntrack." + strings.TrimPrefix(path, "linux.conntrack.")
	case path == "linux.conntrack":
		return "conntrack"
	}
	return map[string]string{
		"linux.oomScoreAdj":        "oomScoreAdj",
		"linux.masqueradeAll":      masqBlock + ".masqueradeAll",
		"windows.runAsService":     "windowsRunAsService",
		"syncPeriod":               block + ".syncPeriod",
		"minSyncPeriod":            block + ".minSyncPeriod",
		"detectLocal.clusterCIDRs": "clusterCIDR (comma-separated)",
		"ipvs.masqueradeBit":       "iptables.masqueradeBit",
		"nodeIPOverride":           "bindAddress (one IP)",
	}[path]
}

// newerFieldProblems turns the v1alpha2-only fields found in a v1alpha1 file into
// one problem per value set, each naming the value that is used instead (and
// fields under them that v1alpha2 lacks as well into plain unknown fields): the
// v1alpha1 decoder drops them, so what applies is the v1alpha1 field or its
// default, which the user did not necessarily mean. hardFail reports whether
// the file asks for configHardFail: true, which v1alpha1 cannot say but which
// a user who wrote it plainly wants honoured.
func newerFieldProblems(fields []newerField, cfg *config.KubeProxyConfiguration) (problems, unknown []Problem, hardFail bool) {
	if len(fields) == 0 {
		return nil, nil, false
	}
	used := effectiveV1alpha2(cfg)
	for _, f := range fields {
		for _, leaf := range leaves(f.key, f.value, f.typ, f.path, 0) {
			if !leaf.known {
				unknown = append(unknown, Problem{Field: leaf.path, Line: leaf.key.Line, Column: leaf.key.Column,
					Message: fmt.Sprintf("unknown field %q", leaf.path)})
				continue
			}
			if leaf.path == "configHardFail" {
				var b bool
				if leaf.value.Decode(&b) == nil && b {
					hardFail = true
				}
			}
			msg := fmt.Sprintf("%s is a %s field, not read from a %s file: its value %s is ignored and %s is used",
				leaf.path, configv1alpha2.SchemeGroupVersion, "v1alpha1", yamlValue(leaf.value), lookup(used, leaf.path))
			if hint := v1alpha1Spelling(leaf.path, cfg.Mode); hint != "" {
				msg += fmt.Sprintf(" (in v1alpha1, set %s; or make the file v1alpha2)", hint)
			} else {
				msg += " (v1alpha1 cannot set it; make the file v1alpha2)"
			}
			problems = append(problems, Problem{Field: leaf.path, Line: leaf.key.Line, Column: leaf.key.Column, Message: msg})
		}
	}
	return problems, unknown, hardFail
}

type leaf struct {
	path       string
	key, value *yaml.Node
	// known is false for a field that v1alpha2 does not have either.
	known bool
}

// leaves lists the values set under a field of type t, descending into structs
// so that each warning names one value.
func leaves(key, value *yaml.Node, t reflect.Type, path string, depth int) []leaf {
	value = resolve(value)
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if value == nil || depth > maxDepth || t == nil || t.Kind() != reflect.Struct || customDecoding(t) || value.Kind != yaml.MappingNode {
		return []leaf{{path, key, value, t != nil}}
	}
	fields := jsonFields(t)
	var out []leaf
	for i := 0; i+1 < len(value.Content); i += 2 {
		k := resolve(value.Content[i])
		out = append(out, leaves(k, value.Content[i+1], fields[k.Value], join(path, k.Value), depth+1)...)
	}
	return out
}

// effectiveV1alpha2 renders cfg as v1alpha2 JSON, the form in which the ignored
// fields' paths name the values actually used.
func effectiveV1alpha2(cfg *config.KubeProxyConfiguration) map[string]any {
	v2 := &configv1alpha2.KubeProxyConfiguration{}
	if err := scheme.Scheme.Convert(cfg.DeepCopy(), v2, nil); err != nil {
		return nil
	}
	data, err := json.Marshal(v2)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil
	}
	return m
}

// lookup returns the JSON text of the value at the dotted path, or "unset".
func lookup(m map[string]any, path string) string {
	var v any = m
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return "unset"
		}
		if v, ok = obj[name]; !ok {
			return "unset"
		}
	}
	if v == nil {
		return "unset"
	}
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(data)
}

// yamlValue renders a value as the file gave it, compactly, as JSON.
func yamlValue(n *yaml.Node) string {
	if n == nil {
		return "null"
	}
	var v any
	if err := n.Decode(&v); err == nil {
		if data, err := json.Marshal(v); err == nil {
			return string(data)
		}
	}
	return fmt.Sprintf("%q", n.Value)
}
