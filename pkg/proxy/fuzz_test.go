package proxy

import (
	"net/netip"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// FuzzEndpointSliceUpdate feeds arbitrary EndpointSlices through the tracker
// and checks that conversion never panics and only yields programmable
// endpoints.
func FuzzEndpointSliceUpdate(f *testing.F) {
	f.Add("ns", "svc", "s1", "IPv4", "10.0.0.1,10.0.0.2", "p", int32(80), "TCP", "host1", uint8(0), false)
	f.Add("ns", "svc", "s1", "IPv6", "fd00::1,[::1]", "", int32(53), "UDP", "", uint8(7), false)
	f.Add("", "", "", "FQDN", "", "", int32(0), "", "", uint8(255), true)
	f.Add("ns", "svc", "s1", "IPv4", "bogus,,fd00::1,010.1.1.1", "p", int32(-1), "ICMP", "host1", uint8(3), false)
	f.Add("ns", "svc", "s1", "IPv4", "1.1.1.1", "p", int32(70000), "SCTP", "host1", uint8(1), true)

	f.Fuzz(func(t *testing.T, ns, svcName, sliceName, addrType, addrs, portName string, portNum int32, proto, nodeName string, conds uint8, remove bool) {
		s := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: sliceName, Labels: map[string]string{discovery.LabelServiceName: svcName}},
			AddressType: discovery.AddressType(addrType),
		}
		for i, a := range strings.Split(addrs, ",") {
			e := discovery.Endpoint{NodeName: ptr.To(nodeName)}
			if a != "" || i%2 == 0 {
				e.Addresses = []string{a}
			}
			if conds&1 != 0 {
				e.Conditions.Ready = ptr.To(conds&2 != 0)
			}
			if conds&4 != 0 {
				e.Conditions.Terminating = ptr.To(conds&8 != 0)
			}
			if conds&16 != 0 {
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: a}}, ForNodes: []discovery.ForNode{{Name: nodeName}}}
			}
			s.Endpoints = append(s.Endpoints, e)
		}
		p := discovery.EndpointPort{}
		if conds&32 == 0 {
			p.Name = ptr.To(portName)
		}
		if conds&64 == 0 {
			p.Port = ptr.To(portNum)
		}
		if conds&128 == 0 {
			p.Protocol = ptr.To(v1.Protocol(proto))
		}
		s.Ports = []discovery.EndpointPort{p, p}

		for _, family := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			ect := NewEndpointsChangeTracker(family, "host1", nil, nil)
			em := EndpointsMap{}
			ect.EndpointSliceUpdate(s, false)
			ect.EndpointSliceUpdate(s, remove)
			em.Update(ect)
			for spn, eps := range em {
				if !validProtocol(spn.Protocol) {
					t.Fatalf("endpoints for unsupported protocol %q", spn.Protocol)
				}
				for _, e := range eps {
					addr, err := netip.ParseAddr(e.IP())
					if err != nil || addr.Is6() != (family == v1.IPv6Protocol) {
						t.Fatalf("%s: endpoint IP %q is not a valid %s address", spn, e.IP(), family)
					}
					if e.Port() <= 0 || e.Port() > 65535 {
						t.Fatalf("%s: endpoint port %d out of range", spn, e.Port())
					}
				}
			}
			_ = em.LocalReadyEndpoints()
			ect.EndpointSliceUpdate(s, true)
			em.Update(ect)
			if len(em) != 0 {
				t.Fatalf("endpoints left after deleting the only slice: %v", emView(em))
			}
		}
	})
}

// FuzzServiceUpdate feeds arbitrary Services through the tracker and checks
// that every resulting ServicePort is programmable.
func FuzzServiceUpdate(f *testing.F) {
	f.Add("ns", "svc", "ClusterIP", "10.0.0.1", "", "p", "TCP", int32(80), int32(0), "", "", "", uint8(0), int32(0))
	f.Add("ns", "svc", "LoadBalancer", "fd00::1", "IPv6", "p", "UDP", int32(53), int32(30053), "2001:db8::1,bogus", "::/0, 2001:db8::/64", "2001:db8::9", uint8(255), int32(10800))
	f.Add("ns", "svc", "ExternalName", "None", "IPv4", "", "ICMP", int32(-5), int32(99999), ",", "x/y", "nope", uint8(3), int32(-1))
	f.Add("ns", "svc", "NodePort", "bogus", "IPv4", "p", "SCTP", int32(70000), int32(1), "1.1.1.1", "0.0.0.0/0", "1.2.3.4", uint8(12), int32(0))
	f.Add("ns", "svc", "NodePort", "10.0.0.1", "IPv4", "p", "UDP", int32(53), int32(-30053), "", "", "", uint8(4|8|64), int32(-7))
	f.Add("ns", "svc", "LoadBalancer", "10.0.0.1", "IPv4", "p", "TCP", int32(80), int32(65536), "", "", "10.9.9.9", uint8(4|8|16|64), int32(86401))

	f.Fuzz(func(t *testing.T, ns, name, typ, clusterIP, family, portName, proto string, portNum, nodePort int32, externalIPs, ranges, ingress string, flags uint8, affinityTimeout int32) {
		s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
		s.Spec.Type = v1.ServiceType(typ)
		s.Spec.ClusterIP = clusterIP
		if family != "" {
			s.Spec.IPFamilies = []v1.IPFamily{v1.IPFamily(family)}
			if flags&1 != 0 {
				s.Spec.ClusterIPs = []string{clusterIP}
			}
		}
		s.Spec.Ports = []v1.ServicePort{{Name: portName, Protocol: v1.Protocol(proto), Port: portNum, NodePort: nodePort}}
		if flags&2 != 0 {
			s.Spec.Ports = append(s.Spec.Ports, s.Spec.Ports[0])
		}
		s.Spec.ExternalIPs = strings.Split(externalIPs, ",")
		s.Spec.LoadBalancerSourceRanges = strings.Split(ranges, ",")
		for _, ip := range strings.Split(ingress, ",") {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{IP: ip})
		}
		if flags&4 != 0 {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			if flags&8 != 0 {
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{}}
				if flags&64 != 0 {
					s.Spec.SessionAffinityConfig.ClientIP.TimeoutSeconds = ptr.To(affinityTimeout)
				}
			}
		}
		if flags&16 != 0 {
			s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
			s.Spec.HealthCheckNodePort = nodePort
		}
		if flags&32 != 0 {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}

		for _, fam := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
			sct := NewServiceChangeTracker(fam, nil, nil)
			sm := ServicePortMap{}
			sct.Update(nil, s)
			sm.Update(sct)
			for spn, sp := range sm {
				ip := sp.ClusterIP()
				if ip == nil || (ip.To4() == nil) != (fam == v1.IPv6Protocol) {
					t.Fatalf("%s: cluster IP %v is not a valid %s address", spn, ip, fam)
				}
				if !validProtocol(sp.Protocol()) || sp.Port() <= 0 || sp.Port() > 65535 {
					t.Fatalf("%s: unprogrammable port %s %d", spn, sp.Protocol(), sp.Port())
				}
				if sp.NodePort() < 0 || sp.NodePort() > 65535 || sp.HealthCheckNodePort() < 0 || sp.HealthCheckNodePort() > 65535 {
					t.Fatalf("%s: node port %d or health check node port %d out of range", spn, sp.NodePort(), sp.HealthCheckNodePort())
				}
				if sp.SessionAffinityType() == v1.ServiceAffinityClientIP && (sp.StickyMaxAgeSeconds() <= 0 || sp.StickyMaxAgeSeconds() > 86400) {
					t.Fatalf("%s: affinity timeout %d out of range", spn, sp.StickyMaxAgeSeconds())
				}
				for _, e := range append(sp.ExternalIPs(), sp.LoadBalancerVIPs()...) {
					if e == nil || (e.To4() == nil) != (fam == v1.IPv6Protocol) {
						t.Fatalf("%s: frontend IP %v of the wrong family", spn, e)
					}
				}
				for _, c := range sp.LoadBalancerSourceRanges() {
					if c == nil {
						t.Fatalf("%s: nil source range", spn)
					}
				}
				_ = sp.String()
				_ = sp.UsesClusterEndpoints()
				_ = sp.UsesLocalEndpoints()
			}
			_ = sm.HealthCheckNodePorts()
			sct.Update(s, nil)
			sm.Update(sct)
			if len(sm) != 0 {
				t.Fatalf("ports left after delete: %v", mapView(sm))
			}
		}
	})
}
