package app

import (
	"maps"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"k8s.io/component-base/logs"
)

// upstreamFlag is one flag of upstream kube-proxy v1.37.2 on Linux, as its --help
// prints it (see /work/shared/reference/upstream-api.md §c).
type upstreamFlag struct {
	typ, def string
	hidden   bool
}

var upstreamFlags = map[string]upstreamFlag{
	"bind-address":                      {"ip", "0.0.0.0", false},
	"bind-address-hard-fail":            {"bool", "false", false},
	"cleanup":                           {"bool", "false", false},
	"cluster-cidr":                      {"string", "", false},
	"config":                            {"string", "", false},
	"config-sync-period":                {"duration", "15m0s", false},
	"conntrack-max-per-core":            {"int32", "32768", false},
	"conntrack-min":                     {"int32", "131072", false},
	"conntrack-tcp-be-liberal":          {"bool", "false", false},
	"conntrack-tcp-timeout-close-wait":  {"duration", "1h0m0s", false},
	"conntrack-tcp-timeout-established": {"duration", "24h0m0s", false},
	"conntrack-udp-timeout":             {"duration", "0s", false},
	"conntrack-udp-timeout-stream":      {"duration", "0s", false},
	"detect-local-mode":                 {"LocalMode", "", false},
	"feature-gates":                     {"mapStringBool", "", false},
	"healthz-bind-address":              {"ipport", "0.0.0.0:10256", false},
	"healthz-port":                      {"int32", "10256", true},
	"hostname-override":                 {"string", "", false},
	"init-only":                         {"bool", "false", false},
	"iptables-localhost-nodeports":      {"bool", "true", false},
	"iptables-masquerade-bit":           {"int32", "14", false},
	"iptables-min-sync-period":          {"duration", "1s", false},
	"iptables-sync-period":              {"duration", "30s", false},
	"ipvs-exclude-cidrs":                {"stringSlice", "[]", false},
	"ipvs-min-sync-period":              {"duration", "1s", false},
	"ipvs-scheduler":                    {"string", "", false},
	"ipvs-strict-arp":                   {"bool", "false", false},
	"ipvs-sync-period":                  {"duration", "30s", false},
	"ipvs-tcp-timeout":                  {"duration", "0s", false},
	"ipvs-tcpfin-timeout":               {"duration", "0s", false},
	"ipvs-udp-timeout":                  {"duration", "0s", false},
	"kube-api-burst":                    {"int32", "10", false},
	"kube-api-content-type":             {"string", "application/vnd.kubernetes.protobuf", false},
	"kube-api-qps":                      {"float32", "5", false},
	"kubeconfig":                        {"string", "", false},
	"master":                            {"string", "", false},
	"masquerade-all":                    {"bool", "false", false},
	"metrics-bind-address":              {"ipport", "127.0.0.1:10249", false},
	"metrics-port":                      {"int32", "10249", true},
	"nodeport-addresses":                {"stringSlice", "[]", false},
	"oom-score-adj":                     {"int32", "-999", false},
	"pod-bridge-interface":              {"string", "", false},
	"pod-interface-name-prefix":         {"string", "", false},
	"profiling":                         {"bool", "false", false},
	"proxy-mode":                        {"ProxyMode", "", false},
	"show-hidden-metrics-for-version":   {"string", "", false},
	"write-config-to":                   {"string", "", false},
	"log-flush-frequency":               {"duration", "5s", false},
	"logging-format":                    {"string", "text", false},
	"log-text-split-stream":             {"bool", "false", false},
	"log-json-split-stream":             {"bool", "false", false},
	"log-text-info-buffer-size":         {"quantity", "0", false},
	"log-json-info-buffer-size":         {"quantity", "0", false},
	"v":                                 {"Level", "0", false},
	"vmodule":                           {"moduleSpec", "", false}, // --help shows "pattern=N,..."
	"version":                           {"version", "false", false},
}

// Flags this build adds; everything else must be upstream's.
var addedFlags = map[string]upstreamFlag{
	"write-config-version":                  {"string", "v1alpha2", false},
	"manifests":                             {"string", "", false},
	"manifests-rescan-period":               {"duration", "10s", false},
	"dry-run":                               {"bool", "false", false},
	"dry-run-follow":                        {"bool", "false", false},
	"dry-run-timeout":                       {"duration", "5m0s", false},
	"iptables-backend":                      {"string", "auto", false}, // Linux only
	"localnode-serve":                       {"string", "", false},
	"localnode-source":                      {"string", "", false},
	"localnode-serve-tls-cert-file":         {"string", "", false},
	"localnode-serve-tls-private-key-file":  {"string", "", false},
	"localnode-serve-client-ca-file":        {"string", "", false},
	"localnode-source-ca-file":              {"string", "", false},
	"localnode-source-tls-cert-file":        {"string", "", false},
	"localnode-source-tls-private-key-file": {"string", "", false},
	"localnode-source-tls-server-name":      {"string", "", false},
	"localnode-source-max-pending-objects":  {"int", "1000000", false},
	"localnode-source-max-pending-bytes":    {"int64", "268435456", false},
	"dry-run-node-addresses":                {"stringSlice", "[]", true}, // trace --netns's child
	"socket-lb":                             {"bool", "false", false},
	"socket-lb-cgroup-path":                 {"string", "", false},
}

// commandFlags returns the flags the binary accepts: the command's own, the
// persistent ones cli.Run adds, and pflag.CommandLine (--version), which cobra merges.
func commandFlags(t *testing.T) map[string]*pflag.Flag {
	t.Helper()
	cmd := NewProxyCommand()
	logs.AddFlags(cmd.PersistentFlags())
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	all := map[string]*pflag.Flag{}
	for _, fs := range []*pflag.FlagSet{cmd.Flags(), cmd.PersistentFlags(), pflag.CommandLine} {
		fs.VisitAll(func(f *pflag.Flag) {
			if strings.HasPrefix(f.Name, "test.") || f.Name == "help" {
				return // go test's own flags, and cobra's --help
			}
			all[f.Name] = f
		})
	}
	return all
}

func TestFlagsMatchUpstream(t *testing.T) {
	got := commandFlags(t)
	platformFlags := maps.Clone(upstreamFlags)
	maps.Copy(platformFlags, upstreamOSFlags)
	for name, want := range platformFlags {
		f, ok := got[name]
		if !ok {
			t.Errorf("--%s: missing (upstream has it)", name)
			continue
		}
		if f.Value.Type() != want.typ {
			t.Errorf("--%s: type %q, upstream %q", name, f.Value.Type(), want.typ)
		}
		if f.DefValue != want.def {
			t.Errorf("--%s: default %q, upstream %q", name, f.DefValue, want.def)
		}
		if (f.Hidden || f.Deprecated != "") != want.hidden {
			t.Errorf("--%s: hidden=%v deprecated=%q, upstream hidden=%v", name, f.Hidden, f.Deprecated, want.hidden)
		}
	}
	if f := got["v"]; f == nil || f.Shorthand != "v" {
		t.Errorf("-v shorthand missing")
	}
	for _, name := range []string{"healthz-port", "metrics-port"} {
		if f := got[name]; f == nil || !strings.Contains(f.Deprecated, "--"+strings.TrimSuffix(name, "-port")+"-bind-address") {
			t.Errorf("--%s must be deprecated in favour of the bind-address flag, got %+v", name, f)
		}
	}
	var extra []string
	for name, f := range got {
		if _, ok := platformFlags[name]; ok {
			continue
		}
		want, ok := addedFlags[name]
		if !ok {
			extra = append(extra, name)
			continue
		}
		if f.Value.Type() != want.typ || f.DefValue != want.def {
			t.Errorf("--%s: type %q default %q, want %q %q", name, f.Value.Type(), f.DefValue, want.typ, want.def)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("flags neither upstream nor documented additions: %v", extra)
	}
	// Upstream registers 57 flags counting cobra's --help, which is skipped here.
	if len(upstreamFlags) != 56 {
		t.Fatalf("test data holds %d upstream flags, want 56", len(upstreamFlags))
	}
}

// --help lists every visible flag in one sorted "Flags:" section, like upstream.
func TestHelpListsFlagsLikeUpstream(t *testing.T) {
	help := helpOutput(t)
	if !strings.Contains(help, "Usage:\n  kube-proxy [flags]") || !strings.Contains(help, "\nFlags:\n") {
		t.Fatalf("unexpected help layout:\n%s", help)
	}
	for name, f := range upstreamFlags {
		shown := strings.Contains(help, "--"+name+" ") || strings.Contains(help, "--"+name+"[")
		if shown == f.hidden {
			t.Errorf("--%s shown=%v, want shown=%v", name, shown, !f.hidden)
		}
	}
}
