package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"k8s.io/component-base/featuregate"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/loader"
)

// parseAndComplete runs the flag and config handling the command runs, without
// starting anything.
func parseAndComplete(t *testing.T, args []string) (*Options, error) {
	t.Helper()
	restoreFeatureGates(t)
	o := NewOptions()
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if err := o.Complete(fs); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// restoreFeatureGates puts kube-proxy's process-wide gates back as they are now when the
// test ends: Complete applies --feature-gates to them, and a later test in the package
// would otherwise run with, say, KubeProxyIPVS=false.
func restoreFeatureGates(t *testing.T) {
	t.Helper()
	saved := map[string]bool{}
	for f := range features.DefaultMutableFeatureGate.GetAll() {
		saved[string(f)] = features.DefaultFeatureGate.Enabled(f)
	}
	t.Cleanup(func() {
		// Only what changed is set back: setting a GA or deprecated gate logs a warning.
		changed := map[string]bool{}
		for name, on := range saved {
			if features.DefaultFeatureGate.Enabled(featuregate.Feature(name)) != on {
				changed[name] = on
			}
		}
		if len(changed) == 0 {
			return
		}
		if err := features.DefaultMutableFeatureGate.SetFromMap(changed); err != nil {
			t.Errorf("restoring feature gates: %v", err)
		}
	})
}

func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

const v1alpha1Header = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n"
const v1alpha2Header = "apiVersion: kubeproxy.config.k8s.io/v1alpha2\nkind: KubeProxyConfiguration\n"

func TestOptionsPrecedence(t *testing.T) {
	tests := []struct {
		name   string
		config string // written to a file and passed with --config when set
		args   []string
		check  func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration)
	}{
		{
			name: "defaults: iptables mode, ClusterCIDR detection, upstream addresses",
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "mode", c.Mode, kubeproxyconfig.ProxyModeIPTables)
				expect(t, "detectLocalMode", c.DetectLocalMode, kubeproxyconfig.LocalModeClusterCIDR)
				expect(t, "healthzBindAddress", c.HealthzBindAddress, "0.0.0.0:10256")
				expect(t, "metricsBindAddress", c.MetricsBindAddress, "127.0.0.1:10249")
				expect(t, "syncPeriod", c.SyncPeriod.Duration, 30*time.Second)
				expect(t, "oomScoreAdj", *c.Linux.OOMScoreAdj, int32(-999))
			},
		},
		{
			name: "flags without a config file apply, nftables defaults nodePortAddresses to primary",
			args: []string{"--proxy-mode=nftables", "--cluster-cidr=198.19.0.0/16,fd00:1::/48", "--iptables-sync-period=10s", "--masquerade-all"},
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "mode", c.Mode, kubeproxyconfig.ProxyModeNFTables)
				expect(t, "nodePortAddresses", strings.Join(c.NodePortAddresses, ","), "primary")
				expect(t, "clusterCIDRs", strings.Join(c.DetectLocal.ClusterCIDRs, ","), "198.19.0.0/16,fd00:1::/48")
				expect(t, "syncPeriod", c.SyncPeriod.Duration, 10*time.Second)
				expect(t, "masqueradeAll", c.Linux.MasqueradeAll, true)
			},
		},
		{
			name: "ipvs sync flags are ignored outside ipvs mode",
			args: []string{"--ipvs-sync-period=7s", "--ipvs-min-sync-period=3s"},
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "syncPeriod", c.SyncPeriod.Duration, 30*time.Second)
				expect(t, "minSyncPeriod", c.MinSyncPeriod.Duration, time.Second)
			},
		},
		{
			// (--metrics-port=0 fails validation, upstream too: metricsBindAddress is required.)
			name: "deprecated port: 0 disables the health server",
			args: []string{"--healthz-port=0"},
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "healthzBindAddress", c.HealthzBindAddress, "")
			},
		},
		{
			name: "deprecated port applies to an address without one",
			args: []string{"--healthz-bind-address=198.18.0.10", "--healthz-port=12345"},
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "healthzBindAddress", c.HealthzBindAddress, "198.18.0.10:12345")
			},
		},
		{
			name:   "a v1alpha1 config file replaces the flags, except logging and hostname-override",
			config: v1alpha1Header + "mode: iptables\nclusterCIDR: 198.19.0.0/16\nlogging:\n  verbosity: 2\n",
			args:   []string{"--proxy-mode=nftables", "--masquerade-all", "-v=4", "--hostname-override=  Node-1 "},
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "mode", c.Mode, kubeproxyconfig.ProxyModeIPTables)
				expect(t, "masqueradeAll", c.Linux.MasqueradeAll, false)
				expect(t, "verbosity", int(c.Logging.Verbosity), 4)
				expect(t, "hostnameOverride", c.HostnameOverride, "node-1")
				expect(t, "clusterCIDRs", strings.Join(c.DetectLocal.ClusterCIDRs, ","), "198.19.0.0/16")
			},
		},
		{
			name:   "a v1alpha1 file with an unknown field is read leniently, as upstream",
			config: v1alpha1Header + "mode: nftables\nnoSuchField: 1\n",
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "mode", c.Mode, kubeproxyconfig.ProxyModeNFTables)
			},
		},
		{
			name:   "a v1alpha2 file",
			config: v1alpha2Header + "mode: nftables\nsyncPeriod: 45s\n",
			check: func(t *testing.T, c *kubeproxyconfig.KubeProxyConfiguration) {
				expect(t, "mode", c.Mode, kubeproxyconfig.ProxyModeNFTables)
				expect(t, "syncPeriod", c.SyncPeriod.Duration, 45*time.Second)
				expect(t, "configHardFail", c.ConfigHardFail, true)
				expect(t, "bindAddressHardFail", c.BindAddressHardFail, true)
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.config != "" {
				args = append([]string{"--config=" + writeConfig(t, tc.config)}, args...)
			}
			o, err := parseAndComplete(t, args)
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tc.check(t, o.config)
		})
	}
}

func expect[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// Bad input must fail, naming the flag or field and the value.
func TestOptionsErrors(t *testing.T) {
	tests := []struct {
		name   string
		config string
		args   []string
		want   []string
		// notWant lists substrings the error must not contain.
		notWant []string
	}{
		{name: "unknown flag", args: []string{"--no-such-flag"}, want: []string{"no-such-flag"}},
		{name: "bad int", args: []string{"--iptables-masquerade-bit=abc"}, want: []string{"iptables-masquerade-bit", "abc"}},
		{name: "bad IP", args: []string{"--bind-address=1.2.3"}, want: []string{"bind-address", "1.2.3"}},
		{name: "bad ip:port", args: []string{"--metrics-bind-address=127.0.0.1:99999"}, want: []string{"metrics-bind-address", "99999"}},
		{name: "out of range value", args: []string{"--iptables-masquerade-bit=40"}, want: []string{"KubeProxyIPTablesConfiguration.MasqueradeBit", "40"}},
		{name: "bad mode", args: []string{"--proxy-mode=bogus"}, want: []string{"mode", "bogus"}},
		{name: "ipvs without its feature gate", args: []string{"--proxy-mode=ipvs", "--feature-gates=KubeProxyIPVS=false"}, want: []string{"ipvs needs the KubeProxyIPVS feature gate"}},
		{name: "empty hostname override", args: []string{"--hostname-override=  "}, want: []string{"hostname-override"}},
		{name: "manifests with kubeconfig", args: []string{"--manifests=x", "--kubeconfig=y"}, want: []string{"--manifests", "--kubeconfig"}},
		{name: "dry run with cleanup", args: []string{"--dry-run", "--cleanup"}, want: []string{"--dry-run"}},
		{name: "bad write-config-version", args: []string{"--write-config-version=v2"}, want: []string{"write-config-version", "v2"}},
		{name: "unknown feature gate", args: []string{"--feature-gates=NoSuchGateAnywhere=true"}, want: []string{"NoSuchGateAnywhere"}},
		{
			name:    "minimum sync period above the period names each with its own value",
			args:    []string{"--iptables-min-sync-period", "1h", "--iptables-sync-period", "1s"},
			want:    []string{`KubeProxyConfiguration.SyncPeriod: Invalid value: "1s"`, "KubeProxyConfiguration.MinSyncPeriod (1h0m0s)"},
			notWant: []string{`Invalid value: "1h0m0s"`},
		},
		{
			name:    "overflowing duration says so",
			args:    []string{"--iptables-sync-period", "999999999h"},
			want:    []string{"--iptables-sync-period", "999999999h", "out of range"},
			notWant: []string{"must be a duration"},
		},
		{
			name:    "overflowing negative duration on another duration flag",
			args:    []string{"--conntrack-tcp-timeout-established=-9999999999999999999ns"},
			want:    []string{"--conntrack-tcp-timeout-established", "-9999999999999999999ns", "out of range"},
			notWant: []string{"must be a duration"},
		},
		{
			name:    "malformed duration keeps saying what a duration looks like",
			args:    []string{"--config-sync-period=soon"},
			want:    []string{"--config-sync-period", "soon", `like "30s" or "5m"`},
			notWant: []string{"out of range"},
		},
		{
			name:    "duration without a unit is malformed, not out of range",
			args:    []string{"--iptables-sync-period=99999999999999999999"},
			want:    []string{"--iptables-sync-period", `like "30s" or "5m"`},
			notWant: []string{"out of range"},
		},
		{name: "missing config file", args: []string{"--config=/nonexistent/kp.yaml"}, want: []string{"/nonexistent/kp.yaml"}},
		{
			name:   "invalid v1alpha1 value names the field path",
			config: v1alpha1Header + "iptables:\n  masqueradeBit: 33\n",
			// Upstream's field paths name the Go types.
			want: []string{"KubeProxyIPTablesConfiguration.MasqueradeBit", "33"},
		},
		{
			name:   "invalid v1alpha2 value names the field path",
			config: v1alpha2Header + "mode: nftables\nsyncPeriod: -1s\n",
			want:   []string{"KubeProxyConfiguration.SyncPeriod", "-1s"},
		},
		{
			name:   "v1alpha2 unknown field is fatal with configHardFail (its default), with the line",
			config: v1alpha2Header + "mode: nftables\nnoSuchField: 1\n",
			want:   []string{"noSuchField", "line 4"},
		},
		{
			// Even a lenient v1alpha1 file: the second document is not silently dropped.
			name:   "multi-document config file names the file and the document",
			config: v1alpha1Header + "mode: iptables\n---\n" + v1alpha1Header + "mode: bogus\n",
			want:   []string{"config.yaml", "document 2", "line 5"},
		},
		{
			name:   "garbage file",
			config: "{{{{",
			want:   []string{"config"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if tc.config != "" {
				args = append([]string{"--config=" + writeConfig(t, tc.config)}, args...)
			}
			_, err := parseAndComplete(t, args)
			if err == nil {
				t.Fatal("expected an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q mentions %q", err, w)
				}
			}
		})
	}
}

// With configHardFail false, a v1alpha2 file's unknown field only warns.
func TestOptionsConfigHardFailFalseWarns(t *testing.T) {
	path := writeConfig(t, v1alpha2Header+"configHardFail: false\nmode: nftables\nnoSuchField: 1\n")
	o, err := parseAndComplete(t, []string{"--config=" + path})
	if err != nil {
		t.Fatalf("configHardFail=false must only warn, got %v", err)
	}
	expect(t, "mode", o.config.Mode, kubeproxyconfig.ProxyModeNFTables)
}

// captureKlog sends the global klog output, which logWarning writes to, to a
// buffer for the rest of the test.
func captureKlog(t *testing.T) *lockedLog {
	t.Helper()
	state := klog.CaptureState()
	t.Cleanup(state.Restore)
	var buf lockedLog
	klog.LogToStderr(false)
	klog.SetOutput(&buf)
	return &buf
}

// lockedLog is what klog wrote, readable while it still writes.
type lockedLog struct{ lockedBuffer }

// lines returns the logged lines of klog severity sev ('I', 'W', 'E').
func (l *lockedLog) lines(sev byte) []string {
	var out []string
	for _, line := range strings.Split(l.String(), "\n") {
		if len(line) > 0 && line[0] == sev {
			out = append(out, line)
		}
	}
	return out
}

// A v1alpha1 file setting v1alpha2-only fields is read, as upstream reads it, but
// each ignored value is a warning naming the field and the value used instead;
// with configHardFail: true in the file it is an error.
func TestOptionsV1alpha2OnlyFieldsInV1alpha1(t *testing.T) {
	for _, tc := range []struct {
		name    string
		config  string
		wantErr bool
		// want lists substrings of one warning line each.
		want []string
	}{
		{
			name:   "conntrack under linux",
			config: v1alpha1Header + "mode: iptables\nlinux:\n  conntrack:\n    maxPerCore: 0\n",
			want:   []string{"linux.conntrack.maxPerCore", "its value 0 is ignored and 32768 is used", "conntrack.maxPerCore"},
		},
		{
			name:   "syncPeriod at the top",
			config: v1alpha1Header + "mode: iptables\nsyncPeriod: 5s\n",
			want:   []string{"syncPeriod", `its value \"5s\" is ignored and \"30s\" is used`, "iptables.syncPeriod"},
		},
		{
			name:    "configHardFail true in the file makes it fatal",
			config:  v1alpha1Header + "configHardFail: true\nlinux:\n  conntrack:\n    maxPerCore: 0\n",
			wantErr: true,
			want:    []string{"linux.conntrack.maxPerCore", "32768 is used"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs := captureKlog(t)
			o, err := parseAndComplete(t, []string{"--config=" + writeConfig(t, tc.config)})
			if tc.wantErr {
				if err == nil {
					t.Fatal("no error")
				}
				for _, w := range tc.want {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not mention %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			expect(t, "maxPerCore", *o.config.Linux.Conntrack.MaxPerCore, int32(32768))
			klog.Flush()
			warnings := logs.lines('W')
			found := false
			for _, line := range warnings {
				all := true
				for _, w := range tc.want {
					all = all && strings.Contains(line, w)
				}
				found = found || all
			}
			if !found {
				t.Errorf("no warning-level line mentions all of %q; warnings:\n%s\ninfo:\n%s",
					tc.want, strings.Join(warnings, "\n"), strings.Join(logs.lines('I'), "\n"))
			}
		})
	}
}

func TestWriteConfig(t *testing.T) {
	for _, tc := range []struct {
		version, wantAPIVersion string
	}{
		{"", "kubeproxy.config.k8s.io/v1alpha2"},
		{"v1alpha1", "kubeproxy.config.k8s.io/v1alpha1"},
		{"kubeproxy.config.k8s.io/v1alpha2", "kubeproxy.config.k8s.io/v1alpha2"},
	} {
		t.Run(tc.version, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.yaml")
			args := []string{"--write-config-to=" + out, "--proxy-mode=nftables", "--cluster-cidr=198.19.0.0/16"}
			if tc.version != "" {
				args = append(args, "--write-config-version="+tc.version)
			}
			o, err := parseAndComplete(t, args)
			if err != nil {
				t.Fatal(err)
			}
			if err := o.Run(t.Context()); err != nil {
				t.Fatal(err)
			}
			data, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(data), "apiVersion: "+tc.wantAPIVersion) {
				t.Fatalf("written config lacks apiVersion %s:\n%s", tc.wantAPIVersion, data)
			}
			// What was written reads back to the same effective configuration.
			back, _, err := loader.Load(data)
			if err != nil {
				t.Fatalf("reading back: %v", err)
			}
			expect(t, "mode", back.Mode, kubeproxyconfig.ProxyModeNFTables)
			expect(t, "clusterCIDRs", strings.Join(back.DetectLocal.ClusterCIDRs, ","), "198.19.0.0/16")
		})
	}
}
