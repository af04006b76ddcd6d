package localnodev1

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func addrs(s ...string) []netip.Addr {
	out := make([]netip.Addr, len(s))
	for i, a := range s {
		out[i] = netip.MustParseAddr(a)
	}
	return out
}

func sampleServices() map[localnode.Family]localnode.Service {
	return map[localnode.Family]localnode.Service{
		localnode.IPv4: {
			ServicePort: localnode.ServicePort{
				Name:             localnode.PortName{Namespace: "ns", Name: "web", Port: "http", Protocol: localnode.TCP},
				ClusterIP:        netip.MustParseAddr("10.0.0.1"),
				Port:             80,
				NodePort:         30080,
				ExternalIPs:      addrs("192.0.2.1", "192.0.2.2"),
				LoadBalancerVIPs: addrs("198.51.100.1"),
				SourceRanges:     []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
				SessionAffinity:  localnode.AffinityClientIP,
				AffinityTimeout:  3 * time.Hour,
				InternalPolicy:   localnode.PolicyLocal,
				ExternalPolicy:   localnode.PolicyLocal,

				HealthCheckNodePort: 32000,
			},
			Endpoints: []localnode.Endpoint{
				{IP: netip.MustParseAddr("10.1.0.1"), Port: 8080, Ready: true, Serving: true, NodeName: "n1", Zone: "z1", Local: true, ForCluster: true, ForLocal: true},
				{IP: netip.MustParseAddr("10.1.0.2"), Port: 8080, Serving: true, Terminating: true, NodeName: "n2", Zone: "z2"},
			},
			HasAnyEndpoints: true,
		},
		localnode.IPv6: {
			ServicePort: localnode.ServicePort{
				Name:            localnode.PortName{Namespace: "ns", Name: "dns", Protocol: localnode.UDP},
				ClusterIP:       netip.MustParseAddr("fd00::a"),
				Port:            53,
				SessionAffinity: localnode.AffinityNone,
				InternalPolicy:  localnode.PolicyCluster,
				ExternalPolicy:  localnode.PolicyCluster,
			},
		},
	}
}

func TestServiceRoundTrip(t *testing.T) {
	for f, svc := range sampleServices() {
		t.Run(string(f), func(t *testing.T) {
			msg := ServiceFromLocal(f, &svc)
			// Through the wire, as a client would read it.
			b, err := proto.Marshal(msg)
			if err != nil {
				t.Fatal(err)
			}
			var back Service
			if err := proto.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			gf, got, err := ServiceToLocal(&back)
			if err != nil {
				t.Fatal(err)
			}
			if gf != f || !got.Equal(&svc) {
				t.Errorf("round trip: got %s %+v, want %s %+v", gf, got, f, svc)
			}
		})
	}
}

func TestStateRoundTrip(t *testing.T) {
	svc := sampleServices()[localnode.IPv4]
	other := svc
	other.Name.Name = "api"
	in := &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{other, svc}}
	in.Normalize()
	out, err := StateToLocal(localnode.IPv4, StateFromLocal(in))
	if err != nil {
		t.Fatal(err)
	}
	if !out.Equal(in) || out.Digest() != in.Digest() {
		t.Errorf("state round trip differs")
	}
	if _, err := StateToLocal(localnode.IPv6, StateFromLocal(in)); err == nil || !strings.Contains(err.Error(), "family IPv4 in a IPv6 state") {
		t.Errorf("mixed family: err = %v", err)
	}
}

func TestServiceToLocalErrors(t *testing.T) {
	good := func() *Service {
		s := sampleServices()[localnode.IPv4]
		return ServiceFromLocal(localnode.IPv4, &s)
	}
	tests := []struct {
		name   string
		mutate func(*Service)
		want   string
	}{
		{"nil name", func(s *Service) { s.Name = nil }, "name: missing"},
		{"no namespace", func(s *Service) { s.Name.Namespace = "" }, `namespace "" and name "web"`},
		{"family", func(s *Service) { s.Family = 7 }, "family: unknown IP family 7"},
		{"protocol", func(s *Service) { s.Name.Protocol = 0 }, "name.protocol: unknown protocol PROTOCOL_UNSPECIFIED"},
		{"cluster IP garbage", func(s *Service) { s.ClusterIp = "ten" }, `cluster_ip: "ten" is not an IP address`},
		{"cluster IP family", func(s *Service) { s.ClusterIp = "fd00::1" }, `cluster_ip: "fd00::1" is not an IPv4 address`},
		{"mapped", func(s *Service) { s.ClusterIp = "::ffff:10.0.0.1" }, `cluster_ip: "::ffff:10.0.0.1" is not an IPv4`},
		{"port 0", func(s *Service) { s.Port = 0 }, "port: missing (0)"},
		{"port big", func(s *Service) { s.Port = 70000 }, "port: 70000 is not a port number"},
		{"node port big", func(s *Service) { s.NodePort = 65536 }, "node_port: 65536"},
		{"hc port big", func(s *Service) { s.HealthCheckNodePort = 1 << 20 }, "health_check_node_port"},
		{"external IP", func(s *Service) { s.ExternalIps = []string{"192.0.2.1", "x"} }, `external_ips: [1]: "x"`},
		{"vip", func(s *Service) { s.LoadBalancerVips = []string{"fd00::1"} }, `load_balancer_vips: [0]: "fd00::1"`},
		{"range", func(s *Service) { s.SourceRanges = []string{"1.2.3.4"} }, "source_ranges[0]"},
		{"range family", func(s *Service) { s.SourceRanges = []string{"fd00::/8"} }, `source_ranges[0]: "fd00::/8" is not an IPv4 prefix`},
		{"affinity", func(s *Service) { s.SessionAffinity = 9 }, "session_affinity: unknown session affinity 9"},
		{"timeout", func(s *Service) { s.AffinityTimeoutSeconds = 1 << 31 }, "affinity_timeout_seconds: 2147483648 is more than 86400"},
		{"internal policy", func(s *Service) { s.InternalPolicy = 5 }, "internal_policy"},
		{"external policy", func(s *Service) { s.ExternalPolicy = 5 }, "external_policy"},
		{"nil endpoint", func(s *Service) { s.Endpoints[1] = nil }, "endpoints[1]: missing"},
		{"endpoint ip", func(s *Service) { s.Endpoints[0].Ip = "" }, `endpoints[0].ip: "" is not an IP address`},
		{"endpoint port", func(s *Service) { s.Endpoints[1].Port = 0 }, "endpoints[1].port: missing"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mutate(s)
			_, _, err := ServiceToLocal(s)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
	if _, _, err := ServiceToLocal(nil); err == nil {
		t.Error("nil service: no error")
	}
}

func TestGlobalRoundTrip(t *testing.T) {
	mode := v1.LoadBalancerIPModeProxy
	services := []*v1.Service{
		st.Service("ns", "plain", []string{"10.0.0.1"}),
		st.Service("ns", "dual", []string{"10.0.0.2", "fd00::2"}, st.InternalLocal(), st.ClientIPAffinity(60), st.ExternalIPs("192.0.2.9")),
		st.Service("ns", "lb", []string{"10.0.0.3"}, st.LoadBalancer(30001, "198.51.100.1", "198.51.100.2"), st.ExternalLocal(32001),
			func(s *v1.Service) {
				s.Spec.LoadBalancerSourceRanges = []string{"203.0.113.0/24"}
				s.Status.LoadBalancer.Ingress[1].IPMode = &mode
				s.Labels = map[string]string{"app": "lb"}
			}),
	}
	for _, svc := range services {
		got, err := GlobalServiceToAPI(GlobalServiceFromAPI(svc))
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, svc) {
			t.Errorf("service %s: (-want +got)\n%s", svc.Name, cmp.Diff(svc, got))
		}
	}
	slices := []*discovery.EndpointSlice{
		st.EndpointSlice("ns", "web", "web-1", "http", 80,
			st.Endpoint("10.1.0.1", "n1", st.Zone("z1", true)),
			st.Endpoint("10.1.0.2", "", st.Terminating(true)),
			st.Endpoint("10.1.0.3", "n2", st.NotReady(), func(e *discovery.Endpoint) {
				e.Conditions.Serving = nil
				e.Hints = &discovery.EndpointHints{ForNodes: []discovery.ForNode{{Name: "n2"}}}
			})),
		st.EndpointSlice("ns", "dns", "dns-1", "", 53, st.Endpoint("fd00::53", "n1")),
	}
	slices[1].Ports[0].Protocol = ptr.To(v1.ProtocolUDP)
	slices[1].Ports[0].Name = nil
	for _, s := range slices {
		got, err := EndpointSliceToAPI(EndpointSliceFromAPI(s))
		if err != nil {
			t.Fatal(err)
		}
		if !equality.Semantic.DeepEqual(got, s) {
			t.Errorf("slice %s: (-want +got)\n%s", s.Name, cmp.Diff(s, got))
		}
	}
	node := st.Node("n1", "z1")
	node.Spec.Taints = []v1.Taint{{Key: "ToBeDeletedByClusterAutoscaler", Effect: v1.TaintEffectNoSchedule}}
	// What the NodeManager and --detect-local-mode NodeCIDR read.
	node.Status.Addresses = []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "192.168.0.2"}, {Type: v1.NodeInternalIP, Address: "fd00::2"}, {Type: v1.NodeHostName, Address: "n1"}}
	node.Spec.PodCIDR, node.Spec.PodCIDRs = "10.244.1.0/24", []string{"10.244.1.0/24", "fd00:244:1::/64"}
	gotNode, err := NodeToAPI(NodeFromAPI(node))
	if err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(gotNode, node) {
		t.Errorf("node: (-want +got)\n%s", cmp.Diff(node, gotNode))
	}
}

func TestGlobalToAPIErrors(t *testing.T) {
	tests := []struct {
		name string
		run  func() error
		want string
	}{
		{"service nil", func() error { _, err := GlobalServiceToAPI(nil); return err }, "global service: missing"},
		{"service no name", func() error { _, err := GlobalServiceToAPI(&GlobalService{Namespace: "ns"}); return err }, `name "" must both be set`},
		{"service type", func() error {
			_, err := GlobalServiceToAPI(&GlobalService{Namespace: "ns", Name: "x", Type: "Weird"})
			return err
		}, `global service ns/x: type: unknown service type "Weird"`},
		{"service port", func() error {
			_, err := GlobalServiceToAPI(&GlobalService{Namespace: "ns", Name: "x", Ports: []*GlobalServicePort{{Protocol: Protocol_TCP, Port: 1 << 17}}})
			return err
		}, "ports[0].port: 131072 is not a port number"},
		{"service family", func() error {
			_, err := GlobalServiceToAPI(&GlobalService{Namespace: "ns", Name: "x", IpFamilies: []Family{3}})
			return err
		}, "ip_families[0]: unknown IP family 3"},
		{"slice address type", func() error {
			_, err := EndpointSliceToAPI(&EndpointSlice{Namespace: "ns", Name: "s"})
			return err
		}, "endpoint slice ns/s: address_type: unknown IP family FAMILY_UNSPECIFIED"},
		{"slice condition", func() error {
			_, err := EndpointSliceToAPI(&EndpointSlice{Namespace: "ns", Name: "s", AddressType: Family_IPV4, Endpoints: []*GlobalEndpoint{{}, {Ready: 4}}})
			return err
		}, "endpoints[1].ready: unknown condition 4"},
		{"slice port", func() error {
			_, err := EndpointSliceToAPI(&EndpointSlice{Namespace: "ns", Name: "s", AddressType: Family_IPV4, Ports: []*EndpointPort{{Protocol: Protocol_UDP, HasPort: true, Port: 65536}}})
			return err
		}, "ports[0].port: 65536"},
		{"node name", func() error { _, err := NodeToAPI(&Node{}); return err }, "node: name: missing"},
		{"node address", func() error {
			_, err := NodeToAPI(&Node{Name: "n1", Addresses: []*NodeAddress{{Type: "Hostname", Address: "n1"}, {Type: "InternalIP", Address: "n1"}}})
			return err
		}, `node n1: addresses[1]: InternalIP "n1" is not an IP address`},
		{"node pod CIDR", func() error { _, err := NodeToAPI(&Node{Name: "n1", PodCidrs: []string{"10.244.1.0"}}); return err }, `node n1: pod_cidrs[0]: "10.244.1.0" is not a CIDR`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.run(); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// FuzzDecoders feeds arbitrary bytes to every decoder: none may panic, and whatever one
// accepts must survive another encode/decode unchanged.
func FuzzDecoders(f *testing.F) {
	for fam, svc := range sampleServices() {
		b, _ := proto.Marshal(ServiceFromLocal(fam, &svc))
		f.Add(b)
	}
	b, _ := proto.Marshal(GlobalServiceFromAPI(st.Service("ns", "x", []string{"10.0.0.1"}, st.LoadBalancer(30000, "192.0.2.1"))))
	f.Add(b)
	b, _ = proto.Marshal(EndpointSliceFromAPI(st.EndpointSlice("ns", "x", "x-1", "http", 80, st.Endpoint("10.1.0.1", "n1", st.Zone("z", true)))))
	f.Add(b)
	f.Add([]byte{0x0a, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, data []byte) {
		var svc Service
		if proto.Unmarshal(data, &svc) == nil {
			if fam, got, err := ServiceToLocal(&svc); err == nil {
				fam2, again, err := ServiceToLocal(ServiceFromLocal(fam, &got))
				if err != nil || fam2 != fam || !again.Equal(&got) {
					t.Fatalf("accepted service does not round-trip: %v", err)
				}
			}
		}
		var gs GlobalService
		if proto.Unmarshal(data, &gs) == nil {
			if s, err := GlobalServiceToAPI(&gs); err == nil {
				again, err := GlobalServiceToAPI(GlobalServiceFromAPI(s))
				if err != nil || !equality.Semantic.DeepEqual(again, s) {
					t.Fatalf("accepted global service does not round-trip: %v", err)
				}
			}
		}
		var es EndpointSlice
		if proto.Unmarshal(data, &es) == nil {
			if s, err := EndpointSliceToAPI(&es); err == nil {
				again, err := EndpointSliceToAPI(EndpointSliceFromAPI(s))
				if err != nil || !equality.Semantic.DeepEqual(again, s) {
					t.Fatalf("accepted slice does not round-trip: %v", err)
				}
			}
		}
		var ev WatchEvent
		_ = proto.Unmarshal(data, &ev)
		var n Node
		if proto.Unmarshal(data, &n) == nil {
			_, _ = NodeToAPI(&n)
		}
	})
}
