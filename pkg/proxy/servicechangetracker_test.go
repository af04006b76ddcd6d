package proxy

import (
	"net"
	"reflect"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	featuregatetesting "k8s.io/component-base/featuregate/testing"
	netutils "k8s.io/utils/net"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/features"
)

func svc(ns, name string, mod func(*v1.Service)) *v1.Service {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	mod(s)
	return s
}

func port(name string, proto v1.Protocol, p, nodePort int32) v1.ServicePort {
	return v1.ServicePort{Name: name, Protocol: proto, Port: p, NodePort: nodePort}
}

func spn(ns, name, p string, proto v1.Protocol) ServicePortName {
	return ServicePortName{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}, Port: p, Protocol: proto}
}

func ips(s ...string) []net.IP {
	var out []net.IP
	for _, x := range s {
		out = append(out, netutils.ParseIPSloppy(x))
	}
	return out
}

// info is the expected view of one BaseServicePortInfo.
type info struct {
	ClusterIP     string
	Port          int
	Protocol      v1.Protocol
	NodePort      int
	HCNodePort    int
	ExternalIPs   []string
	LBVIPs        []string
	SourceRanges  []string
	Affinity      v1.ServiceAffinity
	StickySeconds int
	ExtLocal      bool
	IntLocal      bool
}

func viewOf(sp ServicePort) info {
	str := func(ips []net.IP) []string {
		var out []string
		for _, ip := range ips {
			out = append(out, ip.String())
		}
		return out
	}
	var ranges []string
	for _, c := range sp.LoadBalancerSourceRanges() {
		ranges = append(ranges, c.String())
	}
	return info{
		ClusterIP: sp.ClusterIP().String(), Port: sp.Port(), Protocol: sp.Protocol(), NodePort: sp.NodePort(),
		HCNodePort: sp.HealthCheckNodePort(), ExternalIPs: str(sp.ExternalIPs()), LBVIPs: str(sp.LoadBalancerVIPs()),
		SourceRanges: ranges, Affinity: sp.SessionAffinityType(), StickySeconds: sp.StickyMaxAgeSeconds(),
		ExtLocal: sp.ExternalPolicyLocal(), IntLocal: sp.InternalPolicyLocal(),
	}
}

func TestServiceToServiceMap(t *testing.T) {
	dual := func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIP = "10.0.0.1"
		s.Spec.ClusterIPs = []string{"10.0.0.1", "fd00::1"}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		s.Spec.ExternalIPs = []string{"1.1.1.1", "2001:db8::1"}
		s.Spec.LoadBalancerSourceRanges = []string{"1.1.1.0/24", "2001:db8::/64"}
		s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 30080)}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "9.9.9.9"}, {IP: "2001:db8::9"}}
	}
	tests := []struct {
		name   string
		family v1.IPFamily
		svc    *v1.Service
		want   map[ServicePortName]info
	}{
		{name: "nil service", family: v1.IPv4Protocol, svc: nil, want: nil},
		{
			name: "headless service", family: v1.IPv4Protocol,
			svc: svc("ns", "headless", func(s *v1.Service) {
				s.Spec.ClusterIP = v1.ClusterIPNone
				s.Spec.Ports = []v1.ServicePort{port("rpc", v1.ProtocolUDP, 1234, 0)}
			}),
		},
		{
			name: "headless without ports", family: v1.IPv4Protocol,
			svc: svc("ns", "headless", func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone }),
		},
		{
			name: "ExternalName service", family: v1.IPv4Protocol,
			svc: svc("ns", "ext", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeExternalName
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.ExternalName = "example.com"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
		},
		{
			name: "cluster IP service with TCP, UDP and SCTP ports", family: v1.IPv4Protocol,
			svc: svc("ns", "c", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeClusterIP
				s.Spec.ClusterIP = "172.16.55.4"
				s.Spec.Ports = []v1.ServicePort{port("a", v1.ProtocolTCP, 1234, 0), port("b", v1.ProtocolUDP, 1235, 0), port("c", v1.ProtocolSCTP, 1236, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "c", "a", v1.ProtocolTCP):  {ClusterIP: "172.16.55.4", Port: 1234, Protocol: v1.ProtocolTCP},
				spn("ns", "c", "b", v1.ProtocolUDP):  {ClusterIP: "172.16.55.4", Port: 1235, Protocol: v1.ProtocolUDP},
				spn("ns", "c", "c", v1.ProtocolSCTP): {ClusterIP: "172.16.55.4", Port: 1236, Protocol: v1.ProtocolSCTP},
			},
		},
		{
			name: "node port service", family: v1.IPv4Protocol,
			svc: svc("ns", "np", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.ClusterIP = "172.16.55.10"
				s.Spec.Ports = []v1.ServicePort{port("a", v1.ProtocolUDP, 345, 678)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "np", "a", v1.ProtocolUDP): {ClusterIP: "172.16.55.10", Port: 345, Protocol: v1.ProtocolUDP, NodePort: 678},
			},
		},
		{
			name: "load balancer: VIP and unset ipMode ingress used, Proxy ipMode and hostname-only ignored", family: v1.IPv4Protocol,
			svc: svc("ns", "lb", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "172.16.55.11"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 8675, 30061)}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
					{IP: "10.1.2.4"},
					{IP: "10.1.2.5", IPMode: ptr.To(v1.LoadBalancerIPModeVIP)},
					{IP: "10.1.2.6", IPMode: ptr.To(v1.LoadBalancerIPModeProxy)},
					{Hostname: "lb.example.com"},
				}
			}),
			want: map[ServicePortName]info{
				spn("ns", "lb", "p", v1.ProtocolTCP): {ClusterIP: "172.16.55.11", Port: 8675, Protocol: v1.ProtocolTCP, NodePort: 30061, LBVIPs: []string{"10.1.2.4", "10.1.2.5"}},
			},
		},
		{
			name: "load balancer with Local traffic policy gets a health check node port", family: v1.IPv4Protocol,
			svc: svc("ns", "lb", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "172.16.55.12"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolUDP, 8677, 30063)}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 345
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}),
			want: map[ServicePortName]info{
				spn("ns", "lb", "p", v1.ProtocolUDP): {ClusterIP: "172.16.55.12", Port: 8677, Protocol: v1.ProtocolUDP, NodePort: 30063, HCNodePort: 345, ExtLocal: true, IntLocal: true},
			},
		},
		{
			name: "eTP Local on a ClusterIP service without external IPs is not external-local", family: v1.IPv4Protocol,
			svc: svc("ns", "c", func(s *v1.Service) {
				s.Spec.ClusterIP = "172.16.55.4"
				s.Spec.Type = v1.ServiceTypeClusterIP
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "c", "p", v1.ProtocolTCP): {ClusterIP: "172.16.55.4", Port: 80, Protocol: v1.ProtocolTCP},
			},
		},
		{
			name: "IPv6 cluster IP under IPv4 is filtered", family: v1.IPv4Protocol,
			svc: svc("ns", "v6", func(s *v1.Service) {
				s.Spec.ClusterIP = "2001:db8:85a3::8a2e:370:7334"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
		},
		{
			name: "IPv4 cluster IP under IPv6 is filtered", family: v1.IPv6Protocol,
			svc: svc("ns", "v4", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
		},
		{
			name: "dual-stack under IPv4 keeps only IPv4 fields", family: v1.IPv4Protocol,
			svc: svc("ns", "d", dual),
			want: map[ServicePortName]info{
				spn("ns", "d", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080,
					ExternalIPs: []string{"1.1.1.1"}, LBVIPs: []string{"9.9.9.9"}, SourceRanges: []string{"1.1.1.0/24"}},
			},
		},
		{
			name: "dual-stack under IPv6 keeps only IPv6 fields", family: v1.IPv6Protocol,
			svc: svc("ns", "d", dual),
			want: map[ServicePortName]info{
				spn("ns", "d", "p", v1.ProtocolTCP): {ClusterIP: "fd00::1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30080,
					ExternalIPs: []string{"2001:db8::1"}, LBVIPs: []string{"2001:db8::9"}, SourceRanges: []string{"2001:db8::/64"}},
			},
		},
		{
			name: "source ranges are trimmed, and a zero CIDR means no ranges", family: v1.IPv4Protocol,
			svc: svc("ns", "r", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.LoadBalancerSourceRanges = []string{" 10.1.0.0/16 ", "0.0.0.0/0"}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 30000)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "r", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30000},
			},
		},
		{
			name: "source ranges with blanks kept", family: v1.IPv4Protocol,
			svc: svc("ns", "r", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.LoadBalancerSourceRanges = []string{" 10.1.0.0/16 ", "10.2.0.0/16  "}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 30000)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "r", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30000, SourceRanges: []string{"10.1.0.0/16", "10.2.0.0/16"}},
			},
		},
		{
			name: "ClientIP affinity uses the configured timeout", family: v1.IPv4Protocol,
			svc: svc("ns", "a", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](77)}}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "a", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, Affinity: v1.ServiceAffinityClientIP, StickySeconds: 77},
			},
		},
		// Malformed objects: never panic, skip what cannot be programmed.
		{
			name: "ClientIP affinity without config defaults the timeout", family: v1.IPv4Protocol,
			svc: svc("ns", "a", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "a", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, Affinity: v1.ServiceAffinityClientIP, StickySeconds: int(v1.DefaultClientIPServiceAffinitySeconds)},
			},
		},
		{
			name: "invalid cluster IP skips the service", family: v1.IPv4Protocol,
			svc: svc("ns", "bad", func(s *v1.Service) {
				s.Spec.ClusterIP = "not-an-ip"
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
		},
		{
			name: "cluster IP of the wrong declared family skips the service", family: v1.IPv4Protocol,
			svc: svc("ns", "bad", func(s *v1.Service) {
				s.Spec.ClusterIP = "fd00::1"
				s.Spec.ClusterIPs = []string{"fd00::1"}
				s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
		},
		{
			name: "unknown protocol and invalid port numbers skip only those ports", family: v1.IPv4Protocol,
			svc: svc("ns", "bad", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.Ports = []v1.ServicePort{port("icmp", "ICMP", 80, 0), port("empty", "", 81, 0), port("zero", v1.ProtocolTCP, 0, 0), port("big", v1.ProtocolTCP, 70000, 0), port("ok", v1.ProtocolTCP, 82, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "bad", "ok", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 82, Protocol: v1.ProtocolTCP},
			},
		},
		{
			name: "invalid external and ingress IPs are dropped", family: v1.IPv4Protocol,
			svc: svc("ns", "bad", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.ExternalIPs = []string{"bogus", "", "1.2.3.4"}
				s.Spec.LoadBalancerSourceRanges = []string{"bogus/99"}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "nope"}, {IP: "5.6.7.8"}}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 30000)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "bad", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30000, ExternalIPs: []string{"1.2.3.4"}, LBVIPs: []string{"5.6.7.8"}},
			},
		},
		{
			name: "out-of-range node ports are dropped, the ports kept", family: v1.IPv4Protocol,
			svc: svc("ns", "np", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.Ports = []v1.ServicePort{port("neg", v1.ProtocolTCP, 80, -1), port("big", v1.ProtocolTCP, 81, 65536), port("ok", v1.ProtocolTCP, 82, 65535)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "np", "neg", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP},
				spn("ns", "np", "big", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 81, Protocol: v1.ProtocolTCP},
				spn("ns", "np", "ok", v1.ProtocolTCP):  {ClusterIP: "10.0.0.1", Port: 82, Protocol: v1.ProtocolTCP, NodePort: 65535},
			},
		},
		{
			name: "ClientIP affinity with a zero timeout defaults it", family: v1.IPv4Protocol,
			svc: svc("ns", "a", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](0)}}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "a", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, Affinity: v1.ServiceAffinityClientIP, StickySeconds: int(v1.DefaultClientIPServiceAffinitySeconds)},
			},
		},
		{
			name: "ClientIP affinity with a timeout above one day defaults it", family: v1.IPv4Protocol,
			svc: svc("ns", "a", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](86401)}}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "a", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, Affinity: v1.ServiceAffinityClientIP, StickySeconds: int(v1.DefaultClientIPServiceAffinitySeconds)},
			},
		},
		{
			name: "ClientIP affinity of exactly one day is kept", family: v1.IPv4Protocol,
			svc: svc("ns", "a", func(s *v1.Service) {
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](86400)}}
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "a", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, Affinity: v1.ServiceAffinityClientIP, StickySeconds: 86400},
			},
		},
		{
			name: "Local load balancer without a health check node port gets none", family: v1.IPv4Protocol,
			svc: svc("ns", "lb", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = "10.0.0.1"
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 30000)}
			}),
			want: map[ServicePortName]info{
				spn("ns", "lb", "p", v1.ProtocolTCP): {ClusterIP: "10.0.0.1", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 30000, ExtLocal: true},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sct := NewServiceChangeTracker(tc.family, nil, nil)
			m := sct.serviceToServiceMap(tc.svc)
			got := map[ServicePortName]info{}
			for k, v := range m {
				got[k] = viewOf(v)
			}
			want := tc.want
			if want == nil {
				want = map[ServicePortName]info{}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("unexpected service map (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExternalIPsGate(t *testing.T) {
	s := svc("ns", "e", func(s *v1.Service) {
		s.Spec.ClusterIP = "10.0.0.1"
		s.Spec.ExternalIPs = []string{"1.2.3.4"}
		s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
	})
	m := NewServiceChangeTracker(v1.IPv4Protocol, nil, nil).serviceToServiceMap(s)
	sp := m[spn("ns", "e", "p", v1.ProtocolTCP)]
	if len(sp.ExternalIPs()) != 1 || !sp.ExternallyAccessible() {
		t.Fatalf("want one external IP with the gate on, got %v", sp.ExternalIPs())
	}
	featuregatetesting.SetFeatureGateDuringTest(t, features.DefaultFeatureGate, features.AllowServiceExternalIPs, false)
	if got := sp.ExternalIPs(); got == nil || len(got) != 0 {
		t.Errorf("want an empty non-nil slice with the gate off, got %#v", got)
	}
}

func TestBaseServicePortInfoPolicies(t *testing.T) {
	tests := []struct {
		name                     string
		info                     BaseServicePortInfo
		external, cluster, local bool
	}{
		{"plain cluster IP", BaseServicePortInfo{}, false, true, false},
		{"iTP Local internal only", BaseServicePortInfo{internalPolicyLocal: true}, false, false, true},
		{"iTP Local with node port", BaseServicePortInfo{internalPolicyLocal: true, nodePort: 1}, true, true, true},
		{"eTP Local with LB VIP", BaseServicePortInfo{externalPolicyLocal: true, loadBalancerVIPs: ips("1.1.1.1")}, true, true, true},
		{"eTP Local with external IP", BaseServicePortInfo{externalPolicyLocal: true, externalIPs: ips("1.1.1.1")}, true, true, true},
		{"eTP Local not accessible", BaseServicePortInfo{externalPolicyLocal: true}, false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.info.ExternallyAccessible(); got != tc.external {
				t.Errorf("ExternallyAccessible = %v, want %v", got, tc.external)
			}
			if got := tc.info.UsesClusterEndpoints(); got != tc.cluster {
				t.Errorf("UsesClusterEndpoints = %v, want %v", got, tc.cluster)
			}
			if got := tc.info.UsesLocalEndpoints(); got != tc.local {
				t.Errorf("UsesLocalEndpoints = %v, want %v", got, tc.local)
			}
		})
	}
}

func TestServicePortNameString(t *testing.T) {
	tests := []struct {
		in   ServicePortName
		want string
	}{
		{spn("ns1", "svc1", "p80", v1.ProtocolTCP), "ns1/svc1:p80"},
		{spn("ns1", "svc1", "", v1.ProtocolUDP), "ns1/svc1"},
		{ServicePortName{}, "/"},
	}
	for _, tc := range tests {
		if got := tc.in.String(); got != tc.want {
			t.Errorf("%#v.String() = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// mapView flattens a ServicePortMap for comparison.
func mapView(m ServicePortMap) map[ServicePortName]info {
	out := map[ServicePortName]info{}
	for k, v := range m {
		out[k] = viewOf(v)
	}
	return out
}

func TestServiceMapAddUpdateRemove(t *testing.T) {
	clusterIP := svc("ns2", "cluster-ip", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Spec.ClusterIP = "172.16.55.4"
		s.Spec.Ports = []v1.ServicePort{port("port1", v1.ProtocolUDP, 1234, 0), port("port2", v1.ProtocolUDP, 1235, 0)}
	})
	nodePort := svc("ns2", "node-port", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ClusterIP = "172.16.55.10"
		s.Spec.Ports = []v1.ServicePort{port("port1", v1.ProtocolUDP, 345, 678), port("port2", v1.ProtocolTCP, 344, 677)}
	})
	lb := svc("ns1", "load-balancer", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIP = "172.16.55.11"
		s.Spec.Ports = []v1.ServicePort{port("foobar", v1.ProtocolUDP, 8675, 30061), port("baz", v1.ProtocolUDP, 8676, 30062)}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.4"}}
	})
	localLB := svc("ns1", "only-local-load-balancer", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIP = "172.16.55.12"
		s.Spec.Ports = []v1.ServicePort{port("foobar2", v1.ProtocolUDP, 8677, 30063), port("baz", v1.ProtocolUDP, 8678, 30064)}
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.3"}}
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 345
	})

	var processed []int // sizes of (previous, current) seen by the callback
	sct := NewServiceChangeTracker(v1.IPv4Protocol, nil, func(previous, current ServicePortMap) {
		processed = append(processed, len(previous), len(current))
	})
	sm := ServicePortMap{}

	for _, s := range []*v1.Service{clusterIP, nodePort, lb, localLB} {
		if !sct.Update(nil, s) {
			t.Fatalf("adding %s reported no pending change", s.Name)
		}
	}
	result := sm.Update(sct)
	if len(sm) != 8 {
		t.Errorf("want 8 service ports, got %d: %v", len(sm), mapView(sm))
	}
	wantUpdated := sets.New(
		types.NamespacedName{Namespace: "ns2", Name: "cluster-ip"}, types.NamespacedName{Namespace: "ns2", Name: "node-port"},
		types.NamespacedName{Namespace: "ns1", Name: "load-balancer"}, types.NamespacedName{Namespace: "ns1", Name: "only-local-load-balancer"})
	if !result.UpdatedServices.Equal(wantUpdated) {
		t.Errorf("UpdatedServices = %v, want %v", result.UpdatedServices.UnsortedList(), wantUpdated.UnsortedList())
	}
	if got, want := sm.HealthCheckNodePorts(), map[types.NamespacedName]uint16{{Namespace: "ns1", Name: "only-local-load-balancer"}: 345}; !reflect.DeepEqual(got, want) {
		t.Errorf("HealthCheckNodePorts = %v, want %v", got, want)
	}
	if len(processed) != 8 {
		t.Errorf("processServiceMapChange called %d times, want 4", len(processed)/2)
	}

	// Drop a port from one service (renaming the other), delete the rest.
	shrunk := clusterIP.DeepCopy()
	shrunk.Spec.Ports = []v1.ServicePort{port("p2", v1.ProtocolUDP, 1235, 0)}
	sct.Update(clusterIP, shrunk)
	sct.Update(nodePort, nil)
	sct.Update(lb, nil)
	sct.Update(localLB, nil)
	result = sm.Update(sct)
	want := map[ServicePortName]info{spn("ns2", "cluster-ip", "p2", v1.ProtocolUDP): {ClusterIP: "172.16.55.4", Port: 1235, Protocol: v1.ProtocolUDP}}
	if diff := cmp.Diff(want, mapView(sm)); diff != "" {
		t.Errorf("after removals (-want +got):\n%s", diff)
	}
	if result.UpdatedServices.Len() != 4 {
		t.Errorf("want 4 updated services, got %v", result.UpdatedServices.UnsortedList())
	}
	if len(sm.HealthCheckNodePorts()) != 0 {
		t.Errorf("want no health check ports, got %v", sm.HealthCheckNodePorts())
	}

	// Nothing pending: Update is a no-op.
	result = sm.Update(sct)
	if result.UpdatedServices.Len() != 0 || len(sm) != 1 {
		t.Errorf("empty Update changed something: %v %v", result.UpdatedServices.UnsortedList(), mapView(sm))
	}
}

func TestServiceUpdateSequences(t *testing.T) {
	base := svc("ns", "s", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeClusterIP
		s.Spec.ClusterIP = "172.16.55.4"
		s.Spec.Ports = []v1.ServicePort{port("something", v1.ProtocolUDP, 1234, 0), port("somethingelse", v1.ProtocolUDP, 1235, 0)}
	})
	asLB := base.DeepCopy()
	asLB.Spec.Type = v1.ServiceTypeLoadBalancer
	asLB.Spec.Ports[0].NodePort, asLB.Spec.Ports[1].NodePort = 30001, 30002
	asLB.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "10.1.2.3"}}
	asLocalLB := asLB.DeepCopy()
	asLocalLB.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	asLocalLB.Spec.HealthCheckNodePort = 345
	headless := base.DeepCopy()
	headless.Spec.ClusterIP = v1.ClusterIPNone
	externalName := base.DeepCopy()
	externalName.Spec.Type = v1.ServiceTypeExternalName
	externalName.Spec.ExternalName = "foo.example.com"

	type step struct {
		prev, cur   *v1.Service
		wantPending bool
	}
	tests := []struct {
		name        string
		steps       []step
		wantPorts   int
		wantUpdated int
		wantHC      int
	}{
		{name: "add then delete before sync leaves nothing pending", steps: []step{{nil, base, true}, {base, nil, false}}, wantPorts: 0, wantUpdated: 0},
		{name: "no-op update", steps: []step{{base, base, false}}},
		{name: "headless add is ignored", steps: []step{{nil, headless, false}}},
		{name: "ExternalName add is ignored", steps: []step{{nil, externalName, false}}},
		{name: "add, change to LB, change to local LB", steps: []step{{nil, base, true}, {base, asLB, true}, {asLB, asLocalLB, true}}, wantPorts: 2, wantUpdated: 1, wantHC: 1},
		{name: "change back and forth cancels out", steps: []step{{nil, base, true}, {base, asLB, true}, {asLB, base, true}}, wantPorts: 2, wantUpdated: 1},
		{name: "becoming headless removes it", steps: []step{{nil, base, true}, {base, headless, false}}},
		{name: "becoming ExternalName removes it", steps: []step{{nil, base, true}, {base, externalName, false}}},
		{name: "nil, nil", steps: []step{{nil, nil, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sct := NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
			for i, s := range tc.steps {
				if got := sct.Update(s.prev, s.cur); got != s.wantPending {
					t.Errorf("step %d: Update returned %v, want %v", i, got, s.wantPending)
				}
			}
			sm := ServicePortMap{}
			res := sm.Update(sct)
			if len(sm) != tc.wantPorts || res.UpdatedServices.Len() != tc.wantUpdated || len(sm.HealthCheckNodePorts()) != tc.wantHC {
				t.Errorf("got %d ports, %d updated, %d health checks; want %d, %d, %d",
					len(sm), res.UpdatedServices.Len(), len(sm.HealthCheckNodePorts()), tc.wantPorts, tc.wantUpdated, tc.wantHC)
			}
		})
	}
}

// wrappedPort checks that makeServiceInfo results are what the map stores.
type wrappedPort struct {
	ServicePort
	extra string
}

func TestServiceMakeServiceInfoCallback(t *testing.T) {
	sct := NewServiceChangeTracker(v1.IPv4Protocol, func(p *v1.ServicePort, s *v1.Service, base *BaseServicePortInfo) ServicePort {
		return &wrappedPort{ServicePort: base, extra: s.Name + "/" + p.Name}
	}, nil)
	sct.Update(nil, svc("ns", "s", func(s *v1.Service) {
		s.Spec.ClusterIP = "10.0.0.1"
		s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, 80, 0)}
	}))
	sm := ServicePortMap{}
	sm.Update(sct)
	w, ok := sm[spn("ns", "s", "p", v1.ProtocolTCP)].(*wrappedPort)
	if !ok || w.extra != "s/p" || w.Port() != 80 {
		t.Errorf("got %#v, want the wrapped port", sm[spn("ns", "s", "p", v1.ProtocolTCP)])
	}
}

func TestServiceMakeServiceInfoDeclines(t *testing.T) {
	// A proxier's callback may return nil for ports it cannot handle; the
	// map must then simply lack them, so that consumers never meet nil.
	sct := NewServiceChangeTracker(v1.IPv4Protocol, func(p *v1.ServicePort, _ *v1.Service, base *BaseServicePortInfo) ServicePort {
		if p.Protocol == v1.ProtocolSCTP {
			return nil
		}
		return base
	}, nil)
	s := svc("ns", "s", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ClusterIP = "10.0.0.1"
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = 31000
		s.Spec.Ports = []v1.ServicePort{port("tcp", v1.ProtocolTCP, 80, 30080), port("sctp", v1.ProtocolSCTP, 81, 30081)}
	})
	sct.Update(nil, s)
	sm := ServicePortMap{}
	sm.Update(sct)
	if _, ok := sm[spn("ns", "s", "tcp", v1.ProtocolTCP)]; !ok || len(sm) != 1 {
		t.Fatalf("want only the TCP port, got %v", mapView(sm))
	}
	if got := sm.HealthCheckNodePorts(); got[types.NamespacedName{Namespace: "ns", Name: "s"}] != 31000 {
		t.Errorf("HealthCheckNodePorts = %v", got)
	}
	// Entries a third party put in the map itself are tolerated too.
	sm[spn("ns", "other", "p", v1.ProtocolTCP)] = nil
	if got := sm.HealthCheckNodePorts(); len(got) != 1 {
		t.Errorf("HealthCheckNodePorts with a nil entry = %v", got)
	}
	delete(sm, spn("ns", "other", "p", v1.ProtocolTCP))
	sct.Update(s, nil)
	sm.Update(sct)
	if _, ok := sm[spn("ns", "s", "tcp", v1.ProtocolTCP)]; ok {
		t.Errorf("port left after delete: %v", mapView(sm))
	}
}

func TestServiceTrackerConcurrent(t *testing.T) {
	sct := NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	sm := ServicePortMap{}
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				s := svc("ns", "s"+string(rune('a'+w)), func(s *v1.Service) {
					s.Spec.ClusterIP = "10.0.0." + string(rune('1'+w))
					s.Spec.Ports = []v1.ServicePort{port("p", v1.ProtocolTCP, int32(1000+i), 0)}
				})
				sct.Update(nil, s)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			sm.Update(sct)
		}
	}()
	wg.Wait()
	<-done
	sm.Update(sct)
	if len(sm) != 4 {
		t.Errorf("want 4 service ports after concurrent updates, got %d", len(sm))
	}
	for k, v := range sm {
		if v.Port() != 1049 {
			t.Errorf("%s: want the last port 1049, got %d", k, v.Port())
		}
	}
}
