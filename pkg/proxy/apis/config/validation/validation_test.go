package validation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/featuregate"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// validConfig is a defaulted, valid configuration (what reading an empty v1alpha1
// file gives); each case breaks one thing in it.
func validConfig() *config.KubeProxyConfiguration {
	return &config.KubeProxyConfiguration{
		BindAddress:        "0.0.0.0",
		HealthzBindAddress: "0.0.0.0:10256",
		MetricsBindAddress: "127.0.0.1:10249",
		ClientConnection:   componentBaseClient(),
		SyncPeriod:         metav1.Duration{Duration: 30 * time.Second},
		MinSyncPeriod:      metav1.Duration{Duration: time.Second},
		ConfigSyncPeriod:   metav1.Duration{Duration: 15 * time.Minute},
		IPTables:           config.KubeProxyIPTablesConfiguration{MasqueradeBit: ptr.To[int32](14), LocalhostNodePorts: ptr.To(true)},
		IPVS:               config.KubeProxyIPVSConfiguration{MasqueradeBit: ptr.To[int32](14)},
		NFTables:           config.KubeProxyNFTablesConfiguration{MasqueradeBit: ptr.To[int32](14)},
		Linux: config.KubeProxyLinuxConfiguration{
			OOMScoreAdj: ptr.To[int32](-999),
			Conntrack: config.KubeProxyConntrackConfiguration{
				MaxPerCore:            ptr.To[int32](32768),
				Min:                   ptr.To[int32](131072),
				TCPEstablishedTimeout: &metav1.Duration{Duration: 24 * time.Hour},
				TCPCloseWaitTimeout:   &metav1.Duration{Duration: time.Hour},
			},
		},
		Logging:        loggingDefaults(),
		IPFamilyPolicy: config.IPFamilyPolicyPreferDualStack,
	}
}

func testGate(t *testing.T) featuregate.MutableVersionedFeatureGate {
	t.Helper()
	g := featuregate.NewVersionedFeatureGate(features.EmulationVersion)
	if err := features.AddToGate(g); err != nil {
		t.Fatal(err)
	}
	return g
}

func TestValidate(t *testing.T) {
	d := func(s string) metav1.Duration {
		v, err := time.ParseDuration(s)
		if err != nil {
			panic(err)
		}
		return metav1.Duration{Duration: v}
	}
	cases := []struct {
		name   string
		goos   string
		mutate func(*config.KubeProxyConfiguration)
		// want lists "field: type" for every expected error, in order; empty means valid.
		want []string
	}{
		{name: "defaults are valid"},
		{name: "every linux mode", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeNFTables }},
		{name: "ipvs mode with its gate on", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeIPVS }},
		{name: "ipv6 addresses", mutate: func(c *config.KubeProxyConfiguration) {
			c.BindAddress, c.HealthzBindAddress, c.MetricsBindAddress = "::", "[::]:10256", "[::1]:10249"
		}},
		{name: "empty healthz address disables it", mutate: func(c *config.KubeProxyConfiguration) { c.HealthzBindAddress = "" }},
		{name: "zero minSyncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.MinSyncPeriod = d("0s") }},
		{name: "minSyncPeriod equal to syncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.MinSyncPeriod = c.SyncPeriod }},
		{name: "nil conntrack timeouts leave the kernel alone", mutate: func(c *config.KubeProxyConfiguration) {
			c.Linux.Conntrack.TCPEstablishedTimeout, c.Linux.Conntrack.TCPCloseWaitTimeout = nil, nil
		}},
		{name: "masquerade bit edges", mutate: func(c *config.KubeProxyConfiguration) {
			c.IPTables.MasqueradeBit, c.NFTables.MasqueradeBit = ptr.To[int32](0), ptr.To[int32](31)
		}},

		// Masquerade bits.
		{name: "iptables bit 32", mutate: func(c *config.KubeProxyConfiguration) { c.IPTables.MasqueradeBit = ptr.To[int32](32) },
			want: []string{"KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value"}},
		{name: "iptables bit -1", mutate: func(c *config.KubeProxyConfiguration) { c.IPTables.MasqueradeBit = ptr.To[int32](-1) },
			want: []string{"KubeProxyConfiguration.KubeProxyIPTablesConfiguration.MasqueradeBit: Invalid value"}},
		{name: "nftables bit checked in nftables mode", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.NFTables.MasqueradeBit = config.ProxyModeNFTables, ptr.To[int32](40)
		}, want: []string{"KubeProxyConfiguration.KubeProxyNFTablesConfiguration.MasqueradeBit: Invalid value"}},
		{name: "nftables bit ignored in iptables mode, as upstream", mutate: func(c *config.KubeProxyConfiguration) {
			c.NFTables.MasqueradeBit = ptr.To[int32](40)
		}},
		{name: "ipvs bit checked in ipvs mode", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.IPVS.MasqueradeBit = config.ProxyModeIPVS, ptr.To[int32](32)
		}, want: []string{"KubeProxyConfiguration.KubeProxyIPVSConfiguration.MasqueradeBit: Invalid value"}},

		// IPVS.
		{name: "ipvs negative timeouts", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode = config.ProxyModeIPVS
			c.IPVS.TCPTimeout, c.IPVS.TCPFinTimeout, c.IPVS.UDPTimeout = d("-1s"), d("-1s"), d("-1s")
		}, want: []string{
			"KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPTimeout: Invalid value",
			"KubeProxyConfiguration.KubeProxyIPVSConfiguration.TCPFinTimeout: Invalid value",
			"KubeProxyConfiguration.KubeProxyIPVSConfiguration.UDPTimeout: Invalid value",
		}},
		{name: "ipvs bad exclude CIDR", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.IPVS.ExcludeCIDRs = config.ProxyModeIPVS, []string{"10.0.0.0/8", "10.0.0.0/33"}
		}, want: []string{"KubeProxyConfiguration.KubeProxyIPVSConfiguration.ExcludeCidrs[1]: Invalid value"}},
		{name: "ipvs block ignored in iptables mode", mutate: func(c *config.KubeProxyConfiguration) {
			c.IPVS.ExcludeCIDRs = []string{"garbage"}
		}},

		// Linux.
		{name: "conntrack negatives", mutate: func(c *config.KubeProxyConfiguration) {
			ct := &c.Linux.Conntrack
			ct.MaxPerCore, ct.Min = ptr.To[int32](-1), ptr.To[int32](-1)
			ct.TCPEstablishedTimeout, ct.TCPCloseWaitTimeout = &metav1.Duration{Duration: -time.Second}, &metav1.Duration{Duration: -time.Second}
			ct.UDPTimeout, ct.UDPStreamTimeout = d("-1s"), d("-1s")
		}, want: []string{
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.MaxPerCore: Invalid value",
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.Min: Invalid value",
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.TCPEstablishedTimeout: Invalid value",
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.TCPCloseWaitTimeout: Invalid value",
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPTimeout: Invalid value",
			"KubeProxyConfiguration.KubeProxyLinuxConfiguration.KubeProxyConntrackConfiguration.UDPStreamTimeout: Invalid value",
		}},
		{name: "oomScoreAdj too low", mutate: func(c *config.KubeProxyConfiguration) { c.Linux.OOMScoreAdj = ptr.To[int32](-1001) },
			want: []string{"KubeProxyConfiguration.KubeProxyLinuxConfiguration.OOMScoreAdj: Invalid value"}},
		{name: "oomScoreAdj too high", mutate: func(c *config.KubeProxyConfiguration) { c.Linux.OOMScoreAdj = ptr.To[int32](1001) },
			want: []string{"KubeProxyConfiguration.KubeProxyLinuxConfiguration.OOMScoreAdj: Invalid value"}},

		// Modes and platforms.
		{name: "unknown mode", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = "userspace" },
			want: []string{"KubeProxyConfiguration.Mode.ProxyMode: Invalid value"}},
		{name: "kernelspace on linux", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeKernelspace },
			want: []string{"KubeProxyConfiguration.Mode.ProxyMode: Invalid value"}},
		{name: "ipvs with its gate off", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.FeatureGates = config.ProxyModeIPVS, map[string]bool{"KubeProxyIPVS": false}
		}, want: []string{"KubeProxyConfiguration.Mode.ProxyMode: Invalid value"}},
		{name: "kernelspace on windows", goos: "windows", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeKernelspace }},
		{name: "blank mode on windows", goos: "windows"},
		{name: "iptables on windows", goos: "windows", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeIPTables },
			want: []string{"KubeProxyConfiguration.Mode.ProxyMode: Invalid value"}},
		{name: "nftables on windows", goos: "windows", mutate: func(c *config.KubeProxyConfiguration) { c.Mode = config.ProxyModeNFTables },
			want: []string{"KubeProxyConfiguration.Mode.ProxyMode: Invalid value"}},

		// Feature gates.
		{name: "unknown feature gate", mutate: func(c *config.KubeProxyConfiguration) { c.FeatureGates = map[string]bool{"NoSuchGate": true} },
			want: []string{"KubeProxyConfiguration.featureGates: Invalid value"}},
		{name: "gate of another component is tolerated", mutate: func(c *config.KubeProxyConfiguration) {
			c.FeatureGates = map[string]bool{"DynamicResourceAllocation": true}
		}},

		// Client connection.
		{name: "negative burst", mutate: func(c *config.KubeProxyConfiguration) { c.ClientConnection.Burst = -1 },
			want: []string{"KubeProxyConfiguration.ClientConnection.Burst: Invalid value"}},

		// Durations.
		{name: "zero configSyncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.ConfigSyncPeriod = d("0s") },
			want: []string{"KubeProxyConfiguration.ConfigSyncPeriod: Invalid value"}},
		{name: "zero syncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.SyncPeriod, c.MinSyncPeriod = d("0s"), d("0s") },
			want: []string{"KubeProxyConfiguration.SyncPeriod: Invalid value"}},
		{name: "negative minSyncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.MinSyncPeriod = d("-1s") },
			want: []string{"KubeProxyConfiguration.MinSyncPeriod: Invalid value"}},
		{name: "minSyncPeriod above syncPeriod", mutate: func(c *config.KubeProxyConfiguration) { c.MinSyncPeriod = d("31s") },
			want: []string{"KubeProxyConfiguration.SyncPeriod: Invalid value"}},

		// Addresses.
		{name: "bad bindAddress", mutate: func(c *config.KubeProxyConfiguration) { c.BindAddress = "10.0.0.300" },
			want: []string{"KubeProxyConfiguration.BindAddress: Invalid value"}},
		{name: "healthz without port", mutate: func(c *config.KubeProxyConfiguration) { c.HealthzBindAddress = "0.0.0.0" },
			want: []string{"KubeProxyConfiguration.HealthzBindAddress: Invalid value"}},
		{name: "healthz with a hostname", mutate: func(c *config.KubeProxyConfiguration) { c.HealthzBindAddress = "localhost:10256" },
			want: []string{"KubeProxyConfiguration.HealthzBindAddress: Invalid value"}},
		{name: "metrics port 0", mutate: func(c *config.KubeProxyConfiguration) { c.MetricsBindAddress = "127.0.0.1:0" },
			want: []string{"KubeProxyConfiguration.MetricsBindAddress: Invalid value"}},
		{name: "metrics port 65536 and bad host", mutate: func(c *config.KubeProxyConfiguration) { c.MetricsBindAddress = "x:65536" },
			want: []string{"KubeProxyConfiguration.MetricsBindAddress: Invalid value", "KubeProxyConfiguration.MetricsBindAddress: Invalid value"}},
		{name: "metrics address required", mutate: func(c *config.KubeProxyConfiguration) { c.MetricsBindAddress = "" },
			want: []string{"KubeProxyConfiguration.MetricsBindAddress: Invalid value"}},

		// NodePortAddresses.
		{name: "nodePortAddresses keywords and CIDRs", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"primary", "localhost", "all", "10.0.0.0/8", "fd00::/64"}
		}},
		{name: "nodePortAddresses bad CIDR", mutate: func(c *config.KubeProxyConfiguration) { c.NodePortAddresses = []string{"10.0.0.1"} },
			want: []string{"KubeProxyConfiguration.NodePortAddresses[0]: Invalid value"}},
		{name: "nodePortAddresses duplicate keyword", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodePortAddresses = []string{"primary", "primary"}
		}, want: []string{"KubeProxyConfiguration.NodePortAddresses[1]: Duplicate value"}},

		// Metrics.
		{name: "bad showHiddenMetricsForVersion", mutate: func(c *config.KubeProxyConfiguration) { c.ShowHiddenMetricsForVersion = "1.0" },
			want: []string{"KubeProxyConfiguration.ShowHiddenMetricsForVersion: Invalid value"}},

		// Local traffic detection.
		{name: "unknown detectLocalMode", mutate: func(c *config.KubeProxyConfiguration) { c.DetectLocalMode = "Guess" },
			want: []string{"KubeProxyConfiguration.DetectLocalMode: Unsupported value"}},
		{name: "bridge mode without bridge", mutate: func(c *config.KubeProxyConfiguration) { c.DetectLocalMode = config.LocalModeBridgeInterface },
			want: []string{"KubeProxyConfiguration.DetectLocalConfiguration.InterfaceName: Invalid value"}},
		{name: "bridge mode with bridge", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.BridgeInterface = config.LocalModeBridgeInterface, "cbr0"
		}},
		{name: "prefix mode without prefix", mutate: func(c *config.KubeProxyConfiguration) { c.DetectLocalMode = config.LocalModeInterfaceNamePrefix },
			want: []string{"KubeProxyConfiguration.DetectLocalConfiguration.InterfacePrefix: Invalid value"}},
		{name: "cluster CIDR mode without CIDRs is allowed", mutate: func(c *config.KubeProxyConfiguration) { c.DetectLocalMode = config.LocalModeClusterCIDR }},
		{name: "dual-stack cluster CIDRs", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.ClusterCIDRs = config.LocalModeClusterCIDR, []string{"fd00::/48", "10.0.0.0/16"}
		}},
		{name: "bad cluster CIDR", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.ClusterCIDRs = config.LocalModeClusterCIDR, []string{"10.0.0.0/16", "fd00::/129"}
		}, want: []string{"KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs[1]: Invalid value"}},
		{name: "two IPv4 cluster CIDRs", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.ClusterCIDRs = config.LocalModeClusterCIDR, []string{"10.0.0.0/16", "10.1.0.0/16"}
		}, want: []string{"KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value"}},
		{name: "three cluster CIDRs", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.ClusterCIDRs = config.LocalModeClusterCIDR, []string{"10.0.0.0/16", "fd00::/48", "10.1.0.0/16"}
		}, want: []string{"KubeProxyConfiguration.DetectLocalConfiguration.ClusterCIDRs: Invalid value"}},
		{name: "cluster CIDRs ignored in NodeCIDR mode", mutate: func(c *config.KubeProxyConfiguration) {
			c.DetectLocalMode, c.DetectLocal.ClusterCIDRs = config.LocalModeNodeCIDR, []string{"garbage"}
		}},

		// Logging.
		{name: "unknown logging format", mutate: func(c *config.KubeProxyConfiguration) { c.Logging.Format = "xml" },
			want: []string{"KubeProxyConfiguration.logging.format: Invalid value"}},

		// NodeIPOverride and IPFamilyPolicy.
		{name: "single node IP override", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride, c.BindAddress = []string{"10.0.0.5"}, "10.0.0.5"
		}},
		{name: "dual-stack override with RequireDualStack", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride, c.IPFamilyPolicy = []string{"fd00::5", "10.0.0.5"}, config.IPFamilyPolicyRequireDualStack
		}},
		{name: "override replaces bindAddress checks", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride, c.BindAddress = []string{"10.0.0.5"}, ""
		}},
		{name: "override not an IP", mutate: func(c *config.KubeProxyConfiguration) { c.NodeIPOverride = []string{"node-1"} },
			want: []string{"KubeProxyConfiguration.NodeIPOverride[0]: Invalid value"}},
		{name: "override unspecified", mutate: func(c *config.KubeProxyConfiguration) { c.NodeIPOverride = []string{"10.0.0.5", "::"} },
			want: []string{"KubeProxyConfiguration.NodeIPOverride[1]: Invalid value"}},
		{name: "override same family twice", mutate: func(c *config.KubeProxyConfiguration) { c.NodeIPOverride = []string{"10.0.0.5", "10.0.0.6"} },
			want: []string{"KubeProxyConfiguration.NodeIPOverride: Invalid value"}},
		{name: "override three IPs", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride = []string{"10.0.0.5", "fd00::5", "10.0.0.6"}
		}, want: []string{"KubeProxyConfiguration.NodeIPOverride: Too many"}},
		{name: "SingleStack with two node IPs", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride, c.IPFamilyPolicy = []string{"10.0.0.5", "fd00::5"}, config.IPFamilyPolicySingleStack
		}, want: []string{"KubeProxyConfiguration.NodeIPOverride: Invalid value"}},
		{name: "RequireDualStack with one node IP", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride, c.IPFamilyPolicy = []string{"fd00::5"}, config.IPFamilyPolicyRequireDualStack
		}, want: []string{"KubeProxyConfiguration.NodeIPOverride: Invalid value"}},
		{name: "RequireDualStack without override is decided at run time", mutate: func(c *config.KubeProxyConfiguration) {
			c.IPFamilyPolicy = config.IPFamilyPolicyRequireDualStack
		}},
		{name: "unknown IPFamilyPolicy", mutate: func(c *config.KubeProxyConfiguration) { c.IPFamilyPolicy = "DualStack" },
			want: []string{"KubeProxyConfiguration.IPFamilyPolicy: Unsupported value"}},
		{name: "empty IPFamilyPolicy is the upstream behaviour", mutate: func(c *config.KubeProxyConfiguration) { c.IPFamilyPolicy = "" }},

		// Socket load balancing.
		{name: "socket LB with nftables", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.SocketLB = config.ProxyModeNFTables, config.KubeProxySocketLBConfiguration{Enabled: true}
		}},
		{name: "socket LB with the default mode and a cgroup path", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/unified/kubepods"}
		}},
		{name: "socket LB with ipvs", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.SocketLB = config.ProxyModeIPVS, config.KubeProxySocketLBConfiguration{Enabled: true}
		}, want: []string{"KubeProxyConfiguration.SocketLB.Enabled: Invalid value"}},
		{name: "socket LB on windows", goos: "windows", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true}
		}, want: []string{"KubeProxyConfiguration.SocketLB.Enabled: Invalid value"}},
		{name: "socket LB cgroup path without enabled", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{CgroupPath: "/sys/fs/cgroup"}
		}, want: []string{"KubeProxyConfiguration.SocketLB.CgroupPath: Invalid value"}},
		{name: "socket LB relative cgroup path", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "kubepods"}
		}, want: []string{"KubeProxyConfiguration.SocketLB.CgroupPath: Invalid value"}},
		{name: "socket LB cgroup path climbing out", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/../etc"}
		}, want: []string{"KubeProxyConfiguration.SocketLB.CgroupPath: Invalid value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			goos := tc.goos
			if goos == "" {
				goos = "linux"
			}
			errs := validate(cfg, goos, testGate(t))
			got := summarize(errs)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("errors:\n  got  %q\n  want %q\nfull: %v", got, tc.want, errs.ToAggregate())
			}
		})
	}
}

func summarize(errs field.ErrorList) []string {
	var out []string
	for _, e := range errs {
		out = append(out, e.Field+": "+e.Type.String())
	}
	return out
}

func TestValidateUsesProcessGate(t *testing.T) {
	// Validate must work on the shared gate without changing it.
	cfg := validConfig()
	cfg.FeatureGates = map[string]bool{"KubeProxyIPVS": false}
	cfg.Mode = config.ProxyModeIPVS
	if errs := Validate(cfg); len(errs) == 0 {
		t.Fatal("ipvs mode with KubeProxyIPVS=false in the config must be rejected")
	}
	if !features.DefaultFeatureGate.Enabled(features.KubeProxyIPVS) {
		t.Fatal("Validate changed the process-wide feature gate")
	}
}

func TestValidateNonnegativeField(t *testing.T) {
	p := field.NewPath("x")
	if errs := ValidateNonnegativeField(0, p); len(errs) != 0 {
		t.Errorf("0: %v", errs)
	}
	if errs := ValidateNonnegativeField(-1, p); len(errs) != 1 || errs[0].Field != "x" {
		t.Errorf("-1: %v", errs)
	}
}

func componentBaseClient() componentbaseconfig.ClientConnectionConfiguration {
	return componentbaseconfig.ClientConnectionConfiguration{ContentType: "application/vnd.kubernetes.protobuf", QPS: 5, Burst: 10}
}

func loggingDefaults() logsapi.LoggingConfiguration {
	var l logsapi.LoggingConfiguration
	logsapi.SetRecommendedLoggingConfiguration(&l)
	return l
}

// The relation between the two periods is reported on syncPeriod with syncPeriod's
// own value and the minimum it must reach, so that neither value is misattributed.
func TestValidateSyncPeriodRelationMessage(t *testing.T) {
	for _, tc := range []struct {
		name          string
		sync, minSync time.Duration
		want          []string
		notWant       []string
	}{
		{name: "minimum above period", sync: time.Second, minSync: time.Hour,
			want: []string{
				`KubeProxyConfiguration.SyncPeriod: Invalid value: "1s"`,
				"must be greater than or equal to KubeProxyConfiguration.MinSyncPeriod (1h0m0s)",
			},
			notWant: []string{`Invalid value: "1h0m0s"`}},
		{name: "one nanosecond apart", sync: 30 * time.Second, minSync: 30*time.Second + 1,
			want: []string{`SyncPeriod: Invalid value: "30s"`, "MinSyncPeriod (30.000000001s)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration = tc.sync, tc.minSync
			errs := Validate(cfg)
			if len(errs) != 1 {
				t.Fatalf("want one error, got %v", errs)
			}
			msg := errs.ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not mention %q", msg, w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(msg, w) {
					t.Errorf("%q mentions %q", msg, w)
				}
			}
		})
	}
}

// TestValidateSocketLBMessages: the errors name the field, the offending value, and
// the v1alpha2 key and flag that may have set it.
func TestValidateSocketLBMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		mode config.ProxyMode
		sl   config.KubeProxySocketLBConfiguration
		want []string
	}{
		{"ipvs", config.ProxyModeIPVS, config.KubeProxySocketLBConfiguration{Enabled: true},
			[]string{"KubeProxyConfiguration.SocketLB.Enabled", "true", `not "ipvs"`, "--socket-lb", "--proxy-mode"}},
		{"relative path", config.ProxyModeNFTables, config.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "pods/x"},
			[]string{"KubeProxyConfiguration.SocketLB.CgroupPath", `"pods/x"`, "socketLB.cgroupPath", "--socket-lb-cgroup-path"}},
		{"path without enabled", config.ProxyModeNFTables, config.KubeProxySocketLBConfiguration{CgroupPath: "/sys/fs/cgroup"},
			[]string{"KubeProxyConfiguration.SocketLB.CgroupPath", `"/sys/fs/cgroup"`, "socketLB.enabled", "--socket-lb"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			cfg.Mode, cfg.SocketLB = tc.mode, tc.sl
			msg := validate(cfg, "linux", testGate(t)).ToAggregate().Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}
