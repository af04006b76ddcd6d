//go:build linux

package nftables

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/knftables"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// peakNFT records the live heap when the first transaction of a sync is
// handed over: the plan is fully built then, which is the memory peak of a
// cold start.
type peakNFT struct {
	discardNFT
	heapAtRun uint64
	profile   string
}

func (p *peakNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if p.heapAtRun == 0 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		p.heapAtRun = ms.HeapAlloc
		if p.profile != "" {
			if f, err := os.Create(p.profile); err == nil {
				_ = pprof.WriteHeapProfile(f)
				_ = f.Close()
			}
		}
	}
	return p.discardNFT.Run(ctx, tx)
}

// clusterMixObjects builds n ClusterIP Services (every tenth a NodePort) with
// eps endpoints each, pod addresses shared between Services, one local
// endpoint per Service: the shape of test/bench.
func clusterMixObjects(n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs := make([]*v1.Service, 0, n)
	slices := make([]*discovery.EndpointSlice, 0, n)
	for i := range n {
		name := fmt.Sprintf("svc-%05d", i)
		ip := fmt.Sprintf("172.30.%d.%d", (i+1)/256, (i+1)%256)
		svcs = append(svcs, st.NewService("bench", name, func(s *v1.Service) {
			s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip, []string{ip}, []v1.IPFamily{v1.IPv4Protocol}
			s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
			if i%10 == 0 {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = int32(30000 + i/10)
			}
		}))
		slices = append(slices, st.NewSlice("bench", name, name+"-abc", st.AddressTypeOf(v1.IPv4Protocol), func(es *discovery.EndpointSlice) {
			es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
			for j := range eps {
				k := (i*eps + j) % 32000
				node := "node2"
				if j == 0 {
					node = testNodeName
				}
				es.Endpoints = append(es.Endpoints, st.EndpointWith(fmt.Sprintf("10.18.%d.%d", 128+k/250, 1+k%250), node, true, true, false))
			}
		}))
	}
	return svcs, slices
}

// BenchmarkFirstSyncLiveHeap reports the live heap at the moment a cold
// start's first transaction is run (heap-MiB), for 10,000 Services of 10
// endpoints. NFT_HEAP_PROFILE=file writes a heap profile at that moment.
func BenchmarkFirstSyncLiveHeap(b *testing.B) {
	svcs, slices := clusterMixObjects(10000, 10)
	for b.Loop() {
		b.StopTimer()
		nft := &peakNFT{discardNFT: discardNFT{Fake: knftables.NewFake(knftables.IPv4Family, kubeProxyTable)}, profile: os.Getenv("NFT_HEAP_PROFILE")}
		p := benchProxier(b, nft)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := ms.HeapAlloc
		b.StartTimer()
		startProxier(p, svcs, slices)
		b.StopTimer()
		if p.NeedsFullSync() {
			b.Fatal("initial sync failed")
		}
		b.ReportMetric(float64(nft.heapAtRun)/(1<<20), "heap-MiB")
		b.ReportMetric(float64(nft.heapAtRun-base)/(1<<20), "heap-over-objects-MiB")
		b.StartTimer()
	}
	reportRSS(b)
}
