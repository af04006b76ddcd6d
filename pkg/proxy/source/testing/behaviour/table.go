package behaviour

import (
	"net"
	"strconv"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// The ports every scenario uses: Services listen on svcPort and forward to
// targetPort; node ports are nodePort (TCP) and udpNodePort; hcNodePort is
// the health check node port of externalTrafficPolicy Local Services.
const (
	svcPort     = 80
	targetPort  = 8080
	nodePort    = 30080
	udpNodePort = 30053
	hcNodePort  = 30900
)

// Reasons shared by several checks.
const (
	winNoReject = "winkernel programs no load balancer for a Service port without usable endpoints and has " +
		"no reject rule: HNS has none to program, as upstream's winkernel proxier"
	winNoSourceRanges = "HNS load balancers have no source filter: upstream's winkernel proxier ignores " +
		"loadBalancerSourceRanges too"
	ipvsEmpty = "ipvs keeps the virtual server with no real server, as upstream's ipvs proxier; IPVS itself " +
		"then refuses the connection (ICMP port unreachable), not an iptables REJECT rule"
	winNoMasq = "HNS does not masquerade in a way the fake HNS shows; winkernel's SNAT is the load balancer's own"
)

func hp(ip string, port int) string { return net.JoinHostPort(ip, strconv.Itoa(port)) }

func dnat(masq bool, eps ...string) Outcome {
	return Outcome{Verdict: DNAT, Endpoints: eps, Masquerade: masq}
}

// Table is the behaviour every proxier must have, for family a; other is the
// other family's Addresses (the dual-stack scenario puts objects of both
// families in front of a's proxier).
func Table(a, other Addresses) []Scenario {
	tcp := func(from Origin, src, dst string, port int) Packet {
		return Packet{From: from, Src: src, Dst: dst, Protocol: v1.ProtocolTCP, Port: port}
	}
	udp := func(from Origin, src, dst string, port int) Packet {
		return Packet{From: from, Src: src, Dst: dst, Protocol: v1.ProtocolUDP, Port: port}
	}
	client := a.LocalPod(9)
	local1, remote1 := hp(a.LocalPod(1), targetPort), hp(a.RemotePod(1), targetPort)
	// web is ns/web: ClusterIP ServiceIP(1), port 80 to 8080, with tweaks.
	web := func(tweaks ...func(*v1.Service)) *v1.Service {
		return st.NewService("ns", "web", append([]func(*v1.Service){
			st.ClusterIPs(a.ServiceIP(1)),
			st.Ports(st.ServicePort("http", svcPort, v1.ProtocolTCP, 0)),
		}, tweaks...)...)
	}
	webSlice := func(eps ...st.EP) *discovery.EndpointSlice {
		return st.Slice("ns", "web", "web-1", st.AddressTypeOf(a.Family),
			[]discovery.EndpointPort{st.SlicePort("http", targetPort, v1.ProtocolTCP)}, eps...)
	}
	local := func(i int) st.EP { return st.EP{IP: a.LocalPod(i), Node: a.NodeName} }
	remote := func(i int) st.EP { return st.EP{IP: a.RemotePod(i), Node: "node2"} }
	lb := st.LoadBalancer(nodePort, a.LoadBalancerIP)

	return []Scenario{{
		Name:     "cluster IP with endpoints",
		Services: []*v1.Service{web()},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "pod to cluster IP goes to any endpoint, source kept",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, local1, remote1)},
			{Name: "node to cluster IP is masqueraded",
				Packet: tcp(FromNode, a.Node, a.ServiceIP(1), svcPort), Want: dnat(true, local1, remote1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, local1, remote1), winNoMasq}}},
			{Name: "off-cluster source routed to the cluster IP is masqueraded",
				Packet: tcp(FromExternal, a.External, a.ServiceIP(1), svcPort), Want: dnat(true, local1, remote1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, local1, remote1), winNoMasq}}},
			{Name: "another port of the cluster IP",
				Packet: tcp(FromPod, client, a.ServiceIP(1), 81), Want: Outcome{Verdict: Reject},
				Except: map[Proxier]Deviation{
					IPTables:  {Outcome{Verdict: NoMatch}, "upstream's iptables proxier has no rule for unused ports of a cluster IP"},
					WinKernel: {Outcome{Verdict: NoMatch}, "HNS has load balancers for used ports only, and no reject rule"},
				}},
		},
	}, {
		Name:     "cluster IP without endpoints",
		Services: []*v1.Service{web()},
		Checks: []Check{
			{Name: "pod to cluster IP is rejected",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: Outcome{Verdict: Reject},
				Except: map[Proxier]Deviation{
					IPVS:      {Outcome{Verdict: EmptyVirtualServer}, ipvsEmpty},
					WinKernel: {Outcome{Verdict: NoMatch}, winNoReject},
				}},
		},
	}, {
		Name:     "node port",
		Services: []*v1.Service{web(st.NodePort(nodePort))},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "off-cluster client to the node port is masqueraded",
				Packet: tcp(FromExternal, a.External, a.Node, nodePort), Want: dnat(true, local1, remote1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, local1, remote1), winNoMasq}}},
			{Name: "the same port over UDP is not the Service's",
				Packet: udp(FromExternal, a.External, a.Node, nodePort), Want: Outcome{Verdict: NoMatch}},
			{Name: "the cluster IP still works",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, local1, remote1)},
		},
	}, {
		Name:     "load balancer with source ranges",
		Services: []*v1.Service{web(lb, st.SourceRanges(a.AllowedRange))},
		Slices:   []*discovery.EndpointSlice{webSlice(remote(1))},
		Checks: []Check{
			{Name: "allowed client to the load balancer IP",
				Packet: tcp(FromExternal, a.External, a.LoadBalancerIP, svcPort), Want: dnat(true, remote1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, remote1), winNoMasq}}},
			{Name: "client outside the source ranges is dropped",
				Packet: tcp(FromExternal, a.DeniedClient, a.LoadBalancerIP, svcPort), Want: Outcome{Verdict: Drop},
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, remote1), winNoSourceRanges}}},
		},
	}, {
		Name:     "external IPs",
		Services: []*v1.Service{web(st.ExternalIPs(a.ExternalIP))},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "off-cluster client to the external IP is masqueraded",
				Packet: tcp(FromExternal, a.External, a.ExternalIP, svcPort), Want: dnat(true, local1, remote1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, local1, remote1), winNoMasq}}},
		},
	}, {
		Name:     "externalTrafficPolicy Local with a local endpoint",
		Services: []*v1.Service{web(lb, st.ExternalLocal(hcNodePort))},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "node port goes to the local endpoint, source kept",
				Packet: tcp(FromExternal, a.External, a.Node, nodePort), Want: dnat(false, local1)},
			{Name: "load balancer IP goes to the local endpoint, source kept",
				Packet: tcp(FromExternal, a.External, a.LoadBalancerIP, svcPort), Want: dnat(false, local1)},
			{Name: "the cluster IP uses every endpoint",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, local1, remote1)},
		},
	}, {
		Name:     "externalTrafficPolicy Local without a local endpoint",
		Services: []*v1.Service{web(lb, st.ExternalLocal(hcNodePort))},
		Slices:   []*discovery.EndpointSlice{webSlice(remote(1))},
		Checks: []Check{
			{Name: "node port from outside is dropped",
				Packet: tcp(FromExternal, a.External, a.Node, nodePort), Want: Outcome{Verdict: Drop},
				Except: map[Proxier]Deviation{
					IPVS:      {dnat(false, remote1), "upstream's ipvs proxier falls back to every endpoint when none is local (kubernetes PR 97081), so local pods keep access"},
					WinKernel: {Outcome{Verdict: NoMatch}, winNoReject},
				}},
			{Name: "the cluster IP uses the remote endpoint",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, remote1)},
		},
	}, {
		Name:     "internalTrafficPolicy Local",
		Services: []*v1.Service{web(st.InternalLocal())},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "pod to cluster IP goes to the local endpoint only",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, local1)},
		},
	}, {
		Name:     "internalTrafficPolicy Local without a local endpoint",
		Services: []*v1.Service{web(st.InternalLocal())},
		Slices:   []*discovery.EndpointSlice{webSlice(remote(1))},
		Checks: []Check{
			{Name: "pod to cluster IP is dropped",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: Outcome{Verdict: Drop},
				Except: map[Proxier]Deviation{
					IPVS:      {Outcome{Verdict: EmptyVirtualServer}, ipvsEmpty},
					WinKernel: {Outcome{Verdict: NoMatch}, winNoReject},
				}},
		},
	}, {
		Name:     "terminating endpoints are a fallback",
		Services: []*v1.Service{web(st.NodePort(nodePort), st.ExternalLocal(hcNodePort))},
		Slices: []*discovery.EndpointSlice{webSlice(
			st.EP{IP: a.LocalPod(1), Node: a.NodeName, Terminating: true},
			st.EP{IP: a.LocalPod(2), Node: a.NodeName, Terminating: true, NotServing: true},
			remote(1))},
		Checks: []Check{
			{Name: "node port falls back to the serving terminating local endpoint",
				Packet: tcp(FromExternal, a.External, a.Node, nodePort), Want: dnat(false, local1)},
			{Name: "the cluster IP uses the ready endpoint",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, remote1)},
		},
	}, {
		Name:     "session affinity ClientIP",
		Services: []*v1.Service{web(st.ClientIPAffinity(600))},
		Slices:   []*discovery.EndpointSlice{webSlice(local(1), remote(1))},
		Checks: []Check{
			{Name: "pod to cluster IP sticks to its endpoint",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort),
				Want:   Outcome{Verdict: DNAT, Endpoints: []string{local1, remote1}, Affinity: true}},
		},
	}, {
		Name:       "topology hints",
		Services:   []*v1.Service{web()},
		Slices:     []*discovery.EndpointSlice{webSlice(st.EP{IP: a.LocalPod(1), Node: a.NodeName, Zones: []string{"zone-a"}}, st.EP{IP: a.RemotePod(1), Node: "node2", Zones: []string{"zone-b"}})},
		NodeLabels: map[string]string{v1.LabelTopologyZone: "zone-a"},
		Checks: []Check{
			{Name: "pod to cluster IP goes to this zone's endpoint",
				Packet: tcp(FromPod, client, a.ServiceIP(1), svcPort), Want: dnat(false, local1)},
		},
	}, {
		Name: "UDP service",
		Services: []*v1.Service{st.NewService("ns", "dns", st.ClusterIPs(a.ServiceIP(2)), st.Ports(st.ServicePort("dns", 53, v1.ProtocolUDP, udpNodePort)),
			func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })},
		Slices: []*discovery.EndpointSlice{st.Slice("ns", "dns", "dns-1", st.AddressTypeOf(a.Family),
			[]discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)}, remote(2))},
		Checks: []Check{
			{Name: "pod to cluster IP over UDP",
				Packet: udp(FromPod, client, a.ServiceIP(2), 53), Want: dnat(false, hp(a.RemotePod(2), 5353))},
			{Name: "off-cluster client to the UDP node port",
				Packet: udp(FromExternal, a.External, a.Node, udpNodePort), Want: dnat(true, hp(a.RemotePod(2), 5353)),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, hp(a.RemotePod(2), 5353)), winNoMasq}}},
		},
	}, {
		Name: "dual-stack Service",
		Services: []*v1.Service{st.NewService("ns", "web", st.ClusterIPs(a.ServiceIP(3), other.ServiceIP(3)),
			st.Ports(st.ServicePort("http", svcPort, v1.ProtocolTCP, nodePort)),
			func(s *v1.Service) { s.Spec.Type = v1.ServiceTypeNodePort })},
		Slices: []*discovery.EndpointSlice{
			webSlice(local(1)),
			st.Slice("ns", "web", "web-other", st.AddressTypeOf(other.Family),
				[]discovery.EndpointPort{st.SlicePort("http", targetPort, v1.ProtocolTCP)}, st.EP{IP: other.LocalPod(1), Node: a.NodeName}),
		},
		Checks: []Check{
			{Name: "this family's cluster IP goes to this family's endpoints",
				Packet: tcp(FromPod, client, a.ServiceIP(3), svcPort), Want: dnat(false, local1)},
			{Name: "this family's node port goes to this family's endpoints",
				Packet: tcp(FromExternal, a.External, a.Node, nodePort), Want: dnat(true, local1),
				Except: map[Proxier]Deviation{WinKernel: {dnat(false, local1), winNoMasq}}},
		},
	}}
}
