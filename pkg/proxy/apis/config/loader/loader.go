package loader

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/scheme"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/validation"
)

// Options tune Load.
type Options struct {
	// HonorConfigHardFail applies the file's own configHardFail: when it is false,
	// unknown and duplicate fields become warnings and the rest of the file is
	// used. v1alpha1 has no such field and reads as false, which is the upstream
	// binary's behaviour (it retries v1alpha1 files leniently), unless the file
	// sets the v1alpha2 field configHardFail: true anyway, which is taken as
	// the author's wish for strictness. When
	// HonorConfigHardFail is false (the zero value), they are always errors.
	HonorConfigHardFail bool
}

// Load decodes a configuration file of either version, strictly, defaults it and
// converts it to the internal form. The warnings say what the file sets that has no
// effect (see validation.LossWarningsV1alpha1).
func Load(data []byte) (*config.KubeProxyConfiguration, []string, error) {
	return LoadWithOptions(data, Options{})
}

// LoadFile is LoadWithOptions on the contents of path; errors name the file.
func LoadFile(path string, opts Options) (*config.KubeProxyConfiguration, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("reading kube-proxy configuration: %w", err)
	}
	cfg, warnings, err := LoadWithOptions(data, opts)
	if err != nil {
		return nil, warnings, fmt.Errorf("kube-proxy configuration %s: %w", path, err)
	}
	return cfg, warnings, nil
}

// LoadWithOptions is Load with options.
func LoadWithOptions(data []byte, opts Options) (*config.KubeProxyConfiguration, []string, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil, errors.New("the configuration is empty")
	}
	gvk, walked, err := inspect(data)
	if err != nil {
		return nil, nil, err
	}
	problems := walked.problems

	obj, _, decodeErr := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	switch {
	case decodeErr == nil:
	case runtime.IsStrictDecodingError(decodeErr) && obj != nil:
		// The YAML walk normally finds the same problems, with lines; if it did
		// not, the decoder's own description is the best there is.
		if len(problems) == 0 && len(walked.newerFields) == 0 {
			problems = []Problem{{Message: decodeErr.Error()}}
		}
	default:
		return nil, nil, fmt.Errorf("decoding %s: %w", gvk, decodeErr)
	}

	var warnings []string
	if v1, ok := obj.(*configv1alpha1.KubeProxyConfiguration); ok {
		warnings = append(warnings, validation.LossWarningsV1alpha1(v1)...)
	}
	scheme.Scheme.Default(obj)
	cfg := &config.KubeProxyConfiguration{}
	if err := scheme.Scheme.Convert(obj, cfg, nil); err != nil {
		return nil, nil, fmt.Errorf("converting %s to the internal configuration: %w", gvk, err)
	}

	newer, unknown, askedHardFail := newerFieldProblems(walked.newerFields, cfg)
	problems = append(append(problems, unknown...), newer...)
	sort.SliceStable(problems, func(i, j int) bool { return problems[i].Line < problems[j].Line })
	if len(problems) > 0 {
		strictErr := &StrictError{GroupVersionKind: gvk, Problems: problems}
		if !opts.HonorConfigHardFail || cfg.ConfigHardFail || askedHardFail {
			return nil, warnings, strictErr
		}
		isNewer := map[Problem]bool{}
		for _, p := range newer {
			isNewer[p] = true
		}
		for _, p := range problems {
			if isNewer[p] {
				// Its message already says what is ignored and what applies.
				warnings = append(warnings, p.String())
				continue
			}
			warnings = append(warnings, p.String()+" (ignored because configHardFail is false)")
		}
	}
	return cfg, warnings, nil
}

// Encode writes cfg as YAML in version gv (v1alpha1 or v1alpha2) without changing
// it. What gv cannot express is lost; validation.EncodingWarnings lists it.
func Encode(cfg *config.KubeProxyConfiguration, gv schema.GroupVersion) ([]byte, error) {
	switch gv {
	case configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion:
	default:
		return nil, fmt.Errorf("cannot encode KubeProxyConfiguration as %q: known versions are %s and %s",
			gv, configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion)
	}
	yamlSerializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, json.SerializerOptions{Yaml: true})
	var buf bytes.Buffer
	if err := scheme.Codecs.EncoderForVersion(yamlSerializer, gv).Encode(cfg.DeepCopy(), &buf); err != nil {
		return nil, fmt.Errorf("encoding KubeProxyConfiguration as %s: %w", gv, err)
	}
	return buf.Bytes(), nil
}

// Problem is one strict-decoding problem: an unknown or duplicate field.
type Problem struct {
	// Field is the JSON path of the field, e.g. "iptables.masqueradeBit".
	Field string
	// Line and Column locate it in the file (1-based); 0 when unknown.
	Line, Column int
	// Message describes it.
	Message string
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.Message
	}
	return fmt.Sprintf("line %d, column %d: %s", p.Line, p.Column, p.Message)
}

// StrictError reports every unknown or duplicate field of a file.
type StrictError struct {
	GroupVersionKind schema.GroupVersionKind
	Problems         []Problem
}

func (e *StrictError) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	return fmt.Sprintf("strict decoding of %s %s failed: %s", e.GroupVersionKind.GroupVersion(), e.GroupVersionKind.Kind, strings.Join(parts, "; "))
}
