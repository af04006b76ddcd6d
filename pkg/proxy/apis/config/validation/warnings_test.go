package validation

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

// checkWarnings wants exactly one warning per substring in want, in order.
func checkWarnings(t *testing.T, got []string, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d warnings %q, want %d matching %q", len(got), got, len(want), want)
	}
	for i := range want {
		if !strings.Contains(got[i], want[i]) {
			t.Errorf("warning %d = %q, want it to mention %q", i, got[i], want[i])
		}
	}
}

func dur(s string) metav1.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		panic(err)
	}
	return metav1.Duration{Duration: d}
}

func TestLossWarningsV1alpha1(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   configv1alpha1.KubeProxyConfiguration
		want []string
	}{
		{name: "empty file"},
		{name: "only the active block set", in: configv1alpha1.KubeProxyConfiguration{
			Mode: "ipvs", IPVS: configv1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: dur("10s"), MinSyncPeriod: dur("1s")},
		}},
		{name: "other blocks equal to the active one", in: configv1alpha1.KubeProxyConfiguration{
			Mode:     "nftables",
			IPTables: configv1alpha1.KubeProxyIPTablesConfiguration{SyncPeriod: dur("30s"), MinSyncPeriod: dur("1s")},
			IPVS:     configv1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: dur("30s")},
		}},
		{name: "ipvs sync periods differ in iptables mode", in: configv1alpha1.KubeProxyConfiguration{
			IPVS: configv1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: dur("10s"), MinSyncPeriod: dur("5s")},
		}, want: []string{"ipvs.syncPeriod (10s) is ignored in iptables mode: iptables.syncPeriod (30s)", "ipvs.minSyncPeriod (5s)"}},
		{name: "iptables block differs in nftables mode", in: configv1alpha1.KubeProxyConfiguration{
			Mode:     "nftables",
			IPTables: configv1alpha1.KubeProxyIPTablesConfiguration{SyncPeriod: dur("1m"), MasqueradeAll: true},
		}, want: []string{"iptables.syncPeriod (1m0s) is ignored in nftables mode", "iptables.masqueradeAll (true) is ignored in nftables mode"}},
		{name: "nftables masqueradeAll in ipvs mode", in: configv1alpha1.KubeProxyConfiguration{
			Mode:     "ipvs",
			NFTables: configv1alpha1.KubeProxyNFTablesConfiguration{MasqueradeAll: true},
		}, want: []string{"nftables.masqueradeAll (true) is ignored in ipvs mode: iptables.masqueradeAll (false) applies"}},
		{name: "ipvs minSyncPeriod default is 0", in: configv1alpha1.KubeProxyConfiguration{
			Mode:     "ipvs",
			IPTables: configv1alpha1.KubeProxyIPTablesConfiguration{MinSyncPeriod: dur("1s")},
		}, want: []string{"iptables.minSyncPeriod (1s) is ignored in ipvs mode: ipvs.minSyncPeriod (0s)"}},
		{name: "portRange", in: configv1alpha1.KubeProxyConfiguration{PortRange: "30000-32767"},
			want: []string{`portRange ("30000-32767") is ignored`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			checkWarnings(t, LossWarningsV1alpha1(&tc.in), tc.want)
		})
	}
}

func TestEncodingWarnings(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*config.KubeProxyConfiguration)
		gv     string
		want   []string
	}{
		{name: "defaults to v1alpha1", gv: "v1alpha1"},
		{name: "defaults to v1alpha2", gv: "v1alpha2"},
		{name: "dual-stack override to v1alpha1", gv: "v1alpha1", mutate: func(c *config.KubeProxyConfiguration) {
			c.NodeIPOverride = []string{"10.0.0.1", "fd00::1"}
		}, want: []string{"fd00::1 is dropped"}},
		{name: "policy and hard fail to v1alpha1", gv: "v1alpha1", mutate: func(c *config.KubeProxyConfiguration) {
			c.IPFamilyPolicy, c.ConfigHardFail = config.IPFamilyPolicySingleStack, true
		}, want: []string{"ipFamilyPolicy SingleStack", "configHardFail true"}},
		{name: "separate ipvs bit in iptables mode", gv: "v1alpha1", mutate: func(c *config.KubeProxyConfiguration) {
			c.IPVS.MasqueradeBit = ptr.To[int32](3)
		}, want: []string{"ipvs.masqueradeBit 3 is dropped"}},
		{name: "separate ipvs bit in ipvs mode", gv: "v1alpha1", mutate: func(c *config.KubeProxyConfiguration) {
			c.Mode, c.IPVS.MasqueradeBit = config.ProxyModeIPVS, ptr.To[int32](3)
		}, want: []string{"iptables.masqueradeBit 14 is replaced by ipvs.masqueradeBit 3"}},
		{name: "socket LB to v1alpha1", gv: "v1alpha1", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true, CgroupPath: "/sys/fs/cgroup/pods"}
		}, want: []string{`socketLB (enabled true, cgroupPath "/sys/fs/cgroup/pods")`}},
		{name: "socket LB to v1alpha2", gv: "v1alpha2", mutate: func(c *config.KubeProxyConfiguration) {
			c.SocketLB = config.KubeProxySocketLBConfiguration{Enabled: true}
		}},
		{name: "ipv6 unspecified bindAddress to v1alpha2", gv: "v1alpha2", mutate: func(c *config.KubeProxyConfiguration) {
			c.BindAddress = "::"
		}, want: []string{`bindAddress "::" is dropped`}},
		{name: "bindAddress becomes the override", gv: "v1alpha2", mutate: func(c *config.KubeProxyConfiguration) {
			c.BindAddress = "10.0.0.1"
		}},
		{name: "bindAddress conflicting with override", gv: "v1alpha2", mutate: func(c *config.KubeProxyConfiguration) {
			c.BindAddress, c.NodeIPOverride = "10.0.0.1", []string{"10.0.0.2"}
		}, want: []string{`bindAddress "10.0.0.1" is dropped`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := validConfig()
			if tc.mutate != nil {
				tc.mutate(cfg)
			}
			gv := configv1alpha1.SchemeGroupVersion
			if tc.gv == "v1alpha2" {
				gv = configv1alpha2.SchemeGroupVersion
			}
			checkWarnings(t, EncodingWarnings(cfg, gv), tc.want)
		})
	}
}

func TestWarnings(t *testing.T) {
	cfg := validConfig()
	checkWarnings(t, Warnings(cfg), nil)
	cfg.Mode = config.ProxyModeIPVS
	checkWarnings(t, Warnings(cfg), []string{"ipvs proxy mode is deprecated"})
	cfg.Mode = config.ProxyModeNFTables
	cfg.BindAddress, cfg.NodeIPOverride = "10.0.0.1", []string{"10.0.0.2"}
	checkWarnings(t, Warnings(cfg), []string{"nodeIPOverride [10.0.0.2] takes precedence"})
}
