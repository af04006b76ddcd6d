//go:build linux

package ipvs

import (
	"net"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// fam holds one family's addresses, so each scenario is written once.
type fam struct {
	family      v1.IPFamily
	ipv6        bool
	clusterCIDR string
	node        string
	external    string // an off-cluster client
	extIP       string // a service externalIP
	lb          string // a load balancer ingress IP
	srcRange    string // a range holding external, not node
	nodeRange   string // a range holding node
	svcBase     string
	podBase     string // pods on this node
	rpodBase    string // pods on other nodes
}

var fams = []fam{
	{family: v1.IPv4Protocol, clusterCIDR: "10.0.0.0/8", node: "192.168.0.2", external: "203.0.113.5",
		extIP: "192.0.2.20", lb: "198.51.100.10", srcRange: "203.0.113.0/24", nodeRange: "192.168.0.0/24",
		svcBase: "172.30.0.", podBase: "10.0.1.", rpodBase: "10.0.2."},
	{family: v1.IPv6Protocol, ipv6: true, clusterCIDR: "fd00:10::/64", node: "fd00:192::2", external: "2001:db8::5",
		extIP: "2001:db8:200::20", lb: "2001:db8:100::10", srcRange: "2001:db8::/64", nodeRange: "fd00:192::/64",
		svcBase: "fd00:172:30::", podBase: "fd00:10::1:", rpodBase: "fd00:10::2:"},
}

func (f fam) svc(i int) string  { return f.svcBase + strconv.Itoa(i) }
func (f fam) pod(i int) string  { return f.podBase + strconv.Itoa(i) }
func (f fam) rpod(i int) string { return f.rpodBase + strconv.Itoa(i) }
func (f fam) hp(ip string, port int) string {
	return net.JoinHostPort(ip, strconv.Itoa(port))
}

// local is an endpoint on this node.
func local(ip string) st.EP { return st.EP{IP: ip, Node: testHostname} }

// probe is one traced packet and the expected outcome (trace.String()).
type probe struct {
	name string
	pkt  packet
	want string
}

type scenario struct {
	name     string
	opts     fakeProxierOptions
	services []*v1.Service
	slices   []*discovery.EndpointSlice
	probes   []probe
}

// webService is ns/web: cluster IP svc(1) port 80 -> 8080, NodePort 30080.
func webService(f fam, tweak func(*v1.Service)) *v1.Service {
	return st.NewService("ns", "web", func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(1)
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 30080)}
		if tweak != nil {
			tweak(s)
		}
	})
}

func webSlice(f fam, proto v1.Protocol, eps ...st.EP) *discovery.EndpointSlice {
	return st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("http", 8080, proto)}, eps...)
}

func lbService(f fam, tweak func(*v1.Service)) *v1.Service {
	return webService(f, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
		if tweak != nil {
			tweak(s)
		}
	})
}

func scenarios(f fam) []scenario {
	tcp := func(from origin, src, dst string, port int) packet {
		return packet{from: from, src: src, dst: dst, proto: "tcp", dport: port}
	}
	both := f.hp(f.pod(1), 8080) + "," + f.hp(f.rpod(1), 8080)
	detect := fakeProxierOptions{localDetectorCIDR: f.clusterCIDR}
	return []scenario{{
		name:     "cluster IP with detect-local",
		opts:     detect,
		services: []*v1.Service{webService(f, nil)},
		slices:   []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"pod to cluster IP is not masqueraded", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + both},
			{"hairpin is masqueraded", tcp(fromPod, f.pod(1), f.svc(1), 80), "ipvs " + both + " masq=" + f.hp(f.pod(1), 8080)},
			{"off-cluster source is masqueraded", tcp(fromExternal, f.external, f.svc(1), 80), "ipvs " + both + " masq=all"},
			{"other port on a VIP is rejected", tcp(fromExternal, f.external, f.svc(1), 22), "reject"},
			{"node port", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + both + " masq=all"},
			{"other port on the node is the host's", tcp(fromExternal, f.external, f.node, 22), "host"},
		},
	}, {
		name:     "cluster IP without detect-local masquerades VIP-sourced traffic",
		services: []*v1.Service{webService(f, nil)},
		slices:   []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"pod", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080)},
			{"node with VIP source", tcp(fromNode, f.svc(1), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
		},
	}, {
		name:     "masqueradeAll",
		opts:     fakeProxierOptions{masqueradeAll: true, localDetectorCIDR: f.clusterCIDR},
		services: []*v1.Service{webService(f, nil)},
		slices:   []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"pod is masqueraded too", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
		},
	}, {
		name: "session affinity is a persistent virtual server",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080) + " persistent=600"},
			{"node port", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + f.hp(f.rpod(1), 8080) + " persistent=600 masq=all"},
		},
	}, {
		name: "externalTrafficPolicy Local",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30900
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"node port goes to local endpoints, source kept", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + f.hp(f.pod(1), 8080)},
			{"cluster IP still uses every endpoint", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + both},
			{"health check node port is the host's", tcp(fromExternal, f.external, f.node, 30900), "host"},
		},
	}, {
		name: "externalTrafficPolicy Local without local endpoints falls back as upstream's ipvs mode",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"node port", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + f.hp(f.rpod(1), 8080)},
		},
	}, {
		name: "internalTrafficPolicy Local",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"cluster IP goes to local endpoints", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.pod(1), 8080)},
			{"node port uses every endpoint", tcp(fromExternal, f.external, f.node, 30080), "ipvs " + both + " masq=all"},
		},
	}, {
		name: "internalTrafficPolicy Local without local endpoints has no real server",
		opts: detect,
		services: []*v1.Service{st.NewService("ns", "web", func(s *v1.Service) {
			s.Spec.ClusterIP = f.svc(1)
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 0)}
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs"},
		},
	}, {
		name:     "terminating endpoints are used when none is ready, not-ready ones never",
		opts:     detect,
		services: []*v1.Service{webService(f, nil)},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP,
			st.EP{IP: f.rpod(1), NotReady: true, Terminating: true},
			st.EP{IP: f.rpod(2), NotReady: true, NotServing: true})},
		probes: []probe{
			{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs " + f.hp(f.rpod(1), 8080)},
		},
	}, {
		name: "external IPs",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{f.extIP}
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"from outside", tcp(fromExternal, f.external, f.extIP, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"from a pod", tcp(fromPod, f.pod(2), f.extIP, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"other port", tcp(fromExternal, f.external, f.extIP, 22), "reject"},
		},
	}, {
		name: "external IPs with externalTrafficPolicy Local",
		opts: detect,
		services: []*v1.Service{webService(f, func(s *v1.Service) {
			s.Spec.ExternalIPs = []string{f.extIP}
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"from outside", tcp(fromExternal, f.external, f.extIP, 80), "ipvs " + f.hp(f.pod(1), 8080)},
		},
	}, {
		name:     "load balancer",
		opts:     detect,
		services: []*v1.Service{lbService(f, nil)},
		slices:   []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"from outside", tcp(fromExternal, f.external, f.lb, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"other port", tcp(fromExternal, f.external, f.lb, 22), "reject"},
		},
	}, {
		name: "load balancer with externalTrafficPolicy Local",
		opts: detect,
		services: []*v1.Service{lbService(f, func(s *v1.Service) {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = 30900
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, local(f.pod(1)), st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"from outside", tcp(fromExternal, f.external, f.lb, 80), "ipvs " + f.hp(f.pod(1), 8080)},
			{"health check node port through the LB IP is let in", tcp(fromExternal, f.external, f.lb, 30900), "host"},
			{"other port on the LB IP", tcp(fromExternal, f.external, f.lb, 30901), "reject"},
		},
	}, {
		name: "load balancer source ranges without the node",
		opts: detect,
		services: []*v1.Service{lbService(f, func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{f.srcRange}
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"allowed client", tcp(fromExternal, f.external, f.lb, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"other client", tcp(fromExternal, f.pod(9), f.lb, 80), "drop"},
			{"the node itself", tcp(fromNode, f.lb, f.lb, 80), "drop"},
		},
	}, {
		name: "load balancer source ranges holding the node",
		opts: detect,
		services: []*v1.Service{lbService(f, func(s *v1.Service) {
			s.Spec.LoadBalancerSourceRanges = []string{f.srcRange, f.nodeRange}
		})},
		slices: []*discovery.EndpointSlice{webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)})},
		probes: []probe{
			{"allowed client", tcp(fromExternal, f.external, f.lb, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"the node itself", tcp(fromNode, f.lb, f.lb, 80), "ipvs " + f.hp(f.rpod(1), 8080) + " masq=all"},
			{"other client", tcp(fromExternal, f.pod(9), f.lb, 80), "drop"},
		},
	}, {
		name: "UDP and SCTP",
		opts: detect,
		services: []*v1.Service{
			st.NewService("ns", "dns", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(2)
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 30053)}
			}),
			st.NewService("ns", "sctp", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(3)
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("s", 9000, v1.ProtocolSCTP, 30900)}
			}),
		},
		slices: []*discovery.EndpointSlice{
			st.Slice("ns", "dns", "dns-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)}, st.EP{IP: f.rpod(1)}),
			st.Slice("ns", "sctp", "sctp-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("s", 9001, v1.ProtocolSCTP)}, st.EP{IP: f.rpod(2)}),
		},
		probes: []probe{
			{"udp cluster IP", packet{fromPod, f.pod(2), f.svc(2), "udp", 53}, "ipvs " + f.hp(f.rpod(1), 5353)},
			{"udp node port", packet{fromExternal, f.external, f.node, "udp", 30053}, "ipvs " + f.hp(f.rpod(1), 5353) + " masq=all"},
			{"tcp to the udp port", packet{fromPod, f.pod(2), f.svc(2), "tcp", 53}, "reject"},
			{"sctp cluster IP", packet{fromPod, f.pod(2), f.svc(3), "sctp", 9000}, "ipvs " + f.hp(f.rpod(2), 9001)},
			{"sctp node port", packet{fromExternal, f.external, f.node, "sctp", 30900}, "ipvs " + f.hp(f.rpod(2), 9001) + " masq=all"},
		},
	}, {
		name:     "service without endpoints",
		opts:     detect,
		services: []*v1.Service{webService(f, nil)},
		probes: []probe{
			{"cluster IP", tcp(fromPod, f.pod(2), f.svc(1), 80), "ipvs"},
		},
	}}
}

func TestBehaviour(t *testing.T) {
	for _, f := range fams {
		for _, sc := range scenarios(f) {
			t.Run(string(f.family)+"/"+sc.name, func(t *testing.T) {
				p, env := newFakeProxier(t, f.family, []string{f.node}, sc.opts)
				for _, s := range sc.services {
					p.OnServiceAdd(s)
				}
				for _, s := range sc.slices {
					p.OnEndpointSliceAdd(s)
				}
				syncAll(t, p)
				tr := newTracer(t, env)
				for _, pr := range sc.probes {
					if got := tr.trace(pr.pkt).String(); got != pr.want {
						t.Errorf("%s: %+v\n got %s\nwant %s", pr.name, pr.pkt, got, pr.want)
					}
				}
				if t.Failed() {
					t.Log(env.dump(t))
				}
			})
		}
	}
}
