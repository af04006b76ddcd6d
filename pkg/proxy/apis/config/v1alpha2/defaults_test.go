package v1alpha2

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
)

func TestSetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    configv1alpha2.KubeProxyConfiguration
		check func(*testing.T, *configv1alpha2.KubeProxyConfiguration)
	}{
		{name: "empty", check: func(t *testing.T, c *configv1alpha2.KubeProxyConfiguration) {
			if !*c.ConfigHardFail || !*c.BindAddressHardFail || *c.IPTables.LocalhostNodePorts || c.IPFamilyPolicy != "PreferDualStack" {
				t.Errorf("KEP-784 defaults missing: %+v", c)
			}
			if *c.IPTables.MasqueradeBit != 14 || *c.IPVS.MasqueradeBit != 14 || *c.NFTables.MasqueradeBit != 14 || *c.Linux.OOMScoreAdj != -999 {
				t.Errorf("wrong bit/oom defaults: %+v", c)
			}
			if c.SyncPeriod.Duration != 30*time.Second || c.MinSyncPeriod.Duration != time.Second || c.ConfigSyncPeriod.Duration != 15*time.Minute {
				t.Errorf("wrong periods: %v %v %v", c.SyncPeriod, c.MinSyncPeriod, c.ConfigSyncPeriod)
			}
			if c.HealthzBindAddress != "0.0.0.0:10256" || c.MetricsBindAddress != "127.0.0.1:10249" {
				t.Errorf("healthz %q metrics %q", c.HealthzBindAddress, c.MetricsBindAddress)
			}
			if *c.Linux.Conntrack.MaxPerCore != 32768 || *c.Linux.Conntrack.Min != 131072 ||
				c.Linux.Conntrack.TCPEstablishedTimeout.Duration != 24*time.Hour || c.Linux.Conntrack.TCPCloseWaitTimeout.Duration != time.Hour {
				t.Errorf("wrong conntrack defaults: %+v", c.Linux.Conntrack)
			}
		}},
		{name: "ipv6 primary override gives ipv6 servers", in: configv1alpha2.KubeProxyConfiguration{NodeIPOverride: []string{"fd00::1", "10.0.0.1"}},
			check: func(t *testing.T, c *configv1alpha2.KubeProxyConfiguration) {
				if c.HealthzBindAddress != "[::]:10256" || c.MetricsBindAddress != "[::1]:10249" {
					t.Errorf("healthz %q metrics %q", c.HealthzBindAddress, c.MetricsBindAddress)
				}
			}},
		{name: "explicit false and zero are kept", in: configv1alpha2.KubeProxyConfiguration{
			ConfigHardFail: ptr.To(false), BindAddressHardFail: ptr.To(false), MinSyncPeriod: &metav1.Duration{},
			IPTables: configv1alpha2.KubeProxyIPTablesConfiguration{LocalhostNodePorts: ptr.To(true)},
			IPVS:     configv1alpha2.KubeProxyIPVSConfiguration{MasqueradeBit: ptr.To[int32](3)},
		}, check: func(t *testing.T, c *configv1alpha2.KubeProxyConfiguration) {
			if *c.ConfigHardFail || *c.BindAddressHardFail || c.MinSyncPeriod.Duration != 0 || !*c.IPTables.LocalhostNodePorts || *c.IPVS.MasqueradeBit != 3 {
				t.Errorf("explicit values were overwritten: %+v", c)
			}
		}},
		{name: "explicit policy kept", in: configv1alpha2.KubeProxyConfiguration{IPFamilyPolicy: "SingleStack"},
			check: func(t *testing.T, c *configv1alpha2.KubeProxyConfiguration) {
				if c.IPFamilyPolicy != "SingleStack" {
					t.Errorf("IPFamilyPolicy = %q", c.IPFamilyPolicy)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := tc.in.DeepCopy()
			SetObjectDefaults_KubeProxyConfiguration(obj)
			tc.check(t, obj)
			again := obj.DeepCopy()
			SetObjectDefaults_KubeProxyConfiguration(again)
			if diff := cmp.Diff(obj, again); diff != "" {
				t.Errorf("defaulting is not idempotent:\n%s", diff)
			}
		})
	}
}
