package config

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfig "k8s.io/component-base/config"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// Well-known values that upstream keeps in k8s.io/kubernetes (pkg/cluster/ports and
// pkg/kubelet/qos). They are re-homed here, next to the configuration whose defaults
// they are, so that nothing has to import k8s.io/kubernetes to learn them.
const (
	// ProxyStatusPort is the default port of the metrics (and /configz, /debug/pprof) server.
	ProxyStatusPort = 10249
	// ProxyHealthzPort is the default port of the health check server.
	ProxyHealthzPort = 10256
	// KubeProxyOOMScoreAdj is the default oom_score_adj of the kube-proxy process: low
	// enough that the kernel kills almost anything else first, since losing the proxy
	// breaks Service traffic for every pod on the node.
	KubeProxyOOMScoreAdj int = -999
)

// KubeProxyConfiguration is everything the proxy server needs to run, in the form
// the binary and the proxiers consume.
//
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type KubeProxyConfiguration struct {
	metav1.TypeMeta

	// Linux holds options that only mean something on Linux, whatever the backend.
	Linux KubeProxyLinuxConfiguration
	// Windows holds options that only mean something on Windows.
	Windows KubeProxyWindowsConfiguration

	// FeatureGates enables or disables named features (name → enabled).
	FeatureGates map[string]bool

	// ClientConnection describes how to reach the API server (kubeconfig, QPS, burst...).
	ClientConnection componentbaseconfig.ClientConnectionConfiguration
	// Logging configures the component-base logging backend.
	Logging logsapi.LoggingConfiguration

	// HostnameOverride, if set, is the Node name to use instead of the OS hostname.
	HostnameOverride string
	// BindAddress overrides the node's primary IP. Despite its name no socket is bound
	// to it; it survives for v1alpha1 compatibility (v1alpha2 uses NodeIPOverride).
	BindAddress string
	// HealthzBindAddress is the "ip:port" the health check server listens on.
	HealthzBindAddress string
	// MetricsBindAddress is the "ip:port" the metrics server listens on.
	MetricsBindAddress string
	// BindAddressHardFail makes failing to bind the healthz or metrics port fatal.
	BindAddressHardFail bool
	// EnableProfiling serves /debug/pprof from the metrics server.
	EnableProfiling bool
	// ShowHiddenMetricsForVersion re-enables metrics hidden since the given release.
	ShowHiddenMetricsForVersion string

	// Mode selects the backend.
	Mode ProxyMode
	// IPTables holds options of the iptables backend.
	IPTables KubeProxyIPTablesConfiguration
	// IPVS holds options of the ipvs backend.
	IPVS KubeProxyIPVSConfiguration
	// Winkernel holds options of the Windows kernelspace backend.
	Winkernel KubeProxyWinkernelConfiguration
	// NFTables holds options of the nftables backend.
	NFTables KubeProxyNFTablesConfiguration

	// DetectLocalMode selects how traffic from local pods is recognised.
	DetectLocalMode LocalMode
	// DetectLocal holds the parameters of the chosen DetectLocalMode.
	DetectLocal DetectLocalConfiguration

	// NodePortAddresses limits the node IPs NodePorts answer on: CIDRs and/or the
	// keywords NodePortAddressesPrimary, NodePortAddressesLocalhost, NodePortAddressesAll.
	// Empty means the backend's default (all for iptables/ipvs, primary for nftables).
	NodePortAddresses []string

	// SyncPeriod is the interval of full resyncs and cleanups; must be > 0.
	SyncPeriod metav1.Duration
	// MinSyncPeriod rate-limits resyncs triggered by changes; 0 syncs on every change.
	MinSyncPeriod metav1.Duration
	// ConfigSyncPeriod is the informer resync period; must be > 0.
	ConfigSyncPeriod metav1.Duration

	// The fields below are not in upstream's internal type: they carry what
	// v1alpha2 (KEP-784) can express and v1alpha1 cannot.

	// ConfigHardFail makes problems in the configuration file fatal. When false the
	// binary logs them and carries on with what could be understood, which is what
	// upstream always did for v1alpha1 files with unknown fields. v1alpha1 files
	// therefore convert to false, v1alpha2 defaults it to true.
	ConfigHardFail bool
	// NodeIPOverride, if set, replaces the node IPs learnt from the Node object: at
	// most one IP per family. It generalises v1alpha1's BindAddress.
	NodeIPOverride []string
	// IPFamilyPolicy says which IP families to proxy. Empty means the upstream
	// behaviour: every family the node has an IP of, best effort.
	IPFamilyPolicy IPFamilyPolicy
	// LocalNode configures the node-local state server (--localnode-serve).
	LocalNode KubeProxyLocalNodeConfiguration
	// SocketLB configures socket-level load balancing (--socket-lb). v1alpha1 cannot
	// express it.
	SocketLB KubeProxySocketLBConfiguration
}

// KubeProxySocketLBConfiguration configures the socket-level load balancer
// (pkg/proxy/ebpf) kube-proxy can run beside the nftables or iptables mode.
type KubeProxySocketLBConfiguration struct {
	// Enabled attaches it; when false, one pinned by an earlier run is removed.
	Enabled bool
	// CgroupPath is the cgroup v2 directory served; empty means the root of the
	// unified hierarchy, found at start-up.
	CgroupPath string
}

// KubeProxyLocalNodeConfiguration configures the node-local state server kube-proxy
// runs beside its backend (KEP-2104). v1alpha1 cannot express it.
type KubeProxyLocalNodeConfiguration struct {
	// ServeAddress is "unix:///absolute/path.sock" or "tcp://host:port"; empty
	// serves nothing.
	ServeAddress string
	// TLSCertFile and TLSPrivateKeyFile are the server's certificate and key (PEM)
	// for TLS on a tcp:// ServeAddress; required for a non-loopback host.
	TLSCertFile       string
	TLSPrivateKeyFile string
	// ClientCAFile, with TLS, requires client certificates signed by its CAs.
	ClientCAFile string
}

// KubeProxyLinuxConfiguration holds Linux-only options that apply to every backend.
type KubeProxyLinuxConfiguration struct {
	// Conntrack holds the conntrack sysctls kube-proxy sets at start.
	Conntrack KubeProxyConntrackConfiguration
	// MasqueradeAll SNATs every packet sent to a Service cluster IP; some CNI
	// plugins need it.
	MasqueradeAll bool
	// OOMScoreAdj is applied to the kube-proxy process; range [-1000, 1000].
	OOMScoreAdj *int32
}

// KubeProxyWindowsConfiguration holds Windows-only options that apply to every backend.
type KubeProxyWindowsConfiguration struct {
	// RunAsService registers kube-proxy with the Windows service control manager.
	RunAsService bool
}

// KubeProxyIPTablesConfiguration holds options of the iptables backend.
type KubeProxyIPTablesConfiguration struct {
	// MasqueradeBit is the fwmark bit (0..31) that marks packets needing SNAT.
	MasqueradeBit *int32
	// LocalhostNodePorts allows NodePorts to be reached on 127.0.0.1 (IPv4 only);
	// this needs route_localnet, which has security implications.
	LocalhostNodePorts *bool
}

// KubeProxyIPVSConfiguration holds options of the ipvs backend.
type KubeProxyIPVSConfiguration struct {
	// Scheduler is the IPVS scheduler ("rr" when empty).
	Scheduler string
	// ExcludeCIDRs are left alone when stale IPVS services are cleaned up.
	ExcludeCIDRs []string
	// StrictARP stops the node answering ARP for addresses on kube-ipvs0.
	StrictARP bool
	// TCPTimeout is the IPVS idle TCP session timeout; 0 keeps the system's value.
	TCPTimeout metav1.Duration
	// TCPFinTimeout is the IPVS TCP timeout after a FIN; 0 keeps the system's value.
	TCPFinTimeout metav1.Duration
	// UDPTimeout is the IPVS UDP timeout; 0 keeps the system's value.
	UDPTimeout metav1.Duration

	// MasqueradeBit is the fwmark bit (0..31) the ipvs backend's iptables rules use.
	// Not in upstream's internal type, where ipvs borrows IPTables.MasqueradeBit;
	// conversion from v1alpha1 copies that value here so both agree.
	MasqueradeBit *int32
}

// KubeProxyNFTablesConfiguration holds options of the nftables backend.
type KubeProxyNFTablesConfiguration struct {
	// MasqueradeBit is the fwmark bit (0..31) that marks packets needing SNAT.
	MasqueradeBit *int32
}

// KubeProxyConntrackConfiguration holds the conntrack sysctls kube-proxy manages.
type KubeProxyConntrackConfiguration struct {
	// MaxPerCore sizes nf_conntrack_max per CPU; 0 leaves the limit (and Min) alone.
	MaxPerCore *int32
	// Min is the floor of nf_conntrack_max whatever MaxPerCore gives.
	Min *int32
	// TCPEstablishedTimeout is the idle timeout of established TCP entries; 0 leaves it.
	TCPEstablishedTimeout *metav1.Duration
	// TCPCloseWaitTimeout is the timeout of entries in CLOSE_WAIT; 0 leaves it.
	TCPCloseWaitTimeout *metav1.Duration
	// TCPBeLiberal stops conntrack marking out-of-window TCP packets INVALID.
	TCPBeLiberal bool
	// UDPTimeout is the timeout of UNREPLIED UDP entries; 0 leaves it.
	UDPTimeout metav1.Duration
	// UDPStreamTimeout is the timeout of ASSURED UDP entries; 0 leaves it.
	UDPStreamTimeout metav1.Duration
}

// KubeProxyWinkernelConfiguration holds options of the Windows HNS backend.
type KubeProxyWinkernelConfiguration struct {
	// NetworkName is the HNS network endpoints and policies are created in.
	NetworkName string
	// SourceVip is the source VIP used for NAT when load balancing.
	SourceVip string
	// EnableDSR creates HNS load balancers with direct server return.
	EnableDSR bool
	// RootHnsEndpointName is the HNS endpoint of the host on the l2bridge network.
	RootHnsEndpointName string
	// ForwardHealthCheckVip forwards the service VIP for the health check port.
	ForwardHealthCheckVip bool
}

// DetectLocalConfiguration holds the parameter of each DetectLocalMode; only the
// one matching the chosen mode is used.
type DetectLocalConfiguration struct {
	// BridgeInterface is the bridge local pods sit behind (LocalModeBridgeInterface).
	BridgeInterface string
	// ClusterCIDRs are the pod CIDRs, at most one per family (LocalModeClusterCIDR).
	ClusterCIDRs []string
	// InterfaceNamePrefix prefixes the names of pod interfaces (LocalModeInterfaceNamePrefix).
	InterfaceNamePrefix string
}

// ProxyMode names a backend. Empty means the platform default: iptables on Linux,
// kernelspace on Windows. It is a pflag.Value so it can back a flag directly.
type ProxyMode string

// The backends kube-proxy knows.
const (
	ProxyModeIPTables    ProxyMode = "iptables"
	ProxyModeIPVS        ProxyMode = "ipvs"
	ProxyModeNFTables    ProxyMode = "nftables"
	ProxyModeKernelspace ProxyMode = "kernelspace"
)

// Set implements pflag.Value. Any string is accepted; validation rejects bad ones
// later, with a field path.
func (m *ProxyMode) Set(s string) error {
	*m = ProxyMode(s)
	return nil
}

// String implements pflag.Value and fmt.Stringer; a nil receiver prints as "".
func (m *ProxyMode) String() string {
	if m == nil {
		return ""
	}
	return string(*m)
}

// Type implements pflag.Value.
func (m *ProxyMode) Type() string { return "ProxyMode" }

// LocalMode names a way of recognising traffic that comes from local pods.
type LocalMode string

// The local traffic detection modes.
const (
	LocalModeClusterCIDR         LocalMode = "ClusterCIDR"
	LocalModeNodeCIDR            LocalMode = "NodeCIDR"
	LocalModeBridgeInterface     LocalMode = "BridgeInterface"
	LocalModeInterfaceNamePrefix LocalMode = "InterfaceNamePrefix"
)

// Set implements pflag.Value. Any string is accepted; validation checks it.
func (m *LocalMode) Set(s string) error {
	*m = LocalMode(s)
	return nil
}

// String implements pflag.Value and fmt.Stringer; a nil receiver prints as "".
func (m *LocalMode) String() string {
	if m == nil {
		return ""
	}
	return string(*m)
}

// Type implements pflag.Value.
func (m *LocalMode) Type() string { return "LocalMode" }

// Keywords accepted in NodePortAddresses besides CIDRs.
const (
	// NodePortAddressesPrimary stands for the node's primary IP of each family.
	NodePortAddressesPrimary string = "primary"
	// NodePortAddressesLocalhost stands for 127.0.0.0/8 and ::1/128.
	NodePortAddressesLocalhost string = "localhost"
	// NodePortAddressesAll stands for 0.0.0.0/0 and ::/0.
	NodePortAddressesAll string = "all"
)

// IPFamilyPolicy says which IP families kube-proxy proxies (KEP-784). The values
// are spelled like the Service field of the same name.
type IPFamilyPolicy string

const (
	// IPFamilyPolicySingleStack proxies only the node's primary family.
	IPFamilyPolicySingleStack IPFamilyPolicy = "SingleStack"
	// IPFamilyPolicyPreferDualStack proxies both families when the node has an IP of
	// each, and the primary family alone otherwise.
	IPFamilyPolicyPreferDualStack IPFamilyPolicy = "PreferDualStack"
	// IPFamilyPolicyRequireDualStack refuses to start unless both families can be proxied.
	IPFamilyPolicyRequireDualStack IPFamilyPolicy = "RequireDualStack"
)

// Set implements pflag.Value. Any string is accepted; validation checks it.
func (p *IPFamilyPolicy) Set(s string) error {
	*p = IPFamilyPolicy(s)
	return nil
}

// String implements pflag.Value and fmt.Stringer; a nil receiver prints as "".
func (p *IPFamilyPolicy) String() string {
	if p == nil {
		return ""
	}
	return string(*p)
}

// Type implements pflag.Value.
func (p *IPFamilyPolicy) Type() string { return "IPFamilyPolicy" }
