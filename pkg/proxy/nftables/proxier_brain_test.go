//go:build linux

package nftables

import (
	"net"
	"sync"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	fakeconntrack "k8s.io/net-utils/conntrack/testing"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// recordingHealthServer remembers what the proxier last told the
// per-service health check server.
type recordingHealthServer struct {
	mu            sync.Mutex
	services      map[types.NamespacedName]uint16
	endpoints     map[types.NamespacedName]int
	endpointCalls int
}

func (r *recordingHealthServer) SyncServices(s map[types.NamespacedName]uint16) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services = s
	return nil
}

func (r *recordingHealthServer) SyncEndpoints(e map[types.NamespacedName]int) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.endpoints = e
	r.endpointCalls++
	return nil
}

// TestProxierBrainFeatures covers behaviour decided by the brain and carried
// out by this backend: LoadBalancer ipMode, topology hints, health check
// node ports, stale UDP conntrack entries and the no-local-endpoints metric.
func TestProxierBrainFeatures(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			family := []v1.IPFamily{tf.family}
			ct := fakeconntrack.NewFake()
			hs := &recordingHealthServer{}
			p, fake := newTestProxierWith(t, tf, nil, nil, ct, hs)

			svcs := []*v1.Service{
				// Two LoadBalancer ingress IPs: a VIP, which the node
				// captures, and a Proxy-mode one, whose traffic must reach
				// the load balancer untouched.
				st.NewService("ns1", "lb", func(s *v1.Service) {
					s.Spec.Type = v1.ServiceTypeLoadBalancer
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.51"), []string{ip("172.30.0.51")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 3051}}
					s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{
						{IP: ip("1.2.3.5"), IPMode: ptr.To(v1.LoadBalancerIPModeVIP)},
						{IP: ip("1.2.3.6"), IPMode: ptr.To(v1.LoadBalancerIPModeProxy)},
					}
				}),
				// Zone hints on every endpoint: this node (zone-a) uses only
				// the zone-a endpoint once it knows its zone.
				st.NewService("ns2", "topo", func(s *v1.Service) {
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.52"), []string{ip("172.30.0.52")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
				}),
				// eTP=Local with a health check node port and no local
				// endpoint.
				st.NewService("ns3", "local", func(s *v1.Service) {
					s.Spec.Type = v1.ServiceTypeLoadBalancer
					s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
					s.Spec.HealthCheckNodePort = 30253
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.53"), []string{ip("172.30.0.53")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 3053}}
					s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip("1.2.3.7")}}
				}),
				st.NewService("ns4", "dns", func(s *v1.Service) {
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.54"), []string{ip("172.30.0.54")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP}}
				}),
			}
			zoned := func(addr, node, zone string) discovery.Endpoint {
				e := st.EndpointWith(addr, node, true, true, false)
				e.Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: zone}}}
				return e
			}
			dnsSlice := func(addrs ...string) *discovery.EndpointSlice {
				return st.NewSlice("ns4", "dns", "dns-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{{Name: ptr.To("dns"), Port: ptr.To[int32](5353), Protocol: ptr.To(v1.ProtocolUDP)}}
					for _, a := range addrs {
						es.Endpoints = append(es.Endpoints, st.EndpointWith(ip(a), "node2", true, true, false))
					}
				})
			}
			slices := []*discovery.EndpointSlice{
				st.NewSlice("ns1", "lb", "lb-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.0.51"), "node2", true, true, false)}
				}),
				st.NewSlice("ns2", "topo", "topo-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{
						zoned(ip("10.180.0.52"), "node2", "zone-a"),
						zoned(ip("10.180.1.52"), "node3", "zone-b"),
					}
				}),
				st.NewSlice("ns3", "local", "local-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.0.53"), "node2", true, true, false)}
				}),
				dnsSlice("10.180.0.54", "10.180.1.54"),
			}
			startProxier(p, svcs, slices)

			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "LB VIP-mode ingress is captured", src: "external", dst: "1.2.3.5", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.51:80"}, masq: true},
				{name: "LB Proxy-mode ingress is left to the load balancer", src: "external", dst: "1.2.3.6", port: 80, verdict: "ACCEPT"},
				{name: "pod to Proxy-mode ingress is not short-circuited", src: "10.1.2.3", dst: "1.2.3.6", port: 80, verdict: "ACCEPT"},
				{name: "without a zone label hints are ignored", src: "10.1.2.3", dst: "172.30.0.52", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.52:80", "10.180.1.52:80"}},
				{name: "eTP=Local without local endpoints drops external LB traffic", src: "external", dst: "1.2.3.7", port: 80, verdict: "DROP"},
			})

			p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "in zone-a only the zone-a endpoint is used", src: "10.1.2.3", dst: "172.30.0.52", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.52:80"}},
			})

			hs.mu.Lock()
			gotHC := hs.services[types.NamespacedName{Namespace: "ns3", Name: "local"}]
			gotEps, hasEps := hs.endpoints[types.NamespacedName{Namespace: "ns3", Name: "local"}]
			hs.mu.Unlock()
			if gotHC != 30253 {
				t.Errorf("health check node port of ns3/local: got %d, want 30253", gotHC)
			}
			if hasEps && gotEps != 0 {
				t.Errorf("ns3/local has no local endpoints, health server was told %d", gotEps)
			}
			if v, err := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("external", string(tf.family))); err != nil || v != 1 {
				t.Errorf("sync_proxy_rules_no_local_endpoints_total{external}: got %v (%v), want 1", v, err)
			}

			// Removing a UDP endpoint clears flows still pinned to it and
			// leaves flows to the remaining endpoint alone.
			afInet := uint8(unix.AF_INET)
			if tf.family == v1.IPv6Protocol {
				afInet = unix.AF_INET6
			}
			flow := func(client, epAddr string) *netlink.ConntrackFlow {
				return &netlink.ConntrackFlow{
					FamilyType: afInet,
					Forward:    netlink.IPTuple{SrcIP: net.ParseIP(ip(client)), DstIP: net.ParseIP(ip("172.30.0.54")), Protocol: unix.IPPROTO_UDP, SrcPort: 40000, DstPort: 53},
					Reverse:    netlink.IPTuple{SrcIP: net.ParseIP(ip(epAddr)), DstIP: net.ParseIP(ip(client)), Protocol: unix.IPPROTO_UDP, SrcPort: 5353, DstPort: 40000},
				}
			}
			hs.mu.Lock()
			callsBefore := hs.endpointCalls
			hs.mu.Unlock()
			stale, kept := flow("10.1.2.3", "10.180.1.54"), flow("10.1.2.4", "10.180.0.54")
			ct.AddEntries(stale, kept)
			p.OnEndpointSliceUpdate(slices[3], dnsSlice("10.180.0.54"))
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			deleted := ct.Deleted()
			if len(deleted) != 1 || !deleted[0].Reverse.SrcIP.Equal(net.ParseIP(ip("10.180.1.54"))) {
				t.Errorf("conntrack: deleted %v, want only the flow to the removed endpoint", deleted)
			}
			// The health server hears about endpoint changes of services
			// with a health check only.
			hs.mu.Lock()
			calls := hs.endpointCalls
			hs.mu.Unlock()
			if calls != callsBefore {
				t.Errorf("an endpoint change of a service without a health check called SyncEndpoints (%d -> %d calls)", callsBefore, calls)
			}
			p.OnEndpointSliceUpdate(slices[2], st.NewSlice("ns3", "local", "local-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
				es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
				es.Endpoints = []discovery.Endpoint{
					st.EndpointWith(ip("10.180.0.53"), "node2", true, true, false),
					st.EndpointWith(ip("10.180.1.53"), testNodeName, true, true, false),
				}
			}))
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			hs.mu.Lock()
			gotEps = hs.endpoints[types.NamespacedName{Namespace: "ns3", Name: "local"}]
			hs.mu.Unlock()
			if gotEps != 1 {
				t.Errorf("ns3/local gained a local endpoint, health server was told %d", gotEps)
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "eTP=Local LB uses the new local endpoint", src: "external", dst: "1.2.3.7", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.1.53:80"}},
				{name: "UDP service uses the remaining endpoint", src: "10.1.2.3", dst: "172.30.0.54", proto: "udp", port: 53, verdict: "ACCEPT", dnat: []string{"10.180.0.54:5353"}},
			})
		})
	}
}

// TestProxierSyncFailureMetric: a failed transaction is counted.
func TestProxierSyncFailureMetric(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	tf := families[0]
	p, fake := newTestProxier(t, tf, nil)
	svc := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "172.30.0.41", []string{"172.30.0.41"}, []v1.IPFamily{v1.IPv4Protocol}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
	})
	startProxier(p, []*v1.Service{svc}, nil)
	counter := metrics.NFTablesSyncFailuresTotal.WithLabelValues(string(tf.family))
	before, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceDelete(svc)
	fake.failNext.Store(true)
	if err := p.SyncNow(); err == nil {
		t.Fatal("expected the sync to fail")
	}
	after, err := testutil.GetCounterMetricValue(counter)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Errorf("nftables sync failures: %v -> %v, want one more", before, after)
	}
}
