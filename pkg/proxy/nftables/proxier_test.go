//go:build linux

package nftables

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/features"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

const testNodeName = "node1"

func newTestProxier(t *testing.T, tf testFamily, mutate func(*kubeproxyconfig.KubeProxyConfiguration)) (*Proxier, *countingNFT) {
	t.Helper()
	return newTestProxierOver(t, tf, mutate, nil)
}

// newTestProxierOver is newTestProxier with the fake seen through wrap.
func newTestProxierOver(t *testing.T, tf testFamily, mutate func(*kubeproxyconfig.KubeProxyConfiguration), wrap func(*countingNFT) knftables.Interface) (*Proxier, *countingNFT) {
	t.Helper()
	return newTestProxierWith(t, tf, mutate, wrap, conntrack.NewFake(), healthcheck.NewFakeServiceHealthServer())
}

// newTestProxierWith is newTestProxierOver with the conntrack client and the
// service health server given.
func newTestProxierWith(t *testing.T, tf testFamily, mutate func(*kubeproxyconfig.KubeProxyConfiguration), wrap func(*countingNFT) knftables.Interface,
	ct conntrack.Interface, hs healthcheck.ServiceHealthServer) (*Proxier, *countingNFT) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.NFTables.MasqueradeBit = ptr.To[int32](14)
	cfg.SyncPeriod.Duration = 30 * time.Second
	cfg.MinSyncPeriod.Duration = time.Second
	bits := "32"
	if tf.family == v1.IPv6Protocol {
		bits = "128"
	}
	cfg.NodePortAddresses = []string{tf.nodeIP + "/" + bits}
	if mutate != nil {
		mutate(cfg)
	}
	fake := &countingNFT{Fake: knftables.NewFake(familyOf(tf.family), kubeProxyTable)}
	nw := proxyutiltest.NewFakeNetwork()
	nw.AddInterfaceAddr(&net.Interface{Name: "eth0"}, []net.Addr{&net.IPNet{IP: net.ParseIP(tf.nodeIP), Mask: net.CIDRMask(24, 8*len(net.ParseIP(tf.nodeIP)))}})
	var nft knftables.Interface = fake
	if wrap != nil {
		nft = wrap(fake)
	}
	p, err := NewProxierWithOptions(ctx, cfg, tf.family, proxyutil.NewDetectLocalByCIDR(tf.podCIDR), testNodeName,
		net.ParseIP(tf.nodeIP), nil, nil, false,
		WithNFTables(nft), proxieropts.WithNetworkInterfacer(nw), proxieropts.WithConntrack(ct), proxieropts.WithServiceHealthServer(hs))
	if err != nil {
		t.Fatal(err)
	}
	p.OnServiceCIDRsChanged([]string{"172.30.0.0/16", "fd00:172:30::/96"})
	t.Cleanup(func() {
		if p.localhostNodePortProxy != nil {
			p.localhostNodePortProxy.Shutdown()
		}
	})
	return p, fake
}

// startProxier feeds objects and performs the initial sync.
func startProxier(p *Proxier, svcs []*v1.Service, slices []*discovery.EndpointSlice) {
	for _, s := range svcs {
		p.OnServiceAdd(s)
	}
	for _, es := range slices {
		p.OnEndpointSliceAdd(es)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
}

func TestProxierBehaviour(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			p, fake := newTestProxier(t, tf, nil)
			family := []v1.IPFamily{tf.family}
			svcs := []*v1.Service{
				st.NewService("ns1", "web", func(s *v1.Service) {
					s.Spec.Type = v1.ServiceTypeLoadBalancer
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 3001, TargetPort: intstr.FromInt32(8080)}}
					s.Spec.ExternalIPs = []string{ip("192.168.99.11")}
					s.Spec.LoadBalancerSourceRanges = []string{ip("203.0.113.0/25")}
					s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: ip("1.2.3.4")}}
				}),
				// eTP=Local whose only local endpoint is terminating: the brain
				// falls back to it.
				st.NewService("ns2", "term", func(s *v1.Service) {
					s.Spec.Type = v1.ServiceTypeNodePort
					s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.42"), []string{ip("172.30.0.42")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: 3002}}
					s.Spec.HealthCheckNodePort = 30200
				}),
				st.NewService("ns3", "empty", func(s *v1.Service) {
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.43"), []string{ip("172.30.0.43")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
				}),
				st.NewService("ns4", "sticky", func(s *v1.Service) {
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.44"), []string{ip("172.30.0.44")}, family
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
					s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
					s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](100)}}
				}),
			}
			slices := []*discovery.EndpointSlice{
				st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{
						st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false),
						st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false),
						st.EndpointWith(ip("10.180.2.1"), "node2", false, false, false), // not ready: unused
					}
				}),
				st.NewSlice("ns2", "term", "term-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{
						st.EndpointWith(ip("10.180.0.2"), testNodeName, false, true, true), // local, terminating, serving
						st.EndpointWith(ip("10.180.1.2"), "node2", true, true, false),
					}
				}),
				st.NewSlice("ns4", "sticky", "sticky-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
					es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.0.4"), "node2", true, true, false), st.EndpointWith(ip("10.180.1.4"), "node2", true, true, false)}
				}),
			}
			startProxier(p, svcs, slices)
			tr := newTracer(t, fake.Fake, tf.nodeIP)
			runFlows(t, tr, tf, []flowCase{
				{name: "clusterIP skips unready endpoint", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.1.1:8080"}},
				{name: "NodePort", src: "external", dst: "node", port: 3001, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.1.1:8080"}, masq: true},
				{name: "externalIP", src: "external", dst: "192.168.99.11", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.1.1:8080"}, masq: true},
				{name: "LB allowed source", src: "203.0.113.9", dst: "1.2.3.4", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.1.1:8080"}, masq: true},
				{name: "LB denied source", src: "203.0.113.200", dst: "1.2.3.4", port: 80, verdict: "DROP"},
				{name: "eTP=Local falls back to the terminating local endpoint", src: "external", dst: "node", port: 3002, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80"}},
				{name: "clusterIP of that service uses the ready remote endpoint", src: "10.1.2.3", dst: "172.30.0.42", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.1.2:80"}},
				{name: "no endpoints rejects", src: "10.1.2.3", dst: "172.30.0.43", port: 80, verdict: "REJECT"},
				{name: "affinity", src: "10.1.2.3", dst: "172.30.0.44", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.4:80", "10.180.1.4:80"}},
				{name: "unallocated clusterIP dropped", src: "10.1.2.3", dst: "172.30.0.200", port: 80, verdict: "DROP"},
			})
			if !strings.Contains(fake.Dump(), "timeout 100s") {
				t.Errorf("affinity set must carry the service's timeout")
			}

			// Endpoint change: partial sync, no listing, only the changed service.
			lists := fake.lists.Load()
			p.OnEndpointSliceUpdate(slices[0], st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
				es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
				es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false)}
			}))
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if fake.lists.Load() != lists {
				t.Errorf("partial sync listed the kernel")
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "after endpoint change", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.1.1:8080"}},
			})

			// No-op sync: no kernel call at all.
			runs := fake.runs.Load()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if fake.runs.Load() != runs || fake.lists.Load() != lists {
				t.Errorf("no-op sync reached the kernel")
			}

			// Service deleted: its elements go, its chains are flushed.
			p.OnServiceDelete(svcs[3])
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "deleted service's IP is now unallocated", src: "10.1.2.3", dst: "172.30.0.44", port: 80, verdict: "DROP"},
			})

			// A ServiceCIDR change is applied by a partial sync.
			p.OnServiceCIDRsChanged([]string{"172.31.0.0/16", "fd00:172:31::/96"})
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if fake.lists.Load() != lists {
				t.Errorf("ServiceCIDR change needed a full sync")
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
				{name: "old range no longer dropped", src: "10.1.2.3", dst: "172.30.0.44", port: 80, verdict: "ACCEPT"},
			})

			// Everything equals what a fresh proxier programs from scratch.
			p2, fake2 := newTestProxier(t, tf, nil)
			p2.OnServiceCIDRsChanged([]string{"172.31.0.0/16", "fd00:172:31::/96"})
			for _, s := range svcs[:3] {
				p2.OnServiceAdd(s)
			}
			p2.OnEndpointSliceAdd(st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
				es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
				es.Endpoints = []discovery.Endpoint{st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false)}
			}))
			p2.OnEndpointSliceAdd(slices[1])
			p2.OnEndpointSliceAdd(slices[2])
			p2.OnServiceSynced()
			p2.OnEndpointSlicesSynced()
			if err := p.syncer.deleteStaleChains(context.Background(), time.Now().Add(time.Hour), time.Second); err != nil {
				t.Fatal(err)
			}
			if got, want := sortedDump(fake.Fake), sortedDump(fake2.Fake); got != want {
				t.Errorf("incremental proxier state differs from a fresh one:\n--- incremental\n%s\n--- fresh\n%s", got, want)
			}
		})
	}
}

func TestProxierFailureForcesFullSync(t *testing.T) {
	tf := families[0]
	p, fake := newTestProxier(t, tf, nil)
	svc := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "172.30.0.41", []string{"172.30.0.41"}, []v1.IPFamily{v1.IPv4Protocol}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
	})
	es := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
		es.Ports = []discovery.EndpointPort{st.SlicePort("http", 80, v1.ProtocolTCP)}
		es.Endpoints = []discovery.Endpoint{st.EndpointWith("10.180.0.1", "node2", true, true, false)}
	})
	startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{es})

	es2 := es.DeepCopy()
	es2.Endpoints[0].Addresses = []string{"10.180.0.9"}
	p.OnEndpointSliceUpdate(es, es2)
	fake.failNext.Store(true)
	if err := p.SyncNow(); err == nil {
		t.Fatal("expected failure")
	}
	if !p.NeedsFullSync() {
		t.Fatal("a failed sync must schedule a full sync")
	}
	lists := fake.lists.Load()
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if fake.lists.Load() == lists {
		t.Error("the repair sync did not re-read the kernel")
	}
	runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
		{name: "repaired", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.9:80"}},
	})
}

func TestLocalhostNodePorts(t *testing.T) {
	if err := features.DefaultMutableFeatureGate.Set("KubeProxyNFTablesLocalhostNodePorts=true"); err != nil {
		t.Skipf("cannot enable the gate: %v", err)
	}
	t.Cleanup(func() { _ = features.DefaultMutableFeatureGate.Set("KubeProxyNFTablesLocalhostNodePorts=false") })
	tf := families[0]
	p, fake := newTestProxier(t, tf, func(c *kubeproxyconfig.KubeProxyConfiguration) {
		c.NodePortAddresses = []string{"192.168.0.2/32", "127.0.0.0/8"}
	})
	if p.localhostNodePortProxy == nil {
		t.Fatal("explicit loopback nodePortAddresses must start the localhost proxy")
	}
	svc := st.NewService("ns1", "dns", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "172.30.0.53", []string{"172.30.0.53"}, []v1.IPFamily{v1.IPv4Protocol}
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Port: 53, Protocol: v1.ProtocolUDP, NodePort: 30053}}
	})
	// A TCP NodePort is served by the userspace proxy on 127.0.0.1.
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = backend.Close() }()
	go func() {
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("hello"))
			_ = c.Close()
		}
	}()
	bport := backend.Addr().(*net.TCPAddr).Port
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	nodePort := probe.Addr().(*net.TCPAddr).Port
	_ = probe.Close()
	web := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "172.30.0.80", []string{"172.30.0.80"}, []v1.IPFamily{v1.IPv4Protocol}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: int32(nodePort)}}
	})
	webEPs := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
		es.Ports = []discovery.EndpointPort{st.SlicePort("http", int32(bport), v1.ProtocolTCP)}
		es.Endpoints = []discovery.Endpoint{st.EndpointWith("127.0.0.1", testNodeName, true, true, false)}
	})
	startProxier(p, []*v1.Service{svc, web}, []*discovery.EndpointSlice{webEPs})
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", itoa(nodePort)), 2*time.Second)
	if err != nil {
		t.Fatalf("localhost NodePort not served: %v", err)
	}
	buf := make([]byte, 5)
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Errorf("localhost NodePort answer %q %v", buf, err)
	}
	_ = c.Close()
	dump := fake.Dump()
	for _, want := range []string{
		"add counter ip kube-proxy localhost-nodeport-rejected-udp",
		"add element ip kube-proxy localhost-nodeport-reject-ports { udp . 30053 : goto localhost-nodeport-reject-udp }",
		`add rule ip kube-proxy localhost-nodeport-reject-udp counter name "localhost-nodeport-rejected-udp" reject`,
	} {
		if !strings.Contains(dump, want) {
			t.Errorf("missing %q in:\n%s", want, dump)
		}
	}
	if strings.Contains(dump, "localhost-nodeport-rejected-tcp") {
		t.Errorf("TCP is served by the userspace proxy and must not be rejected")
	}
	// Loopback traffic reaches filter-input, where the reject lives.
	in := newTracer(t, fake.Fake, tf.nodeIP).trace(packet{src: "127.0.0.1", dst: "127.0.0.1", proto: "udp", dport: 30053})
	if in.verdict != "REJECT" {
		t.Errorf("localhost UDP NodePort must be rejected on input: %v", in)
	}
}

func TestDryRunProxier(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	var out bytes.Buffer
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.NodePortAddresses = []string{"192.168.0.2/32"}
	p, err := NewDryRunProxier(ctx, cfg, v1.IPv4Protocol, proxyutil.NewNoOpLocalDetector(), testNodeName, net.ParseIP("192.168.0.2"), &out)
	if err != nil {
		t.Fatal(err)
	}
	svc := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = "172.30.0.41", []string{"172.30.0.41"}, []v1.IPFamily{v1.IPv4Protocol}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}
	})
	startProxier(p, []*v1.Service{svc}, nil)
	s := out.String()
	if !strings.Contains(s, "add table ip kube-proxy") || !strings.Contains(s, "add element ip kube-proxy no-endpoint-services { 172.30.0.41 . tcp . 80") {
		t.Errorf("dry run output lacks the expected transaction:\n%s", s)
	}
}

// oldNFT is an nft that cannot declare "typeof numgen ..." maps.
type oldNFT struct{ *countingNFT }

func (o oldNFT) Check(ctx context.Context, tx *knftables.Transaction) error {
	if strings.Contains(tx.String(), "typeof numgen") {
		return errors.New("Error: syntax error, unexpected numgen")
	}
	return o.countingNFT.Check(ctx, tx)
}

// Without endpoint map support in nft, the proxier falls back to upstream's
// anonymous map per policy chain and behaves the same.
func TestProxierWithoutEndpointMaps(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			for _, old := range []bool{false, true} {
				var wrap func(*countingNFT) knftables.Interface
				if old {
					wrap = func(c *countingNFT) knftables.Interface { return oldNFT{c} }
				}
				p, fake := newTestProxierOver(t, tf, nil, wrap)
				svc := st.NewService("ns1", "web", func(s *v1.Service) {
					s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
					s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
				})
				slice := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
					es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
					es.Endpoints = append(es.Endpoints, st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false), st.EndpointWith(ip("10.180.1.1"), "node2", true, true, false))
				})
				startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{slice})
				dump := fake.Dump()
				if usesEndpointMaps := strings.Contains(dump, "@"+endpointMapPrefix); usesEndpointMaps == old {
					t.Errorf("old nft=%v: endpoint maps used=%v\n%s", old, usesEndpointMaps, dump)
				}
				if strings.Contains(dump, endpointMapPrefix+"capability-check") {
					t.Errorf("the capability check left its map behind:\n%s", dump)
				}
				runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
					{name: "balanced over both endpoints", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.1.1:8080"}},
				})
			}
		})
	}
}
