//go:build linux

package ipvs

import (
	"k8s.io/kube-proxy/pkg/proxy/util/jumprules"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
)

// Chains, as upstream names them; an existing node's rules are taken over
// in place when the binary is swapped.
const (
	kubeServicesChain             utiliptables.Chain = "KUBE-SERVICES"
	kubeProxyFirewallChain        utiliptables.Chain = "KUBE-PROXY-FIREWALL"
	kubeSourceRangesFirewallChain utiliptables.Chain = "KUBE-SOURCE-RANGES-FIREWALL"
	kubePostroutingChain          utiliptables.Chain = "KUBE-POSTROUTING"
	kubeMarkMasqChain             utiliptables.Chain = "KUBE-MARK-MASQ"
	kubeNodePortChain             utiliptables.Chain = "KUBE-NODE-PORT"
	kubeForwardChain              utiliptables.Chain = "KUBE-FORWARD"
	kubeLoadBalancerChain         utiliptables.Chain = "KUBE-LOAD-BALANCER"
	// kubeIPVSFilterChain stops the VIPs on kube-ipvs0 from exposing every
	// host port (https://issues.k8s.io/72236).
	kubeIPVSFilterChain utiliptables.Chain = "KUBE-IPVS-FILTER"
	// kubeIPVSOutFilterChain keeps the node itself out of load balancers
	// whose source ranges do not include it (https://issues.k8s.io/119656).
	kubeIPVSOutFilterChain utiliptables.Chain = "KUBE-IPVS-OUT-FILTER"

	defaultScheduler   = "rr"
	defaultDummyDevice = "kube-ipvs0"
)

// The sysctls IPVS mode sets.
const (
	sysctlVSConnTrack             = "net/ipv4/vs/conntrack"
	sysctlConnReuse               = "net/ipv4/vs/conn_reuse_mode"
	sysctlExpireNoDestConn        = "net/ipv4/vs/expire_nodest_conn"
	sysctlExpireQuiescentTemplate = "net/ipv4/vs/expire_quiescent_template"
	sysctlForward                 = "net/ipv4/ip_forward"
	sysctlArpIgnore               = "net/ipv4/conf/all/arp_ignore"
	sysctlArpAnnounce             = "net/ipv4/conf/all/arp_announce"
)

// iptablesJumpChains are the rules in built-in chains that send traffic to
// ours: linkChains adds those missing (jumprules), the drift check reports
// them, and cleanup deletes them.
var iptablesJumpChains = []jumprules.Jump{
	{Table: utiliptables.TableNAT, Src: utiliptables.ChainOutput, Dst: kubeServicesChain, Comment: "kubernetes service portals"},
	{Table: utiliptables.TableNAT, Src: utiliptables.ChainPrerouting, Dst: kubeServicesChain, Comment: "kubernetes service portals"},
	{Table: utiliptables.TableNAT, Src: utiliptables.ChainPostrouting, Dst: kubePostroutingChain, Comment: "kubernetes postrouting rules"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainForward, Dst: kubeForwardChain, Comment: "kubernetes forwarding rules"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainInput, Dst: kubeNodePortChain, Comment: "kubernetes health check rules"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainInput, Dst: kubeProxyFirewallChain, Comment: "kube-proxy firewall rules"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainForward, Dst: kubeProxyFirewallChain, Comment: "kube-proxy firewall rules"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainInput, Dst: kubeIPVSFilterChain, Comment: "kubernetes ipvs access filter"},
	{Table: utiliptables.TableFilter, Src: utiliptables.ChainOutput, Dst: kubeIPVSOutFilterChain, Comment: "kubernetes ipvs access filter"},
}

// iptablesChains are created (and flushed) by every restore, in this order,
// created by linkChains when missing, and removed by cleanup.
var iptablesChains = []jumprules.Chain{
	{Table: utiliptables.TableNAT, Chain: kubeServicesChain},
	{Table: utiliptables.TableNAT, Chain: kubePostroutingChain},
	{Table: utiliptables.TableNAT, Chain: kubeNodePortChain},
	{Table: utiliptables.TableNAT, Chain: kubeLoadBalancerChain},
	{Table: utiliptables.TableNAT, Chain: kubeMarkMasqChain},
	{Table: utiliptables.TableFilter, Chain: kubeForwardChain},
	{Table: utiliptables.TableFilter, Chain: kubeNodePortChain},
	{Table: utiliptables.TableFilter, Chain: kubeProxyFirewallChain},
	{Table: utiliptables.TableFilter, Chain: kubeSourceRangesFirewallChain},
	{Table: utiliptables.TableFilter, Chain: kubeIPVSFilterChain},
	{Table: utiliptables.TableFilter, Chain: kubeIPVSOutFilterChain},
}

// Set names (IPv4; IPv6 ones are derived by NewIPSet) and comments.
const (
	kubeLoopBackIPSet             = "KUBE-LOOP-BACK"
	kubeClusterIPSet              = "KUBE-CLUSTER-IP"
	kubeExternalIPSet             = "KUBE-EXTERNAL-IP"
	kubeExternalIPLocalSet        = "KUBE-EXTERNAL-IP-LOCAL"
	kubeLoadBalancerSet           = "KUBE-LOAD-BALANCER"
	kubeLoadBalancerLocalSet      = "KUBE-LOAD-BALANCER-LOCAL"
	kubeLoadBalancerFWSet         = "KUBE-LOAD-BALANCER-FW"
	kubeLoadBalancerSourceIPSet   = "KUBE-LOAD-BALANCER-SOURCE-IP"
	kubeLoadBalancerSourceCIDRSet = "KUBE-LOAD-BALANCER-SOURCE-CIDR"
	kubeNodePortSetTCP            = "KUBE-NODE-PORT-TCP"
	kubeNodePortLocalSetTCP       = "KUBE-NODE-PORT-LOCAL-TCP"
	kubeNodePortSetUDP            = "KUBE-NODE-PORT-UDP"
	kubeNodePortLocalSetUDP       = "KUBE-NODE-PORT-LOCAL-UDP"
	kubeNodePortSetSCTP           = "KUBE-NODE-PORT-SCTP-HASH"
	kubeNodePortLocalSetSCTP      = "KUBE-NODE-PORT-LOCAL-SCTP-HASH"
	kubeHealthCheckNodePortSet    = "KUBE-HEALTH-CHECK-NODE-PORT"
	kubeIPVSSet                   = "KUBE-IPVS-IPS"
)

// setID indexes the proxier's sets; the order is upstream's ipsetInfo order.
type setID int

const (
	setLoopBack setID = iota
	setClusterIP
	setExternalIP
	setExternalIPLocal
	setLoadBalancer
	setLoadBalancerFW
	setLoadBalancerLocal
	setLoadBalancerSourceIP
	setLoadBalancerSourceCIDR
	setNodePortTCP
	setNodePortLocalTCP
	setNodePortUDP
	setNodePortLocalUDP
	setNodePortSCTP
	setNodePortLocalSCTP
	setHealthCheckNodePort
	setIPVS
	numSets
)

var ipsetInfo = [numSets]struct {
	name    string
	setType utilipset.Type
	comment string
}{
	setLoopBack:               {kubeLoopBackIPSet, utilipset.HashIPPortIP, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose"},
	setClusterIP:              {kubeClusterIPSet, utilipset.HashIPPort, "Kubernetes service cluster ip + port for masquerade purpose"},
	setExternalIP:             {kubeExternalIPSet, utilipset.HashIPPort, "Kubernetes service external ip + port for masquerade and filter purpose"},
	setExternalIPLocal:        {kubeExternalIPLocalSet, utilipset.HashIPPort, "Kubernetes service external ip + port with externalTrafficPolicy=local"},
	setLoadBalancer:           {kubeLoadBalancerSet, utilipset.HashIPPort, "Kubernetes service lb portal"},
	setLoadBalancerFW:         {kubeLoadBalancerFWSet, utilipset.HashIPPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange"},
	setLoadBalancerLocal:      {kubeLoadBalancerLocalSet, utilipset.HashIPPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local"},
	setLoadBalancerSourceIP:   {kubeLoadBalancerSourceIPSet, utilipset.HashIPPortIP, "Kubernetes service load balancer ip + port + source IP for packet filter purpose"},
	setLoadBalancerSourceCIDR: {kubeLoadBalancerSourceCIDRSet, utilipset.HashIPPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose"},
	setNodePortTCP:            {kubeNodePortSetTCP, utilipset.BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose"},
	setNodePortLocalTCP:       {kubeNodePortLocalSetTCP, utilipset.BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local"},
	setNodePortUDP:            {kubeNodePortSetUDP, utilipset.BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose"},
	setNodePortLocalUDP:       {kubeNodePortLocalSetUDP, utilipset.BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local"},
	setNodePortSCTP:           {kubeNodePortSetSCTP, utilipset.HashIPPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'"},
	setNodePortLocalSCTP:      {kubeNodePortLocalSetSCTP, utilipset.HashIPPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'"},
	setHealthCheckNodePort:    {kubeHealthCheckNodePortSet, utilipset.BitmapPort, "Kubernetes health check node port"},
	setIPVS:                   {kubeIPVSSet, utilipset.HashIP, "Addresses on the ipvs interface"},
}

// setJump is a rule that matches a set and jumps, written only while the
// set is non-empty. The local node-port sets come before their plain
// counterparts so that eTP=Local node ports RETURN before being marked.
type setJump struct {
	set           setID
	table         utiliptables.Table
	from          utiliptables.Chain
	to            string
	matchType     string
	protocolMatch string
}

var setJumps = []setJump{
	{setLoopBack, utiliptables.TableNAT, kubePostroutingChain, "MASQUERADE", "dst,dst,src", ""},
	{setLoadBalancer, utiliptables.TableNAT, kubeServicesChain, string(kubeLoadBalancerChain), "dst,dst", ""},
	{setLoadBalancerLocal, utiliptables.TableNAT, kubeLoadBalancerChain, "RETURN", "dst,dst", ""},
	{setNodePortLocalTCP, utiliptables.TableNAT, kubeNodePortChain, "RETURN", "dst", utilipset.ProtocolTCP},
	{setNodePortTCP, utiliptables.TableNAT, kubeNodePortChain, string(kubeMarkMasqChain), "dst", utilipset.ProtocolTCP},
	{setNodePortLocalUDP, utiliptables.TableNAT, kubeNodePortChain, "RETURN", "dst", utilipset.ProtocolUDP},
	{setNodePortUDP, utiliptables.TableNAT, kubeNodePortChain, string(kubeMarkMasqChain), "dst", utilipset.ProtocolUDP},
	{setNodePortLocalSCTP, utiliptables.TableNAT, kubeNodePortChain, "RETURN", "dst,dst", utilipset.ProtocolSCTP},
	{setNodePortSCTP, utiliptables.TableNAT, kubeNodePortChain, string(kubeMarkMasqChain), "dst,dst", utilipset.ProtocolSCTP},

	{setLoadBalancerFW, utiliptables.TableFilter, kubeProxyFirewallChain, string(kubeSourceRangesFirewallChain), "dst,dst", ""},
	{setLoadBalancerSourceCIDR, utiliptables.TableFilter, kubeSourceRangesFirewallChain, "RETURN", "dst,dst,src", ""},
	{setLoadBalancerSourceIP, utiliptables.TableFilter, kubeSourceRangesFirewallChain, "RETURN", "dst,dst,src", ""},
}
