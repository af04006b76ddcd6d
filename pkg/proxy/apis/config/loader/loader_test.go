package loader

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/schema"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

const (
	v1 = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
	v2 = "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n"
)

func TestLoad(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		opts Options
		// wantErr lists substrings of the error; empty means success.
		wantErr []string
		// wantWarn lists substrings, one per expected warning, in order.
		wantWarn []string
		check    func(*testing.T, *config.KubeProxyConfiguration)
	}{
		{name: "empty v1alpha1 gets upstream defaults", in: v1, check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if c.SyncPeriod.Duration != 30*time.Second || *c.IPTables.LocalhostNodePorts != true || c.ConfigHardFail || c.BindAddressHardFail {
				t.Errorf("not upstream's v1alpha1 defaults: %+v", c)
			}
			if c.IPFamilyPolicy != config.IPFamilyPolicyPreferDualStack {
				t.Errorf("IPFamilyPolicy = %q", c.IPFamilyPolicy)
			}
		}},
		{name: "empty v1alpha2 gets KEP-784 defaults", in: v2, check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if !c.ConfigHardFail || !c.BindAddressHardFail || *c.IPTables.LocalhostNodePorts || *c.IPVS.MasqueradeBit != 14 {
				t.Errorf("not v1alpha2 defaults: %+v", c)
			}
		}},
		{name: "json input", in: `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha2","kind":"KubeProxyConfiguration","mode":"nftables","syncPeriod":"10s"}`,
			check: func(t *testing.T, c *config.KubeProxyConfiguration) {
				if c.Mode != config.ProxyModeNFTables || c.SyncPeriod.Duration != 10*time.Second {
					t.Errorf("mode %q syncPeriod %v", c.Mode, c.SyncPeriod)
				}
			}},
		{name: "v1alpha1 active block wins", in: v1 + "mode: ipvs\nipvs:\n  syncPeriod: 7s\niptables:\n  syncPeriod: 9s\n",
			wantWarn: []string{"iptables.syncPeriod (9s) is ignored in ipvs mode"},
			check: func(t *testing.T, c *config.KubeProxyConfiguration) {
				if c.SyncPeriod.Duration != 7*time.Second {
					t.Errorf("SyncPeriod = %v, want the ipvs block's 7s", c.SyncPeriod)
				}
			}},
		{name: "v1alpha1 clusterCIDR", in: v1 + "clusterCIDR: 10.0.0.0/8,fd00::/48\n", check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if diff := cmp.Diff([]string{"10.0.0.0/8", "fd00::/48"}, c.DetectLocal.ClusterCIDRs); diff != "" {
				t.Error(diff)
			}
		}},
		{name: "v1alpha2 nodeIPOverride sets BindAddress", in: v2 + "nodeIPOverride: [fd00::1, 10.0.0.1]\n", check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if c.BindAddress != "fd00::1" || c.HealthzBindAddress != "[::]:10256" || c.MetricsBindAddress != "[::1]:10249" {
				t.Errorf("BindAddress %q healthz %q metrics %q", c.BindAddress, c.HealthzBindAddress, c.MetricsBindAddress)
			}
		}},

		{name: "v1alpha2 explicit zero minSyncPeriod is kept", in: v2 + "minSyncPeriod: 0s\n", check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if c.MinSyncPeriod.Duration != 0 {
				t.Errorf("MinSyncPeriod = %v, want 0", c.MinSyncPeriod)
			}
		}},
		{name: "v1alpha2 absent minSyncPeriod is 1s", in: v2, check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if c.MinSyncPeriod.Duration != time.Second {
				t.Errorf("MinSyncPeriod = %v, want 1s", c.MinSyncPeriod)
			}
		}},
		{name: "v1alpha1 ipvs minSyncPeriod defaults to 0", in: v1 + "mode: ipvs\n", check: func(t *testing.T, c *config.KubeProxyConfiguration) {
			if c.MinSyncPeriod.Duration != 0 || c.SyncPeriod.Duration != 30*time.Second {
				t.Errorf("sync %v min %v, want 30s and 0s", c.SyncPeriod, c.MinSyncPeriod)
			}
		}},
		{name: "unknown top-level field", in: v1 + "mode: iptables\nbogus: true\n",
			wantErr: []string{`line 4, column 1: unknown field "bogus"`}},
		{name: "unknown nested field", in: v2 + "linux:\n  conntrack:\n    maxPerCore: 1\n    maxPercore: 2\n",
			wantErr: []string{`line 6, column 5: unknown field "linux.conntrack.maxPercore"`}},
		{name: "v1alpha1 field in v1alpha2", in: v2 + "clusterCIDR: 10.0.0.0/8\n",
			wantErr: []string{`line 3, column 1: unknown field "clusterCIDR"`}},
		{name: "field names are case-sensitive", in: v2 + "Mode: ipvs\n",
			wantErr: []string{`unknown field "Mode"`}},
		{name: "duplicate field", in: v1 + "mode: ipvs\nhostnameOverride: a\nmode: iptables\n",
			wantErr: []string{`line 5, column 1: duplicate field "mode" (first set on line 3)`}},
		{name: "duplicate in json", in: `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration",` + "\n" + `"mode":"ipvs",` + "\n" + `"mode":"iptables"}`,
			wantErr: []string{`line 3, column 1: duplicate field "mode" (first set on line 2)`}},
		{name: "duplicate feature gate", in: v1 + "featureGates:\n  A: true\n  A: false\n",
			wantErr: []string{`line 5, column 3: duplicate key "A" in "featureGates"`}},
		{name: "every problem is listed", in: v1 + "a: 1\nb: 2\n",
			wantErr: []string{`line 3, column 1: unknown field "a"`, `line 4, column 1: unknown field "b"`}},
		{name: "v1alpha1 problems are warnings when honouring configHardFail", opts: Options{HonorConfigHardFail: true},
			in:       v1 + "bogus: 1\n",
			wantWarn: []string{`line 3, column 1: unknown field "bogus" (ignored because configHardFail is false)`}},
		{name: "v1alpha2-only field in v1alpha1 names the value used instead", opts: Options{HonorConfigHardFail: true},
			in: v1 + "linux:\n  conntrack:\n    maxPerCore: 0\n    tcpEstablishedTimeout: 1h\n",
			wantWarn: []string{
				`line 5, column 5: linux.conntrack.maxPerCore is a kubeproxy.config.k8s.io/v1alpha2 field, not read from a v1alpha1 file: its value 0 is ignored and 32768 is used (in v1alpha1, set conntrack.maxPerCore`,
				`line 6, column 5: linux.conntrack.tcpEstablishedTimeout is a kubeproxy.config.k8s.io/v1alpha2 field, not read from a v1alpha1 file: its value "1h" is ignored and "24h0m0s" is used (in v1alpha1, set conntrack.tcpEstablishedTimeout`,
			},
			check: func(t *testing.T, c *config.KubeProxyConfiguration) {
				if *c.Linux.Conntrack.MaxPerCore != 32768 {
					t.Errorf("maxPerCore %d: the v1alpha2-only field must not apply", *c.Linux.Conntrack.MaxPerCore)
				}
			}},
		{name: "the value used is the v1alpha1 field's when set", opts: Options{HonorConfigHardFail: true},
			in:       v1 + "conntrack:\n  maxPerCore: 5\nlinux:\n  conntrack:\n    maxPerCore: 0\n",
			wantWarn: []string{"its value 0 is ignored and 5 is used"}},
		{name: "v1alpha2-only top-level fields point at the active mode's block", opts: Options{HonorConfigHardFail: true},
			in: v1 + "mode: nftables\nsyncPeriod: 10s\nipFamilyPolicy: SingleStack\n",
			wantWarn: []string{
				`syncPeriod is a kubeproxy.config.k8s.io/v1alpha2 field, not read from a v1alpha1 file: its value "10s" is ignored and "30s" is used (in v1alpha1, set nftables.syncPeriod`,
				`ipFamilyPolicy is a kubeproxy.config.k8s.io/v1alpha2 field, not read from a v1alpha1 file: its value "SingleStack" is ignored and "PreferDualStack" is used (v1alpha1 cannot set it`,
			}},
		{name: "a misspelt field under a v1alpha2-only block is plainly unknown", opts: Options{HonorConfigHardFail: true},
			in:       v1 + "linux:\n  bogus: 1\n",
			wantWarn: []string{`line 4, column 3: unknown field "linux.bogus" (ignored because configHardFail is false)`}},
		{name: "v1alpha2-only field in v1alpha1 fails when not honouring configHardFail", in: v1 + "linux:\n  oomScoreAdj: 5\n",
			wantErr: []string{`linux.oomScoreAdj is a kubeproxy.config.k8s.io/v1alpha2 field`, "-999 is used", "in v1alpha1, set oomScoreAdj"}},
		{name: "v1alpha1 file asking for configHardFail gets it", opts: Options{HonorConfigHardFail: true},
			in:      v1 + "configHardFail: true\nlinux:\n  conntrack:\n    maxPerCore: 0\n",
			wantErr: []string{"linux.conntrack.maxPerCore", "32768 is used"}},
		{name: "v1alpha1 file with configHardFail false stays lenient", opts: Options{HonorConfigHardFail: true},
			in:       v1 + "configHardFail: false\n",
			wantWarn: []string{"configHardFail is a kubeproxy.config.k8s.io/v1alpha2 field"}},
		{name: "v1alpha2 configHardFail false turns problems into warnings", opts: Options{HonorConfigHardFail: true},
			in:       v2 + "configHardFail: false\nbogus: 1\n",
			wantWarn: []string{`unknown field "bogus"`}},
		{name: "v1alpha2 defaults to hard failure", opts: Options{HonorConfigHardFail: true},
			in: v2 + "bogus: 1\n", wantErr: []string{`unknown field "bogus"`}},
		{name: "configHardFail false is not honoured by default", in: v2 + "configHardFail: false\nbogus: 1\n",
			wantErr: []string{`unknown field "bogus"`}},

		{name: "second document is rejected, naming it", in: v1 + "mode: iptables\n---\n" + v2 + "mode: nftables\n",
			wantErr: []string{"document 2", "line 5", "exactly one"}},
		{name: "an invalid second document is rejected too", in: v2 + "---\nbogus: [\n",
			wantErr: []string{"document 2"}},
		{name: "third document is named", in: v2 + "---\n---\nmode: ipvs\n",
			wantErr: []string{"document 3", "line 5"}},
		{name: "concatenated JSON objects are rejected", in: `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha2","kind":"KubeProxyConfiguration"}` + "\n" + `{"mode":"ipvs"}`,
			wantErr: []string{"document 2"}},
		{name: "leading separator and trailing empty documents are fine", in: "---\n" + v2 + "mode: nftables\n---\n# nothing more\n---\n",
			check: func(t *testing.T, c *config.KubeProxyConfiguration) {
				if c.Mode != config.ProxyModeNFTables {
					t.Errorf("mode %q", c.Mode)
				}
			}},
		{name: "document end marker is fine", in: v2 + "mode: nftables\n...\n"},
		{name: "empty", in: "  \n", wantErr: []string{"empty"}},
		{name: "comment only", in: "# nothing\n", wantErr: []string{"empty"}},
		{name: "not a mapping", in: "- a\n- b\n", wantErr: []string{"must be a mapping"}},
		{name: "yaml syntax error", in: v1 + "mode: [\n", wantErr: []string{"parsing the configuration"}},
		{name: "missing apiVersion", in: "kind: KubeProxyConfiguration\n", wantErr: []string{"apiVersion is missing"}},
		{name: "unknown version", in: "apiVersion: kubeproxy.config.k8s.io/v1beta1\nkind: KubeProxyConfiguration\n",
			wantErr: []string{`line 1: apiVersion "kubeproxy.config.k8s.io/v1beta1" is not supported`}},
		{name: "wrong kind", in: "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
			wantErr: []string{`line 2: kind is "KubeletConfiguration", want KubeProxyConfiguration`}},
		{name: "type error", in: v1 + "oomScoreAdj: lots\n", wantErr: []string{"decoding"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := LoadWithOptions([]byte(tc.in), tc.opts)
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatalf("no error, want one mentioning %q", tc.wantErr)
				}
				for _, want := range tc.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not mention %q", err, want)
					}
				}
				if cfg != nil {
					t.Error("a configuration was returned with the error")
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if len(warnings) != len(tc.wantWarn) {
				t.Fatalf("warnings %q, want %d matching %q", warnings, len(tc.wantWarn), tc.wantWarn)
			}
			for i, want := range tc.wantWarn {
				if !strings.Contains(warnings[i], want) {
					t.Errorf("warning %q does not mention %q", warnings[i], want)
				}
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestStrictErrorType(t *testing.T) {
	_, _, err := Load([]byte(v2 + "iptables:\n  nope: 1\n"))
	var se *StrictError
	if !errors.As(err, &se) {
		t.Fatalf("error %v is not a *StrictError", err)
	}
	want := []Problem{{Field: "iptables.nope", Line: 4, Column: 3, Message: `unknown field "iptables.nope"`}}
	if diff := cmp.Diff(want, se.Problems); diff != "" {
		t.Error(diff)
	}
}

func TestLoadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(path, []byte(v1+"bogus: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadFile(path, Options{}); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("error %v should name %s", err, path)
	}
	if _, _, err := LoadFile(filepath.Join(dir, "missing.yaml"), Options{}); err == nil {
		t.Error("missing file: no error")
	}
}

func TestEncode(t *testing.T) {
	for _, gv := range []schema.GroupVersion{configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion} {
		t.Run(gv.Version, func(t *testing.T) {
			cfg, _, err := Load([]byte(v2 + "mode: nftables\nnodeIPOverride: [10.0.0.1]\ndetectLocal:\n  clusterCIDRs: [10.0.0.0/8]\n"))
			if err != nil {
				t.Fatal(err)
			}
			before := cfg.DeepCopy()
			out, err := Encode(cfg, gv)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(before, cfg); diff != "" {
				t.Errorf("Encode changed its input:\n%s", diff)
			}
			if !strings.Contains(string(out), "apiVersion: "+gv.String()+"\n") {
				t.Errorf("output lacks apiVersion %s:\n%s", gv, out)
			}
			again, _, err := Load(out)
			if err != nil {
				t.Fatalf("re-loading the output: %v\n%s", err, out)
			}
			// Everything set above survives both versions.
			if again.Mode != cfg.Mode || again.BindAddress != "10.0.0.1" || cmp.Diff(cfg.DetectLocal, again.DetectLocal) != "" {
				t.Errorf("lost settings through %s:\n%s", gv, out)
			}
		})
	}
	if _, err := Encode(&config.KubeProxyConfiguration{}, schema.GroupVersion{Group: config.GroupName, Version: "v9"}); err == nil {
		t.Error("unknown version: no error")
	}
}

// FuzzLoad: no input makes Load panic, and whatever it accepts can be written in
// both versions and read back.
func FuzzLoad(f *testing.F) {
	seeds, _ := filepath.Glob("../scheme/testdata/*/*/*.yaml")
	more, _ := filepath.Glob("../scheme/testdata/*/*.yaml")
	for _, p := range append(seeds, more...) {
		if data, err := os.ReadFile(p); err == nil {
			f.Add(data)
		}
	}
	for _, s := range []string{
		v1, v2, "", "{}", "[]", "null", v1 + "featureGates: {a: true, a: false}\n",
		v2 + "linux: &a {conntrack: *a}\n", v1 + "<<: {mode: ipvs}\n",
		v2 + "nodeIPOverride: [::, x]\nipFamilyPolicy: 7\n", v1 + "clusterCIDR: ',,,'\n",
		v1 + "logging: {options: {json: {infoBufferSize: 1Gi}}}\n",
		v1 + "linux: &a {conntrack: *a, oomScoreAdj: [1]}\nconfigHardFail: yes\nsyncPeriod: {}\n",
		v1 + "detectLocal: {clusterCIDRs: [a], bogus: 1}\nwindows: null\n", v2 + "---\n---\n" + v1,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := LoadWithOptions(data, Options{HonorConfigHardFail: true})
		if err != nil {
			return
		}
		if cfg == nil {
			t.Fatal("nil configuration without an error")
		}
		for _, gv := range []schema.GroupVersion{configv1alpha1.SchemeGroupVersion, configv1alpha2.SchemeGroupVersion} {
			out, err := Encode(cfg, gv)
			if err != nil {
				t.Fatalf("encoding an accepted configuration as %s: %v", gv, err)
			}
			if _, _, err := Load(out); err != nil {
				t.Fatalf("re-loading our own %s output: %v\n%s", gv, err, out)
			}
		}
	})
}
