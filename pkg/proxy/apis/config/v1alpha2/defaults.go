package v1alpha2

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/utils/ptr"

	configv1alpha2 "k8s.io/kube-proxy/config/v1alpha2"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/internal/addr"
)

// The v1alpha1 defaults, except where KEP-784 changed them (see
// SetDefaults_KubeProxyConfiguration).
const (
	defaultSyncPeriod       = 30 * time.Second
	defaultMinSyncPeriod    = 1 * time.Second
	defaultConfigSyncPeriod = 15 * time.Minute
	defaultMasqueradeBit    = int32(14)
	defaultMaxPerCore       = int32(32 * 1024)
	defaultConntrackMin     = int32(128 * 1024)
	defaultTCPEstablished   = 24 * time.Hour
	defaultTCPCloseWait     = 1 * time.Hour
	defaultContentType      = "application/vnd.kubernetes.protobuf"
	defaultQPS              = 5.0
	defaultBurst            = 10
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_KubeProxyConfiguration fills in every unset field of a v1alpha2
// configuration. The defaults are v1alpha1's except: configHardFail and
// bindAddressHardFail are true, iptables.localhostNodePorts is false (it needs
// route_localnet), ipFamilyPolicy is PreferDualStack, and the single syncPeriod
// and minSyncPeriod default to 30s and 1s for every backend (minSyncPeriod only
// when absent: an explicit 0s is kept).
func SetDefaults_KubeProxyConfiguration(obj *configv1alpha2.KubeProxyConfiguration) {
	if obj.ConfigHardFail == nil {
		obj.ConfigHardFail = ptr.To(true)
	}
	if obj.BindAddressHardFail == nil {
		obj.BindAddressHardFail = ptr.To(true)
	}
	if obj.IPFamilyPolicy == "" {
		obj.IPFamilyPolicy = configv1alpha2.IPFamilyPolicy(config.IPFamilyPolicyPreferDualStack)
	}

	primary := ""
	if len(obj.NodeIPOverride) > 0 {
		primary = obj.NodeIPOverride[0]
	}
	healthzHost, metricsHost := addr.ServerHosts(primary)
	obj.HealthzBindAddress = addr.ServerAddress(obj.HealthzBindAddress, healthzHost, config.ProxyHealthzPort)
	obj.MetricsBindAddress = addr.ServerAddress(obj.MetricsBindAddress, metricsHost, config.ProxyStatusPort)

	defaultDuration(&obj.SyncPeriod, defaultSyncPeriod)
	if obj.MinSyncPeriod == nil {
		obj.MinSyncPeriod = &metav1.Duration{Duration: defaultMinSyncPeriod}
	}
	defaultDuration(&obj.ConfigSyncPeriod, defaultConfigSyncPeriod)

	if obj.IPTables.MasqueradeBit == nil {
		obj.IPTables.MasqueradeBit = ptr.To(defaultMasqueradeBit)
	}
	if obj.IPTables.LocalhostNodePorts == nil {
		obj.IPTables.LocalhostNodePorts = ptr.To(false)
	}
	if obj.IPVS.MasqueradeBit == nil {
		obj.IPVS.MasqueradeBit = ptr.To(defaultMasqueradeBit)
	}
	if obj.NFTables.MasqueradeBit == nil {
		obj.NFTables.MasqueradeBit = ptr.To(defaultMasqueradeBit)
	}

	if obj.Linux.OOMScoreAdj == nil {
		obj.Linux.OOMScoreAdj = ptr.To(int32(config.KubeProxyOOMScoreAdj))
	}
	ct := &obj.Linux.Conntrack
	if ct.MaxPerCore == nil {
		ct.MaxPerCore = ptr.To(defaultMaxPerCore)
	}
	if ct.Min == nil {
		ct.Min = ptr.To(defaultConntrackMin)
	}
	if ct.TCPEstablishedTimeout == nil {
		ct.TCPEstablishedTimeout = &metav1.Duration{Duration: defaultTCPEstablished}
	}
	if ct.TCPCloseWaitTimeout == nil {
		ct.TCPCloseWaitTimeout = &metav1.Duration{Duration: defaultTCPCloseWait}
	}

	if obj.ClientConnection.ContentType == "" {
		obj.ClientConnection.ContentType = defaultContentType
	}
	if obj.ClientConnection.QPS == 0 {
		obj.ClientConnection.QPS = defaultQPS
	}
	if obj.ClientConnection.Burst == 0 {
		obj.ClientConnection.Burst = defaultBurst
	}
	if obj.FeatureGates == nil {
		obj.FeatureGates = map[string]bool{}
	}
	logsapi.SetRecommendedLoggingConfiguration(&obj.Logging)
}

func defaultDuration(d *metav1.Duration, def time.Duration) {
	if d.Duration == 0 {
		d.Duration = def
	}
}
