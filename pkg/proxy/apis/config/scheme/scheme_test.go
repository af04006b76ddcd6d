package scheme

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/fuzzer"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/v1alpha2"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from the current code")

var versions = []schema.GroupVersion{configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion}

// TestRoundTripFuzzing checks internal → external → internal for random
// configurations: through the full scheme with what both versions carry, and
// through a one-version scheme with everything that version carries.
func TestRoundTripFuzzing(t *testing.T) {
	t.Run("both", func(t *testing.T) {
		roundtrip.RoundTripTestForScheme(t, Scheme, fuzzer.Funcs)
	})
	t.Run("v1alpha1", func(t *testing.T) {
		s := runtime.NewScheme()
		utilruntime.Must(config.AddToScheme(s))
		utilruntime.Must(v1alpha1.AddToScheme(s))
		roundtrip.RoundTripTestForScheme(t, s, fuzzer.V1alpha1Funcs)
	})
	t.Run("v1alpha2", func(t *testing.T) {
		s := runtime.NewScheme()
		utilruntime.Must(config.AddToScheme(s))
		utilruntime.Must(v1alpha2.AddToScheme(s))
		roundtrip.RoundTripTestForScheme(t, s, fuzzer.V1alpha2Funcs)
	})
}

func TestPreferredVersion(t *testing.T) {
	got := Scheme.PrioritizedVersionsForGroup(config.GroupName)
	if len(got) != 2 || got[0] != configv1alpha1.SchemeGroupVersion {
		t.Fatalf("version priority = %v, want v1alpha1 first", got)
	}
}

// decode reads a file of any version into the internal form, defaulted.
func decode(t *testing.T, data []byte) *config.KubeProxyConfiguration {
	t.Helper()
	obj, _, err := Codecs.UniversalDecoder().Decode(data, nil, nil)
	if err != nil {
		t.Fatalf("decoding: %v", err)
	}
	cfg, ok := obj.(*config.KubeProxyConfiguration)
	if !ok {
		t.Fatalf("decoded %T, want *config.KubeProxyConfiguration", obj)
	}
	return cfg
}

// encode writes cfg as YAML in version gv.
func encode(t *testing.T, cfg *config.KubeProxyConfiguration, gv schema.GroupVersion) []byte {
	t.Helper()
	yamlSerializer := json.NewSerializerWithOptions(json.DefaultMetaFactory, Scheme, Scheme, json.SerializerOptions{Yaml: true})
	var buf bytes.Buffer
	if err := Codecs.EncoderForVersion(yamlSerializer, gv).Encode(cfg, &buf); err != nil {
		t.Fatalf("encoding %s: %v", gv, err)
	}
	return buf.Bytes()
}

// golden compares got with the file at path, or rewrites the file under -update.
func golden(t *testing.T, path string, got []byte) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s differs (-want +got), run with -update if intended:\n%s", path, diff)
	}
}

// TestDefaults: a file holding only apiVersion and kind, decoded (which defaults
// it) and written back in its own version, gives testdata/defaults/<version>.yaml.
func TestDefaults(t *testing.T) {
	for _, gv := range versions {
		t.Run(gv.Version, func(t *testing.T) {
			in := []byte("apiVersion: " + gv.String() + "\nkind: KubeProxyConfiguration\n")
			golden(t, filepath.Join("testdata", "defaults", gv.Version+".yaml"), encode(t, decode(t, in), gv))
		})
	}
}

// roundTripInputs lists testdata/roundtrip/<version>/*.yaml.
func roundTripInputs(t *testing.T, version string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "roundtrip", version, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatalf("no round-trip inputs for %s", version)
	}
	return files
}

// TestRoundTripFiles: every file under testdata/roundtrip/<version>/ is already
// in canonical form, so decoding it and encoding it in the same version must give
// it back byte for byte.
func TestRoundTripFiles(t *testing.T) {
	for _, gv := range versions {
		for _, path := range roundTripInputs(t, gv.Version) {
			t.Run(gv.Version+"/"+filepath.Base(path), func(t *testing.T) {
				in, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, path, encode(t, decode(t, in), gv))
			})
		}
	}
}

// TestCrossVersion: every v1alpha1 round-trip file converted to v1alpha2 gives
// testdata/converted/v1alpha2/<name>.yaml, and converting that back to v1alpha1
// loses nothing that both versions hold. Likewise from v1alpha2 to v1alpha1.
func TestCrossVersion(t *testing.T) {
	for _, dir := range []struct{ from, to schema.GroupVersion }{
		{configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion},
		{configv1alpha2.SchemeGroupVersion, configv1alpha1.SchemeGroupVersion},
	} {
		for _, path := range roundTripInputs(t, dir.from.Version) {
			name := filepath.Base(path)
			t.Run(dir.from.Version+"-to-"+dir.to.Version+"/"+name, func(t *testing.T) {
				in, err := os.ReadFile(path)
				if err != nil {
					t.Fatal(err)
				}
				orig := decode(t, in)
				converted := encode(t, orig, dir.to)
				golden(t, filepath.Join("testdata", "converted", dir.from.Version+"-to-"+dir.to.Version, name), converted)

				back := decode(t, encode(t, decode(t, converted), dir.from))
				want := orig.DeepCopy()
				if dir.from == configv1alpha1.SchemeGroupVersion {
					// v1alpha2 cannot say "no override, but IPv6" (bindAddress ::).
					if strings.Trim(want.BindAddress, ":0.") == "" {
						want.BindAddress = back.BindAddress
					}
				} else {
					// v1alpha1 holds one masquerade bit for iptables and ipvs, one
					// node IP, no family policy and no hard-fail switch.
					want.NodeIPOverride, back.NodeIPOverride = nil, nil
					want.IPFamilyPolicy = back.IPFamilyPolicy
					want.ConfigHardFail = back.ConfigHardFail
					want.IPVS.MasqueradeBit = back.IPVS.MasqueradeBit
					if want.Mode == config.ProxyModeIPVS {
						want.IPTables.MasqueradeBit = back.IPTables.MasqueradeBit
					}
				}
				if diff := cmp.Diff(want, back); diff != "" {
					t.Errorf("%s → %s → %s lost information (-want +got):\n%s", dir.from.Version, dir.to.Version, dir.from.Version, diff)
				}
			})
		}
	}
}

// Decoding must be strict: unknown and duplicate fields are errors.
func TestStrictDecoding(t *testing.T) {
	for _, gv := range versions {
		for name, body := range map[string]string{
			"unknown":   "bogus: 1\n",
			"nested":    "iptables:\n  bogus: 1\n",
			"duplicate": "mode: iptables\nmode: ipvs\n",
		} {
			t.Run(gv.Version+"/"+name, func(t *testing.T) {
				data := []byte("apiVersion: " + gv.String() + "\nkind: KubeProxyConfiguration\n" + body)
				_, _, err := Codecs.UniversalDecoder().Decode(data, nil, nil)
				if !runtime.IsStrictDecodingError(err) {
					t.Fatalf("got %v, want a strict decoding error", err)
				}
			})
		}
	}
	// The codec factory must keep the strict option that the tests above rely on.
	_ = serializer.EnableStrict
}
