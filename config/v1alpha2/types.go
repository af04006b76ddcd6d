package v1alpha2

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	componentbaseconfigv1alpha1 "k8s.io/component-base/config/v1alpha1"
	logsapi "k8s.io/component-base/logs/api/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// KubeProxyConfiguration is the v1alpha2 kube-proxy configuration file.
type KubeProxyConfiguration struct {
	metav1.TypeMeta `json:",inline"`

	// featureGates enables or disables features by name.
	FeatureGates map[string]bool `json:"featureGates,omitempty"`

	// clientConnection says how to reach the API server (kubeconfig, QPS, burst, ...).
	ClientConnection componentbaseconfigv1alpha1.ClientConnectionConfiguration `json:"clientConnection"`
	// logging configures logging, as every component-base component does.
	Logging logsapi.LoggingConfiguration `json:"logging,omitempty"`

	// configHardFail makes problems in this file (unknown or duplicate fields) fatal.
	// When false they are logged and kube-proxy runs with what it understood.
	// Default true.
	ConfigHardFail *bool `json:"configHardFail"`

	// hostnameOverride, if set, is used as this node's Node name instead of the
	// hostname.
	HostnameOverride string `json:"hostnameOverride"`
	// nodeIPOverride, if set, replaces the node IPs taken from the Node object: one
	// IP, or one IPv4 and one IPv6 address. The first one is the primary IP. It
	// replaces v1alpha1's bindAddress.
	NodeIPOverride []string `json:"nodeIPOverride"`
	// ipFamilyPolicy chooses the IP families to proxy: SingleStack (the primary
	// family only), PreferDualStack (both when the node has an IP of each) or
	// RequireDualStack (both, or fail). Default PreferDualStack, which is what
	// v1alpha1 kube-proxy always did.
	IPFamilyPolicy IPFamilyPolicy `json:"ipFamilyPolicy"`

	// healthzBindAddress is the "ip:port" of the health check server (default
	// 0.0.0.0:10256, or [::]:10256 when the first nodeIPOverride is IPv6).
	HealthzBindAddress string `json:"healthzBindAddress"`
	// metricsBindAddress is the "ip:port" of the metrics server (default
	// 127.0.0.1:10249, or [::1]:10249 when the first nodeIPOverride is IPv6).
	MetricsBindAddress string `json:"metricsBindAddress"`
	// bindAddressHardFail makes a failure to bind the health or metrics port fatal.
	// Default true.
	BindAddressHardFail *bool `json:"bindAddressHardFail"`
	// enableProfiling serves /debug/pprof on the metrics server.
	EnableProfiling bool `json:"enableProfiling"`
	// showHiddenMetricsForVersion shows the metrics hidden since that release.
	ShowHiddenMetricsForVersion string `json:"showHiddenMetricsForVersion"`

	// mode is the backend: iptables, ipvs or nftables on Linux, kernelspace on
	// Windows; empty picks the platform's default.
	Mode ProxyMode `json:"mode"`
	// syncPeriod is how often the backend's state is fully resynced and cleaned up.
	// Must be > 0. Default 30s.
	SyncPeriod metav1.Duration `json:"syncPeriod"`
	// minSyncPeriod rate-limits resyncs caused by Service and EndpointSlice
	// changes; 0s resyncs on every change. Default 1s. A pointer, unlike in
	// v1alpha1, so that an explicit 0s is not mistaken for "unset".
	MinSyncPeriod *metav1.Duration `json:"minSyncPeriod"`
	// configSyncPeriod is the resync period of the API server informers. Must be
	// > 0. Default 15m.
	ConfigSyncPeriod metav1.Duration `json:"configSyncPeriod"`

	// iptables holds the options of the iptables backend.
	IPTables KubeProxyIPTablesConfiguration `json:"iptables"`
	// ipvs holds the options of the ipvs backend.
	IPVS KubeProxyIPVSConfiguration `json:"ipvs"`
	// nftables holds the options of the nftables backend.
	NFTables KubeProxyNFTablesConfiguration `json:"nftables"`
	// winkernel holds the options of the Windows backend.
	Winkernel KubeProxyWinkernelConfiguration `json:"winkernel"`

	// detectLocalMode is how traffic from local pods is recognised: ClusterCIDR,
	// NodeCIDR, BridgeInterface or InterfaceNamePrefix. Empty means ClusterCIDR.
	DetectLocalMode LocalMode `json:"detectLocalMode"`
	// detectLocal holds the parameter of each detectLocalMode.
	DetectLocal DetectLocalConfiguration `json:"detectLocal"`

	// nodePortAddresses restricts the node IPs NodePorts answer on: CIDRs and the
	// keywords 'primary', 'localhost' and 'all'. Empty means 'all' in iptables and
	// ipvs modes and 'primary' in nftables mode.
	NodePortAddresses []string `json:"nodePortAddresses"`

	// linux holds Linux options that do not depend on the backend.
	Linux KubeProxyLinuxConfiguration `json:"linux"`
	// windows holds Windows options that do not depend on the backend.
	Windows KubeProxyWindowsConfiguration `json:"windows"`

	// localNode configures the node-local state server (KEP-2104) kube-proxy can run
	// beside its backend. The --localnode-serve flags, when given on the command
	// line, take precedence over these fields. Omitted (nil) serves nothing; a
	// pointer so that files that do not use it are written without it.
	LocalNode *KubeProxyLocalNodeConfiguration `json:"localNode,omitempty"`

	// socketLB configures socket-level load balancing (Linux): cgroup BPF programs
	// that translate a Service address when a local socket connects or sends, beside
	// the nftables or iptables mode. The --socket-lb flags, when given on the command
	// line, take precedence over these fields. Omitted (nil) leaves it off; a pointer
	// so that files which do not use it are written without it.
	SocketLB *KubeProxySocketLBConfiguration `json:"socketLB,omitempty"`
}

// KubeProxySocketLBConfiguration configures socket-level load balancing.
type KubeProxySocketLBConfiguration struct {
	// enabled attaches the socket load balancer (as --socket-lb). It requires mode
	// nftables or iptables, which keep handling what the socket hooks cannot see.
	// When false, a socket load balancer left pinned by an earlier run is removed at
	// start-up.
	Enabled bool `json:"enabled"`
	// cgroupPath is the cgroup v2 directory whose processes' sockets (and its
	// descendants') are load-balanced (as --socket-lb-cgroup-path): an absolute
	// path. Empty (the default) means the root of the unified hierarchy, found at
	// start-up: /sys/fs/cgroup on a cgroup v2 host, /sys/fs/cgroup/unified on a
	// hybrid one.
	CgroupPath string `json:"cgroupPath,omitempty"`
}

// KubeProxyLocalNodeConfiguration configures the node-local state server.
type KubeProxyLocalNodeConfiguration struct {
	// serveAddress is where to serve the node-local state over gRPC:
	// "unix:///absolute/path.sock" or "tcp://host:port". Empty (the default) serves
	// nothing. Plain TCP is only allowed on a loopback address (127.0.0.0/8, ::1,
	// localhost); any other host requires tlsCertFile and tlsPrivateKeyFile.
	ServeAddress string `json:"serveAddress,omitempty"`
	// tlsCertFile is the PEM file of the server's certificate (intermediates after
	// it), for TLS 1.2 or later on a tcp:// serveAddress.
	TLSCertFile string `json:"tlsCertFile,omitempty"`
	// tlsPrivateKeyFile is the PEM file of tlsCertFile's private key.
	TLSPrivateKeyFile string `json:"tlsPrivateKeyFile,omitempty"`
	// clientCAFile, with tlsCertFile, requires every client to present a certificate
	// signed by a CA in this PEM file (mutual TLS).
	ClientCAFile string `json:"clientCAFile,omitempty"`
}

// KubeProxyLinuxConfiguration holds Linux options shared by every backend.
type KubeProxyLinuxConfiguration struct {
	// conntrack holds the conntrack sysctls.
	Conntrack KubeProxyConntrackConfiguration `json:"conntrack"`
	// masqueradeAll SNATs all traffic sent to Service cluster IPs. Some CNI
	// plugins need it.
	MasqueradeAll bool `json:"masqueradeAll"`
	// oomScoreAdj is the process' oom_score_adj, -1000 to 1000. Default -999.
	OOMScoreAdj *int32 `json:"oomScoreAdj"`
}

// KubeProxyWindowsConfiguration holds Windows options shared by every backend.
type KubeProxyWindowsConfiguration struct {
	// runAsService integrates with the Windows service control manager.
	RunAsService bool `json:"runAsService"`
}

// KubeProxyIPTablesConfiguration holds the options of the iptables backend.
type KubeProxyIPTablesConfiguration struct {
	// masqueradeBit is the fwmark bit, 0 to 31, that marks packets to be SNATed.
	// Default 14.
	MasqueradeBit *int32 `json:"masqueradeBit"`
	// localhostNodePorts keeps NodePorts reachable on 127.0.0.1 (IPv4 only). It
	// needs route_localnet, which has security consequences. Default false.
	LocalhostNodePorts *bool `json:"localhostNodePorts"`
}

// KubeProxyIPVSConfiguration holds the options of the ipvs backend.
type KubeProxyIPVSConfiguration struct {
	// masqueradeBit is the fwmark bit, 0 to 31, that the ipvs backend's iptables
	// rules use to mark packets to be SNATed. Default 14.
	MasqueradeBit *int32 `json:"masqueradeBit"`
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
	// masqueradeBit is the fwmark bit, 0 to 31, that marks packets to be SNATed.
	// Default 14.
	MasqueradeBit *int32 `json:"masqueradeBit"`
}

// KubeProxyConntrackConfiguration holds the conntrack sysctls the proxy sets.
type KubeProxyConntrackConfiguration struct {
	// maxPerCore sizes the conntrack table per CPU; 0 leaves the table size (and
	// min) alone. Default 32768.
	MaxPerCore *int32 `json:"maxPerCore"`
	// min is the smallest conntrack table size used. Default 131072.
	Min *int32 `json:"min"`
	// tcpEstablishedTimeout is the idle timeout of established TCP entries; 0
	// leaves the kernel's value. Default 24h.
	TCPEstablishedTimeout *metav1.Duration `json:"tcpEstablishedTimeout"`
	// tcpCloseWaitTimeout is how long entries stay in CLOSE_WAIT; 0 leaves the
	// kernel's value. Default 1h.
	TCPCloseWaitTimeout *metav1.Duration `json:"tcpCloseWaitTimeout"`
	// tcpBeLiberal stops conntrack marking out-of-window TCP packets INVALID.
	TCPBeLiberal bool `json:"tcpBeLiberal"`
	// udpTimeout is the timeout of UDP entries that saw no reply; 0 leaves the
	// kernel's value.
	UDPTimeout metav1.Duration `json:"udpTimeout"`
	// udpStreamTimeout is the timeout of assured UDP entries; 0 leaves the kernel's
	// value.
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

// DetectLocalConfiguration holds the parameter of each detectLocalMode; only the
// one of the chosen mode is used.
type DetectLocalConfiguration struct {
	// bridgeInterface is the bridge local pods are behind (BridgeInterface mode).
	BridgeInterface string `json:"bridgeInterface"`
	// clusterCIDRs are the pod ranges, one or a dual-stack pair (ClusterCIDR mode).
	ClusterCIDRs []string `json:"clusterCIDRs"`
	// interfaceNamePrefix starts the name of every local pod's interface
	// (InterfaceNamePrefix mode).
	InterfaceNamePrefix string `json:"interfaceNamePrefix"`
}

// ProxyMode names a backend: "iptables", "ipvs" or "nftables" on Linux and
// "kernelspace" on Windows. Empty means the platform's default.
type ProxyMode string

// LocalMode names a way to recognise traffic from local pods: "ClusterCIDR",
// "NodeCIDR", "BridgeInterface" or "InterfaceNamePrefix".
type LocalMode string

// IPFamilyPolicy is "SingleStack", "PreferDualStack" or "RequireDualStack".
type IPFamilyPolicy string
