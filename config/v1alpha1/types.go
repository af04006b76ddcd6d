package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// KubeProxyIPTablesConfiguration holds the options of the iptables backend. In this
// version it also carries the sync periods and masqueradeAll that the ipvs backend
// and the internal form treat as backend-independent.
type KubeProxyIPTablesConfiguration struct {
	// masqueradeBit is the fwmark bit, 0 to 31, that marks packets to be SNATed; the
	// ipvs backend uses it too.
	MasqueradeBit *int32 `json:"masqueradeBit"`
	// masqueradeAll SNATs all traffic sent to Service cluster IPs (iptables and ipvs
	// modes). Some CNI plugins need it.
	MasqueradeAll bool `json:"masqueradeAll"`
	// localhostNodePorts keeps NodePorts reachable on 127.0.0.1 (iptables mode and
	// IPv4 only). It needs route_localnet, which has security consequences.
	LocalhostNodePorts *bool `json:"localhostNodePorts"`
	// syncPeriod is how often the rules are fully resynced and cleaned up, when this
	// backend is the active one. Must be > 0.
	SyncPeriod metav1.Duration `json:"syncPeriod"`
	// minSyncPeriod rate-limits resyncs caused by Service and EndpointSlice changes;
	// 0 resyncs on every change.
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
}

// KubeProxyIPVSConfiguration holds the options of the ipvs backend.
type KubeProxyIPVSConfiguration struct {
	// syncPeriod is how often the IPVS state is fully resynced, in ipvs mode. Must be > 0.
	SyncPeriod metav1.Duration `json:"syncPeriod"`
	// minSyncPeriod rate-limits resyncs caused by changes, in ipvs mode; 0 resyncs
	// on every change.
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
	// scheduler names the IPVS scheduler; empty means round robin.
	Scheduler string `json:"scheduler"`
	// excludeCIDRs lists ranges whose IPVS services the proxy must not delete when
	// cleaning up.
	ExcludeCIDRs []string `json:"excludeCIDRs"`
	// strictARP sets arp_ignore/arp_announce so that addresses on kube-ipvs0 are not
	// answered for.
	StrictARP bool `json:"strictARP"`
	// tcpTimeout is the IPVS timeout of idle TCP sessions; 0 keeps the kernel's value.
	TCPTimeout metav1.Duration `json:"tcpTimeout"`
	// tcpFinTimeout is the IPVS timeout of TCP sessions after a FIN; 0 keeps the
	// kernel's value.
	TCPFinTimeout metav1.Duration `json:"tcpFinTimeout"`
	// udpTimeout is the IPVS timeout of UDP packets; 0 keeps the kernel's value.
	UDPTimeout metav1.Duration `json:"udpTimeout"`
}

// KubeProxyNFTablesConfiguration holds the options of the nftables backend.
type KubeProxyNFTablesConfiguration struct {
	// masqueradeBit is the fwmark bit, 0 to 31, that marks packets to be SNATed in
	// nftables mode.
	MasqueradeBit *int32 `json:"masqueradeBit"`
	// masqueradeAll SNATs all traffic sent to Service cluster IPs in nftables mode.
	MasqueradeAll bool `json:"masqueradeAll"`
	// syncPeriod is how often the rules are fully resynced, in nftables mode. Must be > 0.
	SyncPeriod metav1.Duration `json:"syncPeriod"`
	// minSyncPeriod rate-limits resyncs caused by changes, in nftables mode; 0
	// resyncs on every change.
	MinSyncPeriod metav1.Duration `json:"minSyncPeriod"`
}

// KubeProxyConntrackConfiguration holds the conntrack sysctls the proxy sets.
type KubeProxyConntrackConfiguration struct {
	// maxPerCore sizes the conntrack table per CPU; 0 leaves the table size (and
	// min) alone.
	MaxPerCore *int32 `json:"maxPerCore"`
	// min is the smallest conntrack table size used, whatever maxPerCore gives.
	Min *int32 `json:"min"`
	// tcpEstablishedTimeout is the idle timeout of established TCP entries (e.g.
	// '2s'); 0 leaves the kernel's value.
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	// tcpCloseWaitTimeout is how long entries stay in CLOSE_WAIT (e.g. '60s'); 0
	// leaves the kernel's value.
	TCPCloseWaitTimeout *metav1.Duration `json:"tcpCloseWaitTimeout"`
	// tcpBeLiberal stops conntrack marking out-of-window TCP packets INVALID.
	TCPBeLiberal bool `json:"tcpBeLiberal"`
	// udpTimeout is the timeout of UDP entries that saw no reply (e.g. '30s'); 0
	// leaves the kernel's value.
	UDPTimeout metav1.Duration `json:"udpTimeout"`
	// udpStreamTimeout is the timeout of assured UDP entries (e.g. '300s'); 0 leaves
	// the kernel's value.
	UDPStreamTimeout metav1.Duration `json:"udpStreamTimeout"`
}

// KubeProxyWinkernelConfiguration holds the options of the Windows HNS backend.
type KubeProxyWinkernelConfiguration struct {
	// networkName is the HNS network that endpoints and policies are created in.
	NetworkName string `json:"networkName"`
	// sourceVip is the source VIP endpoint's IP, used for NAT while load balancing.
	SourceVip string `json:"sourceVip"`
	// enableDSR creates HNS policies with direct server return.
	EnableDSR bool `json:"enableDSR"`
	// rootHnsEndpointName names the HNS endpoint of the host's network namespace on
	// the l2bridge network.
	RootHnsEndpointName string `json:"rootHnsEndpointName"`
	// forwardHealthCheckVip forwards the Service VIP on the health check port.
	ForwardHealthCheckVip bool `json:"forwardHealthCheckVip"`
}

// DetectLocalConfiguration holds the parameters of the interface-based
// detectLocalMode values. (The CIDR of ClusterCIDR mode is the top-level clusterCIDR
// in this version.)
type DetectLocalConfiguration struct {
	// bridgeInterface is the bridge local pods are behind (BridgeInterface mode).
	BridgeInterface string `json:"bridgeInterface"`
	// interfaceNamePrefix starts the name of every local pod's interface
	// (InterfaceNamePrefix mode).
	InterfaceNamePrefix string `json:"interfaceNamePrefix"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// KubeProxyConfiguration is the v1alpha1 kube-proxy configuration file.
type KubeProxyConfiguration struct {
	metav1.TypeMeta `json:""`

	// featureGates enables or disables features by name.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// clientConnection says how to reach the API server (kubeconfig, QPS, burst, ...).
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration `json:"clientConnection"`
	// logging configures logging, as every component-base component does.
	Logging logsapi.LoggingConfiguration `json:"logging,omitempty"`

	// hostnameOverride, if set, is used as this node's Node name instead of the
	// hostname.
	HostnameOverride string `json:"hostnameOverride"`
	// bindAddress overrides the node's primary IP. Nothing is bound to it; the name
	// is historical.
	BindAddress string `json:"bindAddress"`
	// healthzBindAddress is the "ip:port" of the health check server (default
	// 0.0.0.0:10256, or [::]:10256 when bindAddress is IPv6).
	HealthzBindAddress string `json:"healthzBindAddress"`
	// metricsBindAddress is the "ip:port" of the metrics server (default
	// 127.0.0.1:10249, or [::1]:10249 when bindAddress is IPv6).
	MetricsBindAddress string `json:"metricsBindAddress"`
	// bindAddressHardFail makes a failure to bind the health or metrics port fatal.
	BindAddressHardFail bool `json:"bindAddressHardFail"`
	// enableProfiling serves /debug/pprof on the metrics server.
	EnableProfiling bool `json:"enableProfiling"`
	// showHiddenMetricsForVersion shows the metrics hidden since that release.
	ShowHiddenMetricsForVersion string `json:"showHiddenMetricsForVersion"`

	// mode is the backend: iptables, ipvs or nftables on Linux, kernelspace on
	// Windows; empty picks the platform's default.
	Mode ProxyMode `json:"mode"`
	// iptables holds the options of the iptables backend.
	IPTables KubeProxyIPTablesConfiguration `json:"iptables"`
	// ipvs holds the options of the ipvs backend.
	IPVS KubeProxyIPVSConfiguration `json:"ipvs"`
	// nftables holds the options of the nftables backend.
	NFTables KubeProxyNFTablesConfiguration `json:"nftables"`
	// winkernel holds the options of the Windows backend.
	Winkernel KubeProxyWinkernelConfiguration `json:"winkernel"`

	// detectLocalMode is how traffic from local pods is recognised (default ClusterCIDR).
	DetectLocalMode LocalMode `json:"detectLocalMode"`
	// detectLocal holds the parameters of the interface-based modes.
	DetectLocal DetectLocalConfiguration `json:"detectLocal"`
	// clusterCIDR is the pod range (or a comma-separated dual-stack pair) used by
	// ClusterCIDR mode.
	ClusterCIDR string `json:"clusterCIDR"`

	// nodePortAddresses restricts the node IPs NodePorts answer on: CIDRs and the
	// keywords 'primary', 'localhost' and 'all'. Empty means 'all' in iptables and
	// ipvs modes and 'primary' in nftables mode.
	NodePortAddresses []string `json:"nodePortAddresses"`

	// oomScoreAdj is the process' oom_score_adj, -1000 to 1000.
	OOMScoreAdj *int32 `json:"oomScoreAdj"`
	// conntrack holds the conntrack sysctls.
	Conntrack KubeProxyConntrackConfiguration `json:"conntrack"`
	// configSyncPeriod is the resync period of the API server informers. Must be > 0.
	ConfigSyncPeriod metav1.Duration `json:"configSyncPeriod"`

	// portRange belonged to the removed userspace proxy and is ignored.
	PortRange string `json:"portRange"`

	// windowsRunAsService integrates with the Windows service control manager.
	WindowsRunAsService bool `json:"windowsRunAsService,omitempty"`
}

// ProxyMode names a backend: "iptables", "ipvs" or "nftables" on Linux and
// "kernelspace" on Windows. Empty means the platform's default (iptables on Linux,
// kernelspace on Windows); a mode that cannot run on the host is a fatal error.
type ProxyMode string

// LocalMode names a way to recognise traffic from local pods: "ClusterCIDR",
// "NodeCIDR", "BridgeInterface" or "InterfaceNamePrefix".
type LocalMode string
