package winkernel

import (
	"cmp"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// loadBalancerType names the role of an HNS load balancer; it is the lb_type
// label of the winkernel failure metrics (upstream's values).
type loadBalancerType string

const (
	lbTypeClusterIP   loadBalancerType = "clusterip"
	lbTypeNodePort    loadBalancerType = "nodeport"
	lbTypeExternalIP  loadBalancerType = "externalip"
	lbTypeIngressIP   loadBalancerType = "ingressip"
	lbTypeHealthCheck loadBalancerType = "healthcheck"
)

// lbRole identifies one load balancer among those of a service port: its
// type and, for external and ingress IPs, the IP.
type lbRole struct {
	kind loadBalancerType
	ip   string
}

// lbPlan is one load balancer that must exist, with endpoints named by IP;
// the syncer resolves them to HNS endpoint IDs.
type lbPlan struct {
	role         lbRole
	vip          string // "" for a node port load balancer
	sourceVIP    string
	protocol     uint16
	internalPort uint16
	externalPort uint16
	flags        hcnapi.LoadBalancerFlags
	portFlags    hcnapi.PortMappingFlags
	distribution hcnapi.Distribution
	// endpointIPs are sorted and unique. A health check load balancer has
	// none: it forwards to the host's root endpoint (gateway).
	endpointIPs []string
	gateway     bool
}

// endpointNeed is an HNS endpoint a service port's load balancers use.
type endpointNeed struct {
	ip    string
	local bool
}

// servicePlan is everything one service port needs in HNS.
type servicePlan struct {
	// vipEndpoint is, on overlay networks, the cluster IP, which must exist
	// as a remote endpoint (upstream's "service VIP endpoint"); "" otherwise.
	vipEndpoint string
	endpoints   []endpointNeed
	lbs         []lbPlan
}

// planConfig is the node's part of the decision, constant between network
// changes.
type planConfig struct {
	ipv6      bool
	overlay   bool
	sourceVIP string // --source-vip, used on overlay networks
	nodeIP    string
	// enableDSR makes cluster IP load balancers DSR (--enable-dsr).
	enableDSR bool
	// dsrSupported: HNS can do DSR, which external-policy-Local and
	// preserve-destination load balancers use.
	dsrSupported          bool
	forwardHealthCheckVip bool
	healthzPort           int
	// gateway: the root HNS endpoint exists, so health check load
	// balancers can forward to it.
	gateway bool
	// subnets are the overlay network's remote subnets, parsed.
	subnets []remoteSubnet
}

type remoteSubnet struct {
	prefix          netip.Prefix
	providerAddress string
}

// parseRemoteSubnets parses a network's remote subnet policies; an
// unparsable prefix is skipped (logged by the caller through the error).
func parseRemoteSubnets(n *hcnapi.Network) ([]remoteSubnet, error) {
	var out []remoteSubnet
	var errs []string
	for _, rs := range n.RemoteSubnets {
		p, err := netip.ParsePrefix(rs.DestinationPrefix)
		if err != nil {
			errs = append(errs, fmt.Sprintf("remote subnet %q: %v", rs.DestinationPrefix, err))
		}
		out = append(out, remoteSubnet{prefix: p.Masked(), providerAddress: rs.ProviderAddress})
	}
	if len(errs) > 0 {
		return out, fmt.Errorf("network %q: %s", n.Name, strings.Join(errs, "; "))
	}
	return out, nil
}

// providerAddress returns the provider address (the node) hosting ip on an
// overlay network, "" for an address outside every remote subnet (a public
// IP). An address that is itself a provider address maps to itself. Later
// policies win, as upstream.
func providerAddress(subnets []remoteSubnet, ip string) string {
	addr, err := netip.ParseAddr(ip)
	pa := ""
	for _, rs := range subnets {
		if err == nil && rs.prefix.IsValid() && rs.prefix.Contains(addr.Unmap()) {
			pa = rs.providerAddress
		}
		if ip == rs.providerAddress {
			pa = rs.providerAddress
		}
	}
	return pa
}

// serviceOptions are a service's Windows-specific annotations.
type serviceOptions struct {
	// preserveDIP: annotation preserve-destination=true. Node port and
	// ingress traffic go only to local endpoints, with the VIP kept as
	// destination (DSR through the MUX).
	preserveDIP bool
	// winProxyOptimization is on unless annotation winProxyOptimization is
	// "disabled": load balancers are updated in place when endpoints
	// change, instead of deleted and created again.
	winProxyOptimization bool
}

// enumProtocol is Enum for the node-local model's protocols.
func enumProtocol(p localnode.Protocol) uint16 {
	switch p {
	case localnode.TCP:
		return 6
	case localnode.UDP:
		return 17
	case localnode.SCTP:
		return 132
	}
	return 0
}

// planService decides the HNS objects one service port needs: the brain has
// already chosen its endpoints (svc.InternalEndpoints, ExternalEndpoints);
// this only maps them onto HNS load balancers with upstream's flags.
func planService(cfg *planConfig, svc *localnode.Service, opts serviceOptions) servicePlan {
	var p servicePlan
	if cfg.overlay {
		p.vipEndpoint = svc.ClusterIP.String()
	}
	if len(svc.Endpoints) == 0 {
		return p
	}

	localTrafficDSR := svc.ExternalPolicy == localnode.PolicyLocal && cfg.dsrSupported
	preserveDIP := opts.preserveDIP && cfg.dsrSupported
	internal := endpointIPs(svc.InternalEndpoints(), false)
	external := endpointIPs(svc.ExternalEndpoints(), false)
	externalLocal := external
	if preserveDIP {
		externalLocal = endpointIPs(svc.ExternalEndpoints(), true)
	}

	// HNS load balancers have one internal port; as upstream, the
	// endpoints' port is taken from one endpoint (they normally agree).
	targetPort := svc.Endpoints[0].Port
	proto := enumProtocol(svc.Name.Protocol)

	var baseFlags hcnapi.LoadBalancerFlags
	if cfg.ipv6 {
		baseFlags |= hcnapi.LoadBalancerFlagsIPv6
	}
	distribution := hcnapi.DistributionNone
	if svc.SessionAffinity == localnode.AffinityClientIP {
		distribution = hcnapi.DistributionSourceIP
	}
	externalDSR := baseFlags
	if localTrafficDSR {
		externalDSR |= hcnapi.LoadBalancerFlagsDSR
	}

	sourceVIP := ""
	if cfg.overlay {
		sourceVIP = cfg.sourceVIP
	}
	add := func(lb lbPlan, ips []string) {
		if len(ips) == 0 && !lb.gateway {
			return
		}
		lb.endpointIPs = ips
		lb.protocol = proto
		lb.sourceVIP = sourceVIP
		lb.distribution = distribution
		if lb.internalPort == 0 {
			lb.internalPort = targetPort
		}
		p.lbs = append(p.lbs, lb)
	}

	clusterFlags := baseFlags
	if cfg.enableDSR {
		clusterFlags |= hcnapi.LoadBalancerFlagsDSR
	}
	ip := svc.ClusterIP.String()
	add(lbPlan{role: lbRole{lbTypeClusterIP, ip}, vip: ip, externalPort: svc.Port, flags: clusterFlags}, internal)

	if svc.NodePort != 0 {
		add(lbPlan{role: lbRole{lbTypeNodePort, ""}, externalPort: svc.NodePort, flags: externalDSR,
			portFlags: hcnapi.PortMappingFlagsVipExternalIP | hcnapi.PortMappingFlagsLocalRoutedVIP}, externalLocal)
	}
	for _, a := range svc.ExternalIPs {
		ip := a.String()
		add(lbPlan{role: lbRole{lbTypeExternalIP, ip}, vip: ip, externalPort: svc.Port, flags: externalDSR,
			portFlags: hcnapi.PortMappingFlagsVipExternalIP}, external)
	}
	ingressFlags := baseFlags
	ingressPortFlags := hcnapi.PortMappingFlagsVipExternalIP
	if preserveDIP || localTrafficDSR {
		ingressFlags |= hcnapi.LoadBalancerFlagsDSR
	}
	if preserveDIP {
		ingressPortFlags |= hcnapi.PortMappingFlagsUseMux | hcnapi.PortMappingFlagsPreserveDIP
	}
	for _, a := range svc.LoadBalancerVIPs {
		ip := a.String()
		add(lbPlan{role: lbRole{lbTypeIngressIP, ip}, vip: ip, externalPort: svc.Port, flags: ingressFlags,
			portFlags: ingressPortFlags}, externalLocal)
	}

	if cfg.forwardHealthCheckVip && cfg.gateway && len(svc.LoadBalancerVIPs) > 0 && (len(external) > 0 || len(internal) > 0) {
		hcPort := uint16(cfg.healthzPort)
		if svc.HealthCheckNodePort != 0 {
			hcPort = svc.HealthCheckNodePort
		}
		var hcPortFlags hcnapi.PortMappingFlags
		if preserveDIP {
			hcPortFlags = hcnapi.PortMappingFlagsUseMux | hcnapi.PortMappingFlagsPreserveDIP
		}
		if hcPort != 0 {
			for _, a := range svc.LoadBalancerVIPs {
				ip := a.String()
				// Health probes are HTTP, so the forward is TCP whatever the
				// service's protocol, and never sticky.
				p.lbs = append(p.lbs, lbPlan{role: lbRole{lbTypeHealthCheck, ip}, vip: ip, sourceVIP: sourceVIP,
					protocol: 6, internalPort: hcPort, externalPort: hcPort, flags: baseFlags, portFlags: hcPortFlags, gateway: true})
			}
		}
	}

	// Remote endpoints are created for every endpoint some load balancer
	// uses; local ones must already exist (the CNI plugin made them).
	seen := map[string]bool{}
	for _, lb := range p.lbs {
		for _, ip := range lb.endpointIPs {
			seen[ip] = true
		}
	}
	for _, ep := range svc.Endpoints {
		ip := ep.IP.String()
		if seen[ip] {
			p.endpoints = append(p.endpoints, endpointNeed{ip: ip, local: ep.Local})
			delete(seen, ip)
		}
	}

	// On overlay networks, traffic to endpoints outside the pod network (a
	// public IP) or to a node's own address must leave with the node IP as
	// source; otherwise the source VIP is used.
	if cfg.overlay {
		for _, ep := range p.endpoints {
			if ep.local {
				continue
			}
			pa := providerAddress(cfg.subnets, ep.ip)
			if pa == "" || pa == ep.ip {
				for i := range p.lbs {
					p.lbs[i].sourceVIP = cfg.nodeIP
				}
				break
			}
		}
	}
	return p
}

// endpointIPs returns the sorted, unique addresses of eps (only the local
// ones when localOnly).
func endpointIPs(eps []localnode.Endpoint, localOnly bool) []string {
	if len(eps) == 0 {
		return nil
	}
	out := make([]string, 0, len(eps))
	for _, ep := range eps {
		if localOnly && !ep.Local {
			continue
		}
		out = append(out, ep.IP.String())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// dedupeHealthChecks keeps one health check load balancer per frontend
// across the ports of one Service: they would share VIP, port and protocol,
// which HNS refuses. plans are in port-name order, so the first port keeps it.
func dedupeHealthChecks(plans []*servicePlan) {
	seen := map[lbRole]uint16{}
	for _, p := range plans {
		p.lbs = slices.DeleteFunc(p.lbs, func(lb lbPlan) bool {
			if lb.role.kind != lbTypeHealthCheck {
				return false
			}
			if port, ok := seen[lb.role]; ok && port == lb.externalPort {
				return true
			}
			seen[lb.role] = lb.externalPort
			return false
		})
	}
}

// conjureMAC makes the MAC address of a remote endpoint from its IP, as
// upstream: the prefix then the four last bytes of the address.
func conjureMAC(prefix string, ip net.IP) string {
	if ip4 := ip.To4(); ip4 != nil {
		return fmt.Sprintf("%s-%02x-%02x-%02x-%02x", prefix, ip4[0], ip4[1], ip4[2], ip4[3])
	}
	if ip6 := ip.To16(); ip6 != nil {
		return fmt.Sprintf("%s-%02x-%02x-%02x-%02x", prefix, ip6[15], ip6[14], ip6[13], ip6[12])
	}
	return "02-11-22-33-44-55"
}

// hcnLoadBalancer renders lb with resolved endpoint IDs into the object HNS
// is given.
func (lb *lbPlan) hcnLoadBalancer(endpointIDs []string) *hcnapi.LoadBalancer {
	out := &hcnapi.LoadBalancer{
		Endpoints: endpointIDs,
		SourceVIP: lb.sourceVIP,
		PortMappings: []hcnapi.PortMapping{{
			Protocol:     uint32(lb.protocol),
			InternalPort: lb.internalPort,
			ExternalPort: lb.externalPort,
			Distribution: lb.distribution,
			Flags:        lb.portFlags,
		}},
		Flags: lb.flags,
	}
	if lb.vip != "" {
		out.FrontendVIPs = []string{lb.vip}
	}
	return out
}

// sameLoadBalancer reports whether an existing HNS load balancer is what
// want describes: same frontend, flags, source VIP and endpoint set. It is
// how a full sync adopts what an earlier run (or a network change) left.
func sameLoadBalancer(have, want *hcnapi.LoadBalancer) bool {
	if len(have.PortMappings) != 1 || have.Flags != want.Flags || have.SourceVIP != want.SourceVIP ||
		have.VIP() != want.VIP() || have.PortMappings[0] != want.PortMappings[0] {
		return false
	}
	if len(have.Endpoints) != len(want.Endpoints) {
		return false
	}
	if slices.Equal(have.Endpoints, want.Endpoints) {
		// What the view recorded is in the order the planner produces.
		return true
	}
	a := slices.Clone(have.Endpoints)
	b := slices.Clone(want.Endpoints)
	for i := range a {
		a[i] = strings.ToUpper(a[i])
	}
	for i := range b {
		b[i] = strings.ToUpper(b[i])
	}
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// frontendKey identifies what HNS refuses to have twice.
type frontendKey struct {
	vip      string
	protocol uint32
	port     uint16
	ipv6     bool
}

func frontendOf(lb *hcnapi.LoadBalancer) (frontendKey, bool) {
	if len(lb.PortMappings) == 0 {
		return frontendKey{}, false
	}
	return frontendKey{vip: lb.VIP(), protocol: lb.PortMappings[0].Protocol, port: lb.PortMappings[0].ExternalPort, ipv6: lb.IsIPv6()}, true
}

func compareRoles(a, b lbRole) int {
	return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.ip, b.ip))
}
