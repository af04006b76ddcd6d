//go:build linux

package iptables

import (
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// check is one traced packet and its expected outcomes, each written as
// "VERDICT[ dnat=ip:port][ masq] (NN%)".
type check struct {
	name string
	pk   packet
	want []string
}

type scenario struct {
	name     string
	cfg      envConfig
	services []*v1.Service
	slices   []*discovery.EndpointSlice
	topology map[string]string
	checks   []check
}

// Packet constructors; ports and protocols default to TCP.
func (f fam) fromPod(src, dst string, port int) packet {
	return packet{from: fromPod, iif: "veth1", src: src, dst: dst, proto: "tcp", dport: port}
}
func (f fam) fromExt(dst string, port int) packet {
	return packet{from: fromExternal, iif: "eth0", src: f.external, dst: dst, proto: "tcp", dport: port}
}
func (f fam) fromHost(dst string, port int) packet {
	src := f.node
	if dst == f.loopback {
		src = f.loopback
	}
	return packet{from: fromHost, src: src, dst: dst, proto: "tcp", dport: port}
}
func withProto(pk packet, proto string) packet { pk.proto = proto; return pk }
func strict(pk packet) packet                  { pk.dropPolicy = true; return pk }

func acc(dnat string, masq bool, pct string) string {
	s := "ACCEPT"
	if dnat != "" {
		s += " dnat=" + dnat
	}
	if masq {
		s += " masq"
	}
	return s + " (" + pct + ")"
}

// The standard service used by most scenarios: ns1/svc1 port "p80" 80/TCP,
// NodePort 3001, two endpoints: a local pod and a remote pod, on port 8080.
func (f fam) stdService(tweak func(*v1.Service)) *v1.Service {
	return st.NewService("ns1", "svc1", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(1)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 0)}
		if tweak != nil {
			tweak(s)
		}
	})
}

func (f fam) stdSlice(eps ...st.EP) *discovery.EndpointSlice {
	if eps == nil {
		eps = []st.EP{{IP: f.pod(1), Node: testNodeName}, {IP: f.rpod(1), Node: "node2"}}
	}
	return st.Slice("ns1", "svc1", "svc1-abc", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}, eps...)
}

func nodePortLB(f fam, etp v1.ServiceExternalTrafficPolicy, hc int32) func(*v1.Service) {
	return func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 3001
		s.Spec.ExternalTrafficPolicy = etp
		s.Spec.HealthCheckNodePort = hc
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
	}
}

func scenarios(f fam) []scenario {
	ep1, ep2 := f.hp(f.pod(1), 8080), f.hp(f.rpod(1), 8080)
	ipv4 := f.family == v1.IPv4Protocol
	return []scenario{
		{
			name:     "cluster IP",
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"pod to cluster IP spreads evenly, no masquerade", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"off-cluster source routed to cluster IP is masqueraded", f.fromExt(f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"host to cluster IP is masqueraded", f.fromHost(f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"wrong port is not touched", f.fromPod(f.pod(9), f.svc(1), 81), []string{acc("", false, "100%")}},
				{"wrong protocol is not touched", withProto(f.fromPod(f.pod(9), f.svc(1), 80), "udp"), []string{acc("", false, "100%")}},
				{"hairpin to itself is masqueraded", f.fromPod(f.pod(1), f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, false, "50%")}},
			},
		},
		{
			name:     "masqueradeAll",
			cfg:      envConfig{masqueradeAll: true},
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"pod to cluster IP masqueraded", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			// The mark is configurable and iptables may lack --random-fully:
			// every rule that sets, tests or clears the mark must agree.
			name:     "masquerade bit 0, iptables without --random-fully",
			cfg:      envConfig{masqueradeBit: ptr.To[int32](0), noRandomFully: true},
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"pod to cluster IP, no masquerade", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"hairpin masqueraded", f.fromPod(f.pod(1), f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, false, "50%")}},
				{"node port masqueraded and forwarded under FORWARD policy DROP", strict(f.fromExt(f.node, 3001)), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name:     "no local detector: off-cluster sources are not masqueraded",
			cfg:      envConfig{detector: "none"},
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"external to cluster IP", f.fromExt(f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
			},
		},
		{
			name:     "detect local by bridge interface",
			cfg:      envConfig{detector: "bridge"},
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"from the bridge: local", packet{from: fromPod, iif: "cbr0", src: f.pod(9), dst: f.svc(1), proto: "tcp", dport: 80}, []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"from elsewhere: masqueraded", packet{from: fromPod, iif: "eth1", src: f.pod(9), dst: f.svc(1), proto: "tcp", dport: 80}, []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name:     "detect local by interface name prefix",
			cfg:      envConfig{detector: "prefix"},
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"from veth: local", packet{from: fromPod, iif: "veth77", src: f.pod(9), dst: f.svc(1), proto: "tcp", dport: 80}, []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"from eth0: masqueraded", f.fromExt(f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"from host: masqueraded", f.fromHost(f.svc(1), 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name: "no endpoints: reject on every address",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0)(s)
				s.Spec.ExternalIPs = []string{f.extIP}
			})},
			checks: []check{
				{"cluster IP", f.fromPod(f.pod(9), f.svc(1), 80), []string{"REJECT (100%)"}},
				{"cluster IP from host", f.fromHost(f.svc(1), 80), []string{"REJECT (100%)"}},
				{"external IP", f.fromExt(f.extIP, 80), []string{"REJECT (100%)"}},
				{"load balancer IP", f.fromExt(f.lb, 80), []string{"REJECT (100%)"}},
				{"node port", f.fromExt(f.node, 3001), []string{"REJECT (100%)"}},
				{"other port of the cluster IP untouched", f.fromPod(f.pod(9), f.svc(1), 81), []string{acc("", false, "100%")}},
			},
		},
		{
			name:     "endpoints that are not ready and not serving count as none",
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice(st.EP{IP: f.pod(1), Node: testNodeName, NotReady: true, NotServing: true})},
			checks: []check{
				{"cluster IP", f.fromPod(f.pod(9), f.svc(1), 80), []string{"REJECT (100%)"}},
			},
		},
		{
			name:     "node port, cluster policy",
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"external to node IP", f.fromExt(f.node, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"forwarded under FORWARD policy DROP thanks to the masquerade mark", strict(f.fromExt(f.node, 3001)), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"external to second node IP", f.fromExt(f.node2, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"pod to node IP", f.fromPod(f.pod(9), f.node, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"host to node IP", f.fromHost(f.node, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"node port on a non-local address is not captured", f.fromExt(f.otherNode, 3001), []string{acc("", false, "100%")}},
				{"load balancer IP", f.fromExt(f.lb, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"localhost node port", f.fromHost(f.loopback, 3001), localhostNodePort(ipv4, ep1, ep2)},
			},
		},
		{
			name:     "localhost node ports disabled",
			cfg:      envConfig{localhostNodePorts: ptr.To(false)},
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"localhost node port not captured", f.fromHost(f.loopback, 3001), []string{acc("", false, "100%")}},
				{"node IP still works", f.fromExt(f.node, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name:     "node port addresses restricted to one address",
			cfg:      envConfig{nodePortAddresses: []string{f.cidr(f.node2)}},
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"listed address", f.fromExt(f.node2, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"unlisted node address", f.fromExt(f.node, 3001), []string{acc("", false, "100%")}},
				{"localhost", f.fromHost(f.loopback, 3001), []string{acc("", false, "100%")}},
			},
		},
		{
			name: "external IPs",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				s.Spec.ExternalIPs = []string{f.extIP}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"external client", f.fromExt(f.extIP, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"pod", f.fromPod(f.pod(9), f.extIP, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"host", f.fromHost(f.extIP, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"wrong port", f.fromExt(f.extIP, 81), []string{acc("", false, "100%")}},
			},
		},
		{
			name: "load balancer source ranges",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0)(s)
				s.Spec.LoadBalancerSourceRanges = []string{f.cidr(f.external)}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"allowed source", f.fromExt(f.lb, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"other source dropped", packet{from: fromExternal, iif: "eth0", src: f.otherNode, dst: f.lb, proto: "tcp", dport: 80}, []string{"DROP (100%)"}},
				{"node port is not filtered", packet{from: fromExternal, iif: "eth0", src: f.otherNode, dst: f.node, proto: "tcp", dport: 3001}, []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name: "load balancer source ranges containing the node: the node may use the VIP",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0)(s)
				s.Spec.LoadBalancerSourceRanges = []string{f.cidr(f.external), f.cidr(f.node)}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"request looped back with the VIP as source", packet{from: fromHost, src: f.lb, dst: f.lb, proto: "tcp", dport: 80}, []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"other source dropped", packet{from: fromExternal, iif: "eth0", src: f.otherNode, dst: f.lb, proto: "tcp", dport: 80}, []string{"DROP (100%)"}},
			},
		},
		{
			name: "load balancer ipMode Proxy is not captured",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0)(s)
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb, IPMode: ptr.To(v1.LoadBalancerIPModeProxy)}, {IP: f.lb2, IPMode: ptr.To(v1.LoadBalancerIPModeVIP)}}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"proxy-mode IP", f.fromExt(f.lb, 80), []string{acc("", false, "100%")}},
				{"VIP-mode IP", f.fromExt(f.lb2, 80), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
			},
		},
		{
			name: "external traffic policy Local with a local endpoint",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyLocal, 30000)(s)
				s.Spec.ExternalIPs = []string{f.extIP}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"external to node port: local endpoint only, source kept", f.fromExt(f.node, 3001), []string{acc(ep1, false, "100%")}},
				{"external to LB: local endpoint only", f.fromExt(f.lb, 80), []string{acc(ep1, false, "100%")}},
				{"external to external IP: local endpoint only", f.fromExt(f.extIP, 80), []string{acc(ep1, false, "100%")}},
				{"pod to LB: short-circuited to all endpoints", f.fromPod(f.pod(9), f.lb, 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"host to node port: all endpoints, masqueraded", f.fromHost(f.node, 3001), []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}},
				{"cluster IP unaffected", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
				{"health check node port accepted even with INPUT policy DROP", strict(f.fromExt(f.node, 30000)), []string{acc("", false, "100%")}},
				{"other node port closed under INPUT policy DROP", strict(f.fromExt(f.node, 30001)), []string{"DROP (100%)"}},
			},
		},
		{
			name: "external traffic policy Local without local endpoints",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				nodePortLB(f, v1.ServiceExternalTrafficPolicyLocal, 30000)(s)
				s.Spec.ExternalIPs = []string{f.extIP}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice(st.EP{IP: f.rpod(1), Node: "node2"})},
			checks: []check{
				{"external to node port dropped", f.fromExt(f.node, 3001), []string{"DROP (100%)"}},
				{"external to LB dropped", f.fromExt(f.lb, 80), []string{"DROP (100%)"}},
				{"external to external IP dropped", f.fromExt(f.extIP, 80), []string{"DROP (100%)"}},
				{"pod to LB still served", f.fromPod(f.pod(9), f.lb, 80), []string{acc(ep2, false, "100%")}},
				{"host to LB still served, masqueraded", f.fromHost(f.lb, 80), []string{acc(ep2, true, "100%")}},
				{"cluster IP unaffected", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep2, false, "100%")}},
				{"health check node port accepted", strict(f.fromExt(f.node, 30000)), []string{acc("", false, "100%")}},
			},
		},
		{
			name: "internal traffic policy Local",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"pod gets the local endpoint only", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "100%")}},
			},
		},
		{
			name: "internal traffic policy Local without local endpoints drops",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice(st.EP{IP: f.rpod(1), Node: "node2"})},
			checks: []check{
				{"pod", f.fromPod(f.pod(9), f.svc(1), 80), []string{"DROP (100%)"}},
			},
		},
		{
			name:     "terminating endpoints are used only when nothing else serves",
			services: []*v1.Service{f.stdService(nil)},
			slices: []*discovery.EndpointSlice{f.stdSlice(
				st.EP{IP: f.pod(1), Node: testNodeName, Terminating: true},
				st.EP{IP: f.rpod(1), Node: "node2", Terminating: true},
				st.EP{IP: f.rpod(2), Node: "node2", Terminating: true, NotServing: true},
			)},
			checks: []check{
				{"serving terminating endpoints", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
			},
		},
		{
			name:     "terminating endpoints are ignored while a ready one exists",
			services: []*v1.Service{f.stdService(nil)},
			slices: []*discovery.EndpointSlice{f.stdSlice(
				st.EP{IP: f.pod(1), Node: testNodeName, Terminating: true},
				st.EP{IP: f.rpod(1), Node: "node2"},
			)},
			checks: []check{
				{"ready endpoint only", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep2, false, "100%")}},
			},
		},
		{
			name:     "external policy Local falls back to a local terminating endpoint",
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyLocal, 30000))},
			slices: []*discovery.EndpointSlice{f.stdSlice(
				st.EP{IP: f.pod(1), Node: testNodeName, Terminating: true},
				st.EP{IP: f.rpod(1), Node: "node2"},
			)},
			checks: []check{
				{"external to LB", f.fromExt(f.lb, 80), []string{acc(ep1, false, "100%")}},
				{"cluster IP uses the ready endpoint", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep2, false, "100%")}},
			},
		},
		{
			name:     "topology hints select same-zone endpoints",
			services: []*v1.Service{f.stdService(nil)},
			slices: []*discovery.EndpointSlice{f.stdSlice(
				st.EP{IP: f.pod(1), Node: testNodeName, Zones: []string{"zone-a"}},
				st.EP{IP: f.rpod(1), Node: "node2", Zones: []string{"zone-b"}},
			)},
			topology: map[string]string{v1.LabelTopologyZone: "zone-a"},
			checks: []check{
				{"same zone only", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "100%")}},
			},
		},
		{
			name: "session affinity ClientIP",
			services: []*v1.Service{f.stdService(func(s *v1.Service) {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
			})},
			slices: []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"first packet spreads", f.fromPod(f.pod(9), f.svc(1), 80), []string{acc(ep1, false, "50%"), acc(ep2, false, "50%")}},
			},
		},
		{
			name: "UDP and SCTP ports, multiple ports",
			services: []*v1.Service{st.NewService("ns2", "dns", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(10)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 0), st.ServicePort("dns-tcp", 53, v1.ProtocolTCP, 0), st.ServicePort("sctp", 9999, v1.ProtocolSCTP, 0)}
			})},
			slices: []*discovery.EndpointSlice{st.Slice("ns2", "dns", "dns-1", st.AddressTypeOf(f.family),
				[]discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP), st.SlicePort("dns-tcp", 5354, v1.ProtocolTCP), st.SlicePort("sctp", 9998, v1.ProtocolSCTP)},
				st.EP{IP: f.rpod(5), Node: "node2"})},
			checks: []check{
				{"udp", withProto(f.fromPod(f.pod(9), f.svc(10), 53), "udp"), []string{acc(f.hp(f.rpod(5), 5353), false, "100%")}},
				{"tcp", f.fromPod(f.pod(9), f.svc(10), 53), []string{acc(f.hp(f.rpod(5), 5354), false, "100%")}},
				{"sctp", withProto(f.fromPod(f.pod(9), f.svc(10), 9999), "sctp"), []string{acc(f.hp(f.rpod(5), 9998), false, "100%")}},
				{"sctp on the udp port untouched", withProto(f.fromPod(f.pod(9), f.svc(10), 53), "sctp"), []string{acc("", false, "100%")}},
			},
		},
		{
			name:     "three endpoints get a third each",
			services: []*v1.Service{f.stdService(nil)},
			slices: []*discovery.EndpointSlice{f.stdSlice(
				st.EP{IP: f.rpod(1), Node: "node2"}, st.EP{IP: f.rpod(2), Node: "node2"}, st.EP{IP: f.rpod(3), Node: "node3"},
			)},
			checks: []check{
				{"even", f.fromPod(f.pod(9), f.svc(1), 80), []string{
					acc(f.hp(f.rpod(1), 8080), false, "33%"), acc(f.hp(f.rpod(2), 8080), false, "33%"), acc(f.hp(f.rpod(3), 8080), false, "33%")}},
			},
		},
		{
			name:     "INVALID packets are dropped when forwarded",
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"invalid", packet{from: fromPod, iif: "veth1", src: f.pod(9), dst: f.rpod(1), proto: "tcp", dport: 8080, invalid: true}, []string{"DROP (100%)"}},
			},
		},
		{
			name:     "INVALID packets pass when nf_conntrack_tcp_be_liberal is set",
			cfg:      envConfig{beLiberal: true},
			services: []*v1.Service{f.stdService(nil)},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"invalid", packet{from: fromPod, iif: "veth1", src: f.pod(9), dst: f.rpod(1), proto: "tcp", dport: 8080, invalid: true}, []string{acc("", false, "100%")}},
			},
		},
		{
			name:     "nfacct counters present",
			cfg:      envConfig{nfacct: true},
			services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))},
			slices:   []*discovery.EndpointSlice{f.stdSlice()},
			checks: []check{
				{"invalid dropped through the counted rule", packet{from: fromPod, iif: "veth1", src: f.pod(9), dst: f.rpod(1), proto: "tcp", dport: 8080, invalid: true}, []string{"DROP (100%)"}},
				{"localhost node port", f.fromHost(f.loopback, 3001), localhostNodePort(ipv4, ep1, ep2)},
			},
		},
	}
}

// localhostNodePort is the expected outcome of host -> loopback:nodePort:
// served (and masqueraded) for IPv4 with route_localnet, ignored for IPv6.
func localhostNodePort(ipv4 bool, ep1, ep2 string) []string {
	if ipv4 {
		return []string{acc(ep1, true, "50%"), acc(ep2, true, "50%")}
	}
	return []string{acc("", false, "100%")}
}

// setupScenario builds an env for sc and runs its first sync.
func setupScenario(t *testing.T, f fam, sc scenario) *testEnv {
	t.Helper()
	env := newTestEnv(t, f, sc.cfg)
	if sc.topology != nil {
		env.p.OnTopologyChange(sc.topology)
	}
	for _, s := range sc.services {
		env.p.OnServiceAdd(s)
	}
	for _, s := range sc.slices {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	return env
}

func TestBehaviour(t *testing.T) {
	for _, f := range families {
		for _, sc := range scenarios(f) {
			t.Run(string(f.family)+"/"+sc.name, func(t *testing.T) {
				env := setupScenario(t, f, sc)
				tr := env.tracer(t)
				for _, c := range sc.checks {
					outs, err := tr.trace(c.pk)
					if err != nil {
						t.Fatalf("%s: trace: %v", c.name, err)
					}
					if got := summary(outs); !slices.Equal(got, c.want) {
						t.Errorf("%s: %s packet %s -> %s:%d\n got: %q\nwant: %q\npaths:\n%s",
							c.name, c.pk.from, c.pk.src, c.pk.dst, c.pk.dport, got, c.want, fmtOutcomes(outs))
					}
				}
			})
		}
	}
}

// With ClientIP affinity, a client's later connections go where its first
// one went.
func TestSessionAffinitySticks(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			sc := scenario{
				services: []*v1.Service{f.stdService(func(s *v1.Service) {
					s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
					s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](300)}}
				})},
				slices: []*discovery.EndpointSlice{f.stdSlice()},
			}
			env := setupScenario(t, f, sc)
			if !strings.Contains(env.dump(t), "--seconds 300") {
				t.Errorf("affinity timeout 300 not in rules:\n%s", env.dump(t))
			}
			for _, first := range []int{0, 1} {
				tr := env.tracer(t)
				pk := f.fromPod(f.pod(9), f.svc(1), 80)
				outs, err := tr.trace(pk)
				if err != nil {
					t.Fatal(err)
				}
				if len(outs) != 2 {
					t.Fatalf("first connection: want 2 outcomes, got %v", summary(outs))
				}
				chosen := outs[first]
				tr.remember(pk.src, chosen)
				again, err := tr.trace(pk)
				if err != nil {
					t.Fatal(err)
				}
				want := []string{acc(chosen.dnat, false, "100%")}
				if got := summary(again); !slices.Equal(got, want) {
					t.Errorf("second connection after %s: got %q, want %q", chosen.dnat, got, want)
				}
				// A different client is not affected.
				other := f.fromPod(f.pod(8), f.svc(1), 80)
				if outs, _ := tr.trace(other); len(outs) != 2 {
					t.Errorf("other client should still spread, got %v", summary(outs))
				}
			}
		})
	}
}

// The localnet rule guards route_localnet: remote packets to 127.0.0.0/8
// must die.
func TestLocalnetGuard(t *testing.T) {
	f := families[0]
	env := setupScenario(t, f, scenario{services: []*v1.Service{f.stdService(nodePortLB(f, v1.ServiceExternalTrafficPolicyCluster, 0))}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
	tr := env.tracer(t)
	outs, err := tr.trace(packet{from: fromExternal, iif: "eth0", src: f.external, dst: "127.0.0.1", proto: "tcp", dport: 22})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := summary(outs), []string{"DROP (100%)"}; !slices.Equal(got, want) {
		t.Errorf("remote to 127.0.0.1:22: got %q, want %q", got, want)
	}
	// Without localhost node ports, the rule is not needed and not written.
	env = setupScenario(t, f, scenario{cfg: envConfig{localhostNodePorts: ptr.To(false)}})
	if strings.Contains(env.dump(t), "block incoming localnet connections") {
		t.Errorf("localnet guard written although localhost node ports are off")
	}
	if len(env.sysctl.Writes) != 0 {
		t.Errorf("sysctls written with localhost node ports off: %v", env.sysctl.Writes)
	}
	env = setupScenario(t, f, scenario{})
	if v, _ := env.sysctl.GetSysctl(sysctlRouteLocalnet); v != 1 {
		t.Errorf("route_localnet = %d with localhost node ports on, want 1", v)
	}
}
