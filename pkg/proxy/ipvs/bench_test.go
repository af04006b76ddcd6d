//go:build linux

package ipvs

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// benchCluster is n ClusterIP services of one TCP port with 10 endpoints
// each (two of them on this node), and the slices.
func benchCluster(n int) ([]*v1.Service, []*discovery.EndpointSlice) {
	var svcs []*v1.Service
	var slices []*discovery.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("svc%d", i)
		svcs = append(svcs, st.NewService("ns", name, func(s *v1.Service) {
			s.Spec.ClusterIP = fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)
			s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
		}))
		slices = append(slices, benchSlice(name, i, 0))
	}
	return svcs, slices
}

// benchSlice is service i's slice; gen changes one endpoint's address.
func benchSlice(name string, i, gen int) *discovery.EndpointSlice {
	var eps []st.EP
	for j := range 10 {
		e := st.EP{IP: fmt.Sprintf("10.%d.%d.%d", 1+i/250/250, (i/250)%250, (i%250)*10/10+j*0)}
		e.IP = fmt.Sprintf("10.%d.%d.%d", 100+j, i/250, i%250+1)
		if j < 2 {
			e = local(e.IP)
		}
		if j == 9 && gen%2 == 1 {
			e.IP = fmt.Sprintf("10.%d.%d.%d", 120, i/250, i%250+1)
		}
		eps = append(eps, e)
	}
	return st.Slice("ns", name, name+"-1", discovery.AddressTypeIPv4, []discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP)}, eps...)
}

func benchProxier(b *testing.B, n int) (*Proxier, *fakeEnv, *countingIPVS, []*discovery.EndpointSlice) {
	p, env := newFakeProxier(b, v1.IPv4Protocol, []string{"192.168.0.2"}, fakeProxierOptions{quiet: true, localDetectorCIDR: "10.0.0.0/8"})
	counter := &countingIPVS{Interface: env.ipvs}
	p.ipvs, p.gtm.ipvs = counter, counter
	svcs, slices := benchCluster(n)
	for i := range svcs {
		p.OnServiceAdd(svcs[i])
		p.OnEndpointSliceAdd(slices[i])
	}
	syncAll(b, p)
	return p, env, counter, slices
}

func report(b *testing.B, env *fakeEnv, c *countingIPVS, restores0, iptRestores0 int) {
	calls, _ := env.ipt.RestoreStats()
	b.ReportMetric(float64(c.total())/float64(b.N), "ipvs-calls/op")
	b.ReportMetric(float64(c.calls["GetVirtualServers"])/float64(b.N), "ipvs-lists/op")
	b.ReportMetric(float64(env.ipset.Restores-restores0)/float64(b.N), "ipset-restores/op")
	b.ReportMetric(float64(calls-iptRestores0)/float64(b.N), "iptables-restores/op")
}

// BenchmarkSync measures a full sync (steady state: the kernel already
// holds everything, as for the periodic resync) and a one-endpoint change,
// at 1k and 10k services of 10 endpoints, on the fakes with kernel calls
// counted per sync.
func BenchmarkSync(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("full/%d", n), func(b *testing.B) {
			p, env, c, _ := benchProxier(b, n)
			c.reset()
			r0 := env.ipset.Restores
			i0, _ := env.ipt.RestoreStats()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				p.RequestFullSync()
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, env, c, r0, i0)
		})
		b.Run(fmt.Sprintf("first/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for range b.N {
				b.StopTimer()
				p, env := newFakeProxier(b, v1.IPv4Protocol, []string{"192.168.0.2"}, fakeProxierOptions{quiet: true, localDetectorCIDR: "10.0.0.0/8"})
				svcs, slices := benchCluster(n)
				for i := range svcs {
					p.OnServiceAdd(svcs[i])
					p.OnEndpointSliceAdd(slices[i])
				}
				p.OnServiceSynced()
				b.StartTimer()
				p.OnEndpointSlicesSynced() // the first (full) sync
				b.StopTimer()
				if p.NeedsFullSync() {
					b.Fatal("first sync failed")
				}
				b.ReportMetric(float64(env.ipset.Restores), "ipset-restores/op")
				b.StartTimer()
			}
		})
		b.Run(fmt.Sprintf("one-endpoint/%d", n), func(b *testing.B) {
			p, env, c, slices := benchProxier(b, n)
			c.reset()
			r0 := env.ipset.Restores
			i0, _ := env.ipt.RestoreStats()
			cur := slices[n/2]
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				next := benchSlice(cur.Labels[discovery.LabelServiceName], n/2, i+1)
				p.OnEndpointSliceUpdate(cur, next)
				cur = next
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			report(b, env, c, r0, i0)
		})
	}
}

// BenchmarkDriftCheck measures the once-per-syncPeriod drift check when
// nothing drifted, at 1k and 10k services of 10 endpoints, on the fakes:
// the proxier's own comparison work (the kernel's listing time is not in
// it; the fakes answer from memory), beside "full", the steady-state full
// sync that upstream's every sync resembles.
func BenchmarkDriftCheck(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			p, env, c, _ := benchProxier(b, n)
			rb := (*rulesBackend)(p)
			if d, err := rb.Drift(env.ctx); err != nil || len(d) != 0 {
				b.Fatalf("Drift: %v, %v", d, err)
			}
			c.reset()
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				if d, err := rb.Drift(env.ctx); err != nil || len(d) != 0 {
					b.Fatalf("Drift: %v, %v", d, err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.total())/float64(b.N), "ipvs-calls/op")
		})
	}
}
