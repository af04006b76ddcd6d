package app

import (
	"net"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/loader"
)

// upstreamWindowsFlags are the flags upstream kube-proxy v1.37.2 adds on Windows (its
// addOSFlags), as its --help prints them there.
var upstreamWindowsFlags = map[string]upstreamFlag{
	"windows-service":         {"bool", "false", false},
	"source-vip":              {"string", "", false},
	"network-name":            {"string", "", false},
	"enable-dsr":              {"bool", "false", false},
	"root-hnsendpoint-name":   {"string", "cbr0", false},
	"forward-healthcheck-vip": {"bool", "false", false},
}

// windowsFlagSet registers only the Windows flags, on fresh Options.
func windowsFlagSet() (*Options, *pflag.FlagSet) {
	o := NewOptions()
	fs := pflag.NewFlagSet("kube-proxy", pflag.ContinueOnError)
	fs.SetOutput(&strings.Builder{})
	o.addWindowsFlags(fs)
	return o, fs
}

// The registration the Windows binary uses, checked on every platform: exactly
// upstream's Windows flags, with its types and defaults, none hidden.
func TestWindowsFlagsMatchUpstream(t *testing.T) {
	_, fs := windowsFlagSet()
	var got []string
	fs.VisitAll(func(f *pflag.Flag) {
		got = append(got, f.Name)
		want, ok := upstreamWindowsFlags[f.Name]
		if !ok {
			t.Errorf("--%s: not an upstream Windows flag", f.Name)
			return
		}
		if f.Value.Type() != want.typ || f.DefValue != want.def {
			t.Errorf("--%s: type %q default %q, upstream %q %q", f.Name, f.Value.Type(), f.DefValue, want.typ, want.def)
		}
		if f.Hidden || f.Deprecated != "" || f.Usage == "" {
			t.Errorf("--%s: hidden=%v deprecated=%q usage=%q; upstream shows it with help", f.Name, f.Hidden, f.Deprecated, f.Usage)
		}
	})
	if len(got) != len(upstreamWindowsFlags) {
		sort.Strings(got)
		t.Errorf("registered %v, want the %d upstream Windows flags", got, len(upstreamWindowsFlags))
	}
	// The same names must not clash with the flags every platform has.
	for name := range upstreamWindowsFlags {
		if _, ok := upstreamFlags[name]; ok {
			t.Errorf("--%s is both a common and a Windows flag", name)
		}
	}
}

// Each Windows flag sets the configuration field upstream's does.
func TestWindowsFlagsSetConfig(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want func(c *kubeproxyconfig.KubeProxyConfiguration)
	}{
		{
			name: "defaults",
			want: func(c *kubeproxyconfig.KubeProxyConfiguration) { c.Winkernel.RootHnsEndpointName = "cbr0" },
		},
		{
			name: "every flag",
			args: []string{"--windows-service", "--source-vip=198.18.0.2", "--network-name=cbr-net", "--enable-dsr",
				"--root-hnsendpoint-name=vEthernet (Ethernet)", "--forward-healthcheck-vip"},
			want: func(c *kubeproxyconfig.KubeProxyConfiguration) {
				c.Windows.RunAsService = true
				c.Winkernel = kubeproxyconfig.KubeProxyWinkernelConfiguration{
					SourceVip:             "198.18.0.2",
					NetworkName:           "cbr-net",
					EnableDSR:             true,
					RootHnsEndpointName:   "vEthernet (Ethernet)",
					ForwardHealthCheckVip: true,
				}
			},
		},
		{
			name: "IPv6 source VIP, booleans spelled out",
			args: []string{"--source-vip", "fd00:18::2", "--enable-dsr=false", "--windows-service=true", "--root-hnsendpoint-name="},
			want: func(c *kubeproxyconfig.KubeProxyConfiguration) {
				c.Windows.RunAsService = true
				c.Winkernel.SourceVip = "fd00:18::2"
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o, fs := windowsFlagSet()
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			want := newKubeProxyConfiguration()
			tc.want(want)
			if o.config.Windows != want.Windows || o.config.Winkernel != want.Winkernel {
				t.Errorf("got windows %+v winkernel %+v\nwant windows %+v winkernel %+v", o.config.Windows, o.config.Winkernel, want.Windows, want.Winkernel)
			}
		})
	}
}

func TestWindowsFlagsRejectBadValues(t *testing.T) {
	for _, args := range [][]string{
		{"--enable-dsr=maybe"},
		{"--windows-service=2"},
		{"--forward-healthcheck-vip=yes please"},
		{"--network-name"}, // needs a value
	} {
		_, fs := windowsFlagSet()
		if err := fs.Parse(args); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
}

func TestApplyWindowsDefaults(t *testing.T) {
	tests := []struct {
		name         string
		mode         kubeproxyconfig.ProxyMode
		rootEndpoint string
		wantMode     kubeproxyconfig.ProxyMode
		wantRoot     string
	}{
		{"nothing set", "", "", kubeproxyconfig.ProxyModeKernelspace, "cbr0"},
		{"set values are kept", kubeproxyconfig.ProxyModeKernelspace, "vEthernet (nat)", kubeproxyconfig.ProxyModeKernelspace, "vEthernet (nat)"},
		// Validation, not defaulting, rejects a Linux mode on Windows.
		{"a Linux mode is left for validation", kubeproxyconfig.ProxyModeIPTables, "", kubeproxyconfig.ProxyModeIPTables, "cbr0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := newKubeProxyConfiguration()
			c.Mode, c.Winkernel.RootHnsEndpointName = tc.mode, tc.rootEndpoint
			applyWindowsDefaults(c)
			if c.Mode != tc.wantMode || c.Winkernel.RootHnsEndpointName != tc.wantRoot {
				t.Errorf("got mode %q root %q, want %q %q", c.Mode, c.Winkernel.RootHnsEndpointName, tc.wantMode, tc.wantRoot)
			}
		})
	}
}

func TestWindowsNodeIPs(t *testing.T) {
	v4, v6 := net.ParseIP("198.18.0.10"), net.ParseIP("fd00:18::10")
	tests := []struct {
		primary    v1.IPFamily
		want4      string
		want6      string
		wantLength int
	}{
		{v1.IPv4Protocol, "198.18.0.10", "::", 2},
		{v1.IPv6Protocol, "0.0.0.0", "fd00:18::10", 2},
	}
	for _, tc := range tests {
		ips := map[v1.IPFamily]net.IP{v1.IPv4Protocol: v4, v1.IPv6Protocol: v6}
		windowsNodeIPs(tc.primary, ips)
		if ips[v1.IPv4Protocol].String() != tc.want4 || ips[v1.IPv6Protocol].String() != tc.want6 || len(ips) != tc.wantLength {
			t.Errorf("primary %s: got %v, want %s/%s", tc.primary, ips, tc.want4, tc.want6)
		}
	}
}

// The Windows fields of either config file version reach the internal configuration.
func TestWindowsConfigFileFields(t *testing.T) {
	want := kubeproxyconfig.KubeProxyWinkernelConfiguration{
		NetworkName:           "cbr-net",
		SourceVip:             "198.18.0.2",
		EnableDSR:             true,
		RootHnsEndpointName:   "vEthernet (Ethernet)",
		ForwardHealthCheckVip: true,
	}
	const winkernel = "winkernel:\n  networkName: cbr-net\n  sourceVip: 198.18.0.2\n  enableDSR: true\n  rootHnsEndpointName: vEthernet (Ethernet)\n  forwardHealthCheckVip: true\n"
	for name, body := range map[string]string{
		"v1alpha1": v1alpha1Header + winkernel + "windowsRunAsService: true\n",
		"v1alpha2": v1alpha2Header + winkernel + "windows:\n  runAsService: true\n",
	} {
		t.Run(name, func(t *testing.T) {
			c, err := NewOptions().loadConfigFromFile(writeConfig(t, body))
			if err != nil {
				t.Fatal(err)
			}
			if c.Winkernel != want || !c.Windows.RunAsService {
				t.Errorf("got winkernel %+v windows %+v, want %+v and runAsService", c.Winkernel, c.Windows, want)
			}
			// --write-config-to in either version keeps them.
			for gvName, gv := range writableVersions {
				data, err := loader.Encode(c, gv)
				if err != nil {
					t.Fatalf("encoding as %s: %v", gvName, err)
				}
				back, _, err := loader.Load(data)
				if err != nil {
					t.Fatalf("reading back %s: %v", gvName, err)
				}
				if back.Winkernel != want || !back.Windows.RunAsService {
					t.Errorf("written as %s: got winkernel %+v windows %+v", gvName, back.Winkernel, back.Windows)
				}
			}
		})
	}
}
