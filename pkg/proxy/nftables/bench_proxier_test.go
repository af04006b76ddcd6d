//go:build linux

package nftables

import (
	"context"
	"fmt"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// benchObjects returns NodePort services first..first+n-1 with eps endpoints
// each (every tenth eTP=Local, every fiftieth with session affinity), as API
// objects.
func benchObjects(first, n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, 0, n)
	slices := make([]*discovery.EndpointSlice, 0, n)
	for i := first; i < first+n; i++ {
		ns, name := fmt.Sprintf("ns%d", i%100), fmt.Sprintf("svc%d", i)
		ip := fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
		svcs = append(svcs, st.NewService(ns, name, func(s *v1.Service) {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip, []string{ip}, []v1.IPFamily{v1.IPv4Protocol}
			s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, NodePort: int32(30000 + i%30000), TargetPort: intstr.FromInt32(8080)}}
			if i%10 == 0 {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = int32(32000 + i%1000)
			}
			if i%50 == 0 {
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](10800)}}
			}
		}))
		slices = append(slices, st.NewSlice(ns, name, name+"-1", st.AddressTypeOf(v1.IPv4Protocol), func(es *discovery.EndpointSlice) {
			es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
			for j := range eps {
				k := i*eps + j
				node := "node2"
				if j == 0 {
					node = testNodeName
				}
				es.Endpoints = append(es.Endpoints, st.EndpointWith(fmt.Sprintf("10.%d.%d.%d", k/65536, (k/256)%256, k%256), node, true, true, false))
			}
		}))
	}
	return svcs, slices
}

// benchProxier builds a Proxier over nft with a discarding logger (the
// default test logger would format every V(2) line).
func benchProxier(b *testing.B, nft knftables.Interface) *Proxier {
	b.Helper()
	ctx := klog.NewContext(context.Background(), klog.Background().V(0))
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.NFTables.MasqueradeBit = ptr.To[int32](14)
	cfg.SyncPeriod.Duration = 30 * time.Second
	cfg.MinSyncPeriod.Duration = time.Second
	cfg.NodePortAddresses = []string{"192.168.0.2/32"}
	nw := proxyutiltest.NewFakeNetwork()
	nw.AddInterfaceAddr(&net.Interface{Name: "eth0"}, []net.Addr{&net.IPNet{IP: net.ParseIP("192.168.0.2"), Mask: net.CIDRMask(24, 32)}})
	p, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, proxyutil.NewDetectLocalByCIDR("10.0.0.0/8"), testNodeName,
		net.ParseIP("192.168.0.2"), nil, nil, false, WithNFTables(nft), proxieropts.WithNetworkInterfacer(nw),
		proxieropts.WithConntrack(conntrack.NewFake()), proxieropts.WithServiceHealthServer(healthcheck.NewFakeServiceHealthServer()))
	if err != nil {
		b.Fatal(err)
	}
	// Over the real nft, endpoint changes take the netlink path, as in
	// production (NewProxier sets it up only for the host's own table).
	if _, discard := nft.(*discardNFT); !discard {
		p.syncer.elements = newNetlinkElements(v1.IPv4Protocol)
	}
	p.OnServiceCIDRsChanged([]string{"172.30.0.0/16"})
	return p
}

// BenchmarkProxier measures the whole path from API objects to nft, as the
// running kube-proxy does it: the first (full) sync, then a one-endpoint
// change and a one-service add, each a partial sync. "gen" renders the
// transactions and discards them; "nft" runs them with the real nft (and
// endpoint-only changes over netlink, nlbatch.go) in a private netns (root; 10k and more only with KUBE_PROXY_BENCH_LARGE=1).
// maxrss-MiB is the process peak after the step.
//
// Each step sets itself up inside its own b.Run: sub-benchmarks run on new
// goroutines, which would not be in the netns of a caller's locked thread.
func BenchmarkProxier(b *testing.B) {
	fullSync := func(b *testing.B, mk func() (knftables.Interface, func()), svcs []*v1.Service, slices []*discovery.EndpointSlice) {
		b.ReportAllocs()
		cpu0 := childCPU()
		for b.Loop() {
			b.StopTimer()
			nft, cleanup := mk()
			p := benchProxier(b, nft)
			runtime.GC()
			b.StartTimer()
			startProxier(p, svcs, slices)
			b.StopTimer()
			if p.NeedsFullSync() {
				b.Fatal("initial sync failed")
			}
			cleanup()
			b.StartTimer()
		}
		reportChildCPU(b, cpu0)
		reportRSS(b)
	}
	endpointChange := func(b *testing.B, mk func() (knftables.Interface, func()), svcs []*v1.Service, slices []*discovery.EndpointSlice) {
		nft, cleanup := mk()
		defer cleanup()
		p := benchProxier(b, nft)
		startProxier(p, svcs, slices)
		slices = append([]*discovery.EndpointSlice(nil), slices...)
		b.ReportAllocs()
		cpu0 := childCPU()
		i := 0
		for b.Loop() {
			k := (i * 7919) % len(slices)
			old := slices[k]
			upd := old.DeepCopy()
			upd.Endpoints[1].Addresses = []string{fmt.Sprintf("10.200.%d.%d", (i/250)%250, i%250+1)}
			slices[k] = upd
			i++
			p.OnEndpointSliceUpdate(old, upd)
			if err := p.SyncNow(); err != nil {
				b.Fatal(err)
			}
		}
		reportChildCPU(b, cpu0)
	}
	serviceAdd := func(b *testing.B, mk func() (knftables.Interface, func()), svcs []*v1.Service, slices []*discovery.EndpointSlice) {
		nft, cleanup := mk()
		defer cleanup()
		p := benchProxier(b, nft)
		startProxier(p, svcs, slices)
		extraSvcs, extraSlices := benchObjects(len(svcs), 2000, 10)
		b.ReportAllocs()
		cpu0 := childCPU()
		i := 0
		for b.Loop() {
			if i == len(extraSvcs) {
				b.Fatal("ran out of extra services; raise their number")
			}
			p.OnServiceAdd(extraSvcs[i])
			p.OnEndpointSliceAdd(extraSlices[i])
			i++
			if err := p.SyncNow(); err != nil {
				b.Fatal(err)
			}
		}
		reportChildCPU(b, cpu0)
		reportRSS(b)
	}
	noOpSync := func(b *testing.B, mk func() (knftables.Interface, func()), svcs []*v1.Service, slices []*discovery.EndpointSlice) {
		nft, cleanup := mk()
		defer cleanup()
		counting := &countingRunNFT{Interface: nft}
		p := benchProxier(b, counting)
		startProxier(p, svcs, slices)
		runs := counting.calls
		b.ReportAllocs()
		cpu0 := childCPU()
		for b.Loop() {
			if err := p.SyncNow(); err != nil {
				b.Fatal(err)
			}
		}
		reportChildCPU(b, cpu0)
		if counting.calls != runs {
			b.Fatalf("a no-op sync reached nftables %d times", counting.calls-runs)
		}
	}
	genNFT := func() (knftables.Interface, func()) {
		return &discardNFT{Fake: knftables.NewFake(knftables.IPv4Family, kubeProxyTable)}, func() {}
	}
	// realNFT must be called on the netns thread (inside inNetns).
	realNFT := func(b *testing.B) func() (knftables.Interface, func()) {
		return func() (knftables.Interface, func()) {
			nft, err := knftables.New(knftables.IPv4Family, kubeProxyTable, knftables.UseNetlink)
			if err != nil {
				b.Skipf("nftables unusable here: %v", err)
			}
			return nft, func() {
				tx := nft.NewTransaction()
				tx.Delete(&knftables.Table{})
				_ = nft.Run(context.Background(), tx)
			}
		}
	}
	steps := []struct {
		name string
		fn   func(*testing.B, func() (knftables.Interface, func()), []*v1.Service, []*discovery.EndpointSlice)
	}{{"FullSync", fullSync}, {"EndpointChange", endpointChange}, {"ServiceAdd", serviceAdd}, {"NoOpSync", noOpSync}}

	for _, n := range benchSizes {
		svcs, slices := benchObjects(0, n, 10)
		for _, step := range steps {
			b.Run(fmt.Sprintf("gen/%d/%s", n, step.name), func(b *testing.B) {
				step.fn(b, genNFT, svcs, slices)
			})
			b.Run(fmt.Sprintf("nft/%d/%s", n, step.name), func(b *testing.B) {
				if n > 1000 && os.Getenv("KUBE_PROXY_BENCH_LARGE") == "" {
					b.Skip("set KUBE_PROXY_BENCH_LARGE=1 to run the real-nft benchmark at this size")
				}
				// Everything that runs nft happens on this thread, in
				// the private netns.
				inNetns(b, func() { step.fn(b, realNFT(b), svcs, slices) })
			})
		}
	}
}

// countingRunNFT counts every call that reaches nftables.
type countingRunNFT struct {
	knftables.Interface
	calls int
}

func (c *countingRunNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	c.calls++
	return c.Interface.Run(ctx, tx)
}

func (c *countingRunNFT) List(ctx context.Context, objectType string) ([]string, error) {
	c.calls++
	return c.Interface.List(ctx, objectType)
}

func (c *countingRunNFT) ListElements(ctx context.Context, objectType, name string) ([]*knftables.Element, error) {
	c.calls++
	return c.Interface.ListElements(ctx, objectType, name)
}
