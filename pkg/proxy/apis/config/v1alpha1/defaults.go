package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	logsapi "k8s.io/component-base/logs/api/v1"
	"k8s.io/utils/ptr"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/internal/addr"
)

// Defaults shared with the flags of the binary; they are upstream's values.
const (
	defaultSyncPeriod       = 30 * time.Second
	defaultMinSyncPeriod    = 1 * time.Second
	defaultConfigSyncPeriod = 15 * time.Minute
	defaultMasqueradeBit    = int32(14)
	defaultMaxPerCore       = int32(32 * 1024)
	defaultConntrackMin     = int32(128 * 1024)
	defaultTCPEstablished   = 24 * time.Hour
	// A CLOSE_WAIT entry that expires before the local socket closes leaves the
	// later FIN un-NATed; an hour outlasts typical server-side timeouts.
	defaultTCPCloseWait = 1 * time.Hour
	defaultContentType  = "application/vnd.kubernetes.protobuf"
	defaultQPS          = 5.0
	defaultBurst        = 10
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_KubeProxyConfiguration fills in every unset field of a v1alpha1
// configuration with upstream's default. Only fields whose zero value is not a
// meaningful setting are defaulted; note that ipvs.minSyncPeriod is not, as
// upstream.
func SetDefaults_KubeProxyConfiguration(obj *configv1alpha1.KubeProxyConfiguration) {
	if obj.BindAddress == "" {
		obj.BindAddress = "0.0.0.0"
	}
	healthzHost, metricsHost := addr.ServerHosts(obj.BindAddress)
	obj.HealthzBindAddress = addr.ServerAddress(obj.HealthzBindAddress, healthzHost, config.ProxyHealthzPort)
	obj.MetricsBindAddress = addr.ServerAddress(obj.MetricsBindAddress, metricsHost, config.ProxyStatusPort)

	if obj.OOMScoreAdj == nil {
		obj.OOMScoreAdj = ptr.To(int32(config.KubeProxyOOMScoreAdj))
	}

	defaultDuration(&obj.IPTables.SyncPeriod, defaultSyncPeriod)
	defaultDuration(&obj.IPTables.MinSyncPeriod, defaultMinSyncPeriod)
	if obj.IPTables.LocalhostNodePorts == nil {
		obj.IPTables.LocalhostNodePorts = ptr.To(true)
	}
	if obj.IPTables.MasqueradeBit == nil {
		obj.IPTables.MasqueradeBit = ptr.To(defaultMasqueradeBit)
	}
	defaultDuration(&obj.IPVS.SyncPeriod, defaultSyncPeriod)
	defaultDuration(&obj.NFTables.SyncPeriod, defaultSyncPeriod)
	defaultDuration(&obj.NFTables.MinSyncPeriod, defaultMinSyncPeriod)
	if obj.NFTables.MasqueradeBit == nil {
		obj.NFTables.MasqueradeBit = ptr.To(defaultMasqueradeBit)
	}

	if obj.Conntrack.MaxPerCore == nil {
		obj.Conntrack.MaxPerCore = ptr.To(defaultMaxPerCore)
	}
	if obj.Conntrack.Min == nil {
		obj.Conntrack.Min = ptr.To(defaultConntrackMin)
	}
	if obj.Conntrack.TCPEstablishedTimeout == nil {
		obj.Conntrack.TCPEstablishedTimeout = &metav1.Duration{Duration: defaultTCPEstablished}
	}
	if obj.Conntrack.TCPCloseWaitTimeout == nil {
		obj.Conntrack.TCPCloseWaitTimeout = &metav1.Duration{Duration: defaultTCPCloseWait}
	}
	defaultDuration(&obj.ConfigSyncPeriod, defaultConfigSyncPeriod)

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
