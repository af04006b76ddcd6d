package v1alpha1

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
)

func TestSetDefaults(t *testing.T) {
	for _, tc := range []struct {
		name  string
		in    configv1alpha1.KubeProxyConfiguration
		check func(*testing.T, *configv1alpha1.KubeProxyConfiguration)
	}{
		{name: "empty", check: func(t *testing.T, c *configv1alpha1.KubeProxyConfiguration) {
			want := []string{"0.0.0.0", "0.0.0.0:10256", "127.0.0.1:10249"}
			if diff := cmp.Diff(want, []string{c.BindAddress, c.HealthzBindAddress, c.MetricsBindAddress}); diff != "" {
				t.Error(diff)
			}
			if *c.OOMScoreAdj != -999 || *c.IPTables.MasqueradeBit != 14 || *c.NFTables.MasqueradeBit != 14 || !*c.IPTables.LocalhostNodePorts {
				t.Errorf("wrong scalar defaults: %+v", c)
			}
			if c.IPTables.SyncPeriod.Duration != 30*time.Second || c.IPTables.MinSyncPeriod.Duration != time.Second ||
				c.IPVS.SyncPeriod.Duration != 30*time.Second || c.IPVS.MinSyncPeriod.Duration != 0 ||
				c.NFTables.SyncPeriod.Duration != 30*time.Second || c.NFTables.MinSyncPeriod.Duration != time.Second {
				t.Errorf("wrong sync defaults: %+v %+v %+v", c.IPTables, c.IPVS, c.NFTables)
			}
			if *c.Conntrack.MaxPerCore != 32768 || *c.Conntrack.Min != 131072 ||
				c.Conntrack.TCPEstablishedTimeout.Duration != 24*time.Hour || c.Conntrack.TCPCloseWaitTimeout.Duration != time.Hour {
				t.Errorf("wrong conntrack defaults: %+v", c.Conntrack)
			}
			if c.ConfigSyncPeriod.Duration != 15*time.Minute || c.ClientConnection.QPS != 5 || c.ClientConnection.Burst != 10 ||
				c.ClientConnection.ContentType != "application/vnd.kubernetes.protobuf" || c.FeatureGates == nil || c.Logging.Format != "text" {
				t.Errorf("wrong generic defaults: %+v", c)
			}
		}},
		{name: "ipv6 bindAddress gives ipv6 servers", in: configv1alpha1.KubeProxyConfiguration{BindAddress: "fd00::1"},
			check: func(t *testing.T, c *configv1alpha1.KubeProxyConfiguration) {
				if c.HealthzBindAddress != "[::]:10256" || c.MetricsBindAddress != "[::1]:10249" {
					t.Errorf("healthz %q metrics %q", c.HealthzBindAddress, c.MetricsBindAddress)
				}
			}},
		{name: "bare IPs get the default ports", in: configv1alpha1.KubeProxyConfiguration{HealthzBindAddress: "10.0.0.1", MetricsBindAddress: "::1"},
			check: func(t *testing.T, c *configv1alpha1.KubeProxyConfiguration) {
				if c.HealthzBindAddress != "10.0.0.1:10256" || c.MetricsBindAddress != "[::1]:10249" {
					t.Errorf("healthz %q metrics %q", c.HealthzBindAddress, c.MetricsBindAddress)
				}
			}},
		{name: "set values are kept", in: configv1alpha1.KubeProxyConfiguration{
			OOMScoreAdj: ptr.To[int32](0),
			IPTables:    configv1alpha1.KubeProxyIPTablesConfiguration{MasqueradeBit: ptr.To[int32](0), LocalhostNodePorts: ptr.To(false)},
			Conntrack:   configv1alpha1.KubeProxyConntrackConfiguration{MaxPerCore: ptr.To[int32](0), TCPCloseWaitTimeout: &metav1.Duration{}},
		}, check: func(t *testing.T, c *configv1alpha1.KubeProxyConfiguration) {
			if *c.OOMScoreAdj != 0 || *c.IPTables.MasqueradeBit != 0 || *c.IPTables.LocalhostNodePorts || *c.Conntrack.MaxPerCore != 0 ||
				c.Conntrack.TCPCloseWaitTimeout.Duration != 0 {
				t.Errorf("explicit zero values were overwritten: %+v", c)
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
