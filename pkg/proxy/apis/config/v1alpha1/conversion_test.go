package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func secs(n int) metav1.Duration { return metav1.Duration{Duration: time.Duration(n) * time.Second} }

// Each backend block carries distinct values, so the test sees which one the
// conversion picked, both ways.
func TestActiveBlockRule(t *testing.T) {
	for _, tc := range []struct {
		mode              string
		wantSync, wantMin metav1.Duration
		wantMasqAll       bool
	}{
		{mode: "", wantSync: secs(1), wantMin: secs(2), wantMasqAll: true},
		{mode: "iptables", wantSync: secs(1), wantMin: secs(2), wantMasqAll: true},
		{mode: "ipvs", wantSync: secs(3), wantMin: secs(4), wantMasqAll: true},
		{mode: "nftables", wantSync: secs(5), wantMin: secs(6), wantMasqAll: false},
		{mode: "kernelspace", wantSync: secs(1), wantMin: secs(2), wantMasqAll: true},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			in := &configv1alpha1.KubeProxyConfiguration{
				Mode:        configv1alpha1.ProxyMode(tc.mode),
				IPTables:    configv1alpha1.KubeProxyIPTablesConfiguration{SyncPeriod: secs(1), MinSyncPeriod: secs(2), MasqueradeAll: true, MasqueradeBit: ptr.To[int32](9)},
				IPVS:        configv1alpha1.KubeProxyIPVSConfiguration{SyncPeriod: secs(3), MinSyncPeriod: secs(4)},
				NFTables:    configv1alpha1.KubeProxyNFTablesConfiguration{SyncPeriod: secs(5), MinSyncPeriod: secs(6), MasqueradeAll: false},
				ClusterCIDR: "10.0.0.0/8,fd00::/48",
			}
			out := &config.KubeProxyConfiguration{}
			if err := Convert_v1alpha1_KubeProxyConfiguration_To_config_KubeProxyConfiguration(in, out, nil); err != nil {
				t.Fatal(err)
			}
			if out.SyncPeriod != tc.wantSync || out.MinSyncPeriod != tc.wantMin || out.Linux.MasqueradeAll != tc.wantMasqAll {
				t.Errorf("got sync %v min %v masqueradeAll %v", out.SyncPeriod, out.MinSyncPeriod, out.Linux.MasqueradeAll)
			}
			if out.IPVS.MasqueradeBit == nil || *out.IPVS.MasqueradeBit != 9 {
				t.Errorf("IPVS.MasqueradeBit = %v, want iptables' 9", out.IPVS.MasqueradeBit)
			}
			if diff := cmp.Diff([]string{"10.0.0.0/8", "fd00::/48"}, out.DetectLocal.ClusterCIDRs); diff != "" {
				t.Error(diff)
			}
			if out.ConfigHardFail || out.IPFamilyPolicy != config.IPFamilyPolicyPreferDualStack || out.NodeIPOverride != nil {
				t.Errorf("v1alpha1 must read as lenient, PreferDualStack, no override: %v %q %v", out.ConfigHardFail, out.IPFamilyPolicy, out.NodeIPOverride)
			}

			back := &configv1alpha1.KubeProxyConfiguration{}
			if err := Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(out, back, nil); err != nil {
				t.Fatal(err)
			}
			blocks := map[string][2]metav1.Duration{
				"iptables": {back.IPTables.SyncPeriod, back.IPTables.MinSyncPeriod},
				"ipvs":     {back.IPVS.SyncPeriod, back.IPVS.MinSyncPeriod},
				"nftables": {back.NFTables.SyncPeriod, back.NFTables.MinSyncPeriod},
			}
			active := tc.mode
			if active != "ipvs" && active != "nftables" {
				active = "iptables"
			}
			for name, got := range blocks {
				want := [2]metav1.Duration{}
				if name == active {
					want = [2]metav1.Duration{tc.wantSync, tc.wantMin}
				}
				if got != want {
					t.Errorf("back in v1alpha1, %s block = %v, want %v", name, got, want)
				}
			}
			if back.ClusterCIDR != in.ClusterCIDR {
				t.Errorf("clusterCIDR = %q", back.ClusterCIDR)
			}
		})
	}
}

func TestIPVSBitAndNodeIPToV1alpha1(t *testing.T) {
	in := &config.KubeProxyConfiguration{
		Mode:           config.ProxyModeIPVS,
		IPTables:       config.KubeProxyIPTablesConfiguration{MasqueradeBit: ptr.To[int32](14)},
		IPVS:           config.KubeProxyIPVSConfiguration{MasqueradeBit: ptr.To[int32](3)},
		NodeIPOverride: []string{"fd00::1", "10.0.0.1"},
	}
	out := &configv1alpha1.KubeProxyConfiguration{}
	if err := Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(in, out, nil); err != nil {
		t.Fatal(err)
	}
	if *out.IPTables.MasqueradeBit != 3 {
		t.Errorf("in ipvs mode iptables.masqueradeBit = %d, want the ipvs bit 3", *out.IPTables.MasqueradeBit)
	}
	if out.BindAddress != "fd00::1" {
		t.Errorf("bindAddress = %q, want the primary override", out.BindAddress)
	}
	if *in.IPTables.MasqueradeBit != 14 {
		t.Error("conversion modified its input")
	}
}
