//go:build linux

package nftables

import (
	"context"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/knftables"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// A table deleted from outside is rebuilt at the first sync after syncPeriod, even
// when nothing changed; until then, no-op syncs still make no kernel call.
func TestDeletedTableRebuiltAfterSyncPeriod(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			p, fake := newTestProxier(t, tf, nil)
			svc := st.NewService("ns1", "web", func(s *v1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
				s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
			})
			slice := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
				es.Endpoints = append(es.Endpoints, st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false))
				es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
			})
			startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{slice})
			if fake.Table == nil {
				t.Fatal("initial sync created no table")
			}

			tx := fake.NewTransaction()
			tx.Delete(&knftables.Table{})
			if err := fake.Fake.Run(context.Background(), tx); err != nil {
				t.Fatal(err)
			}

			runs, lists := fake.runs.Load(), fake.lists.Load()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if fake.runs.Load() != runs || fake.lists.Load() != lists {
				t.Fatalf("a no-op sync within syncPeriod made kernel calls: runs %d→%d, lists %d→%d", runs, fake.runs.Load(), lists, fake.lists.Load())
			}
			if fake.Table != nil {
				t.Fatal("table came back without a sync doing anything")
			}

			p.RequestRulesCheck()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if fake.Table == nil {
				t.Fatal("the deleted table was not rebuilt by the first sync after syncPeriod")
			}
			found := false
			for name := range fake.Table.Chains {
				if len(name) > len("service-") && name[:len("service-")] == "service-" {
					found = true
				}
			}
			if !found {
				t.Fatalf("rebuilt table has no service chain: %v", fake.Table.Chains)
			}

			// With the table present, the periodic check costs one listing and no transaction.
			runs, lists = fake.runs.Load(), fake.lists.Load()
			p.RequestRulesCheck()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got := fake.lists.Load() - lists; got != 1 || fake.runs.Load() != runs {
				t.Fatalf("periodic check with the table present: %d listings (want 1), %d transactions (want 0)", got, fake.runs.Load()-runs)
			}
		})
	}
}

// flushFakeTable does what "nft flush table" does to the kernel: every chain
// loses its rules; chains, sets, maps and elements stay. (The fake's own
// "flush table" recreates an empty table instead.)
func flushFakeTable(t *testing.T, fake *countingNFT) {
	t.Helper()
	chains, err := fake.Fake.List(context.Background(), "chains")
	if err != nil {
		t.Fatal(err)
	}
	tx := fake.NewTransaction()
	for _, name := range chains {
		tx.Flush(&knftables.Chain{Name: name})
	}
	if err := fake.Fake.Run(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
}

// A table flushed from outside (chains kept, rules gone) is repaired by the
// first sync after syncPeriod, not left until the hourly full sync.
func TestFlushedTableRepairedAfterSyncPeriod(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			p, fake := newTestProxier(t, tf, nil)
			svc := st.NewService("ns1", "web", func(s *v1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
				s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
			})
			slice := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
				es.Endpoints = append(es.Endpoints, st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false))
				es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
			})
			startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{slice})
			pkt := packet{src: ip("10.1.2.3"), dst: ip("172.30.0.41"), proto: "tcp", dport: 80}
			want := traceResult{verdict: "ACCEPT", dnat: []string{ep(ip, "10.180.0.1", 8080)}}
			if got := newTracer(t, fake.Fake, tf.nodeIP).trace(pkt); got.String() != want.String() {
				t.Fatalf("before the flush: got %v, want %v", got, want)
			}

			flushFakeTable(t, fake)
			if got := newTracer(t, fake.Fake, tf.nodeIP).trace(pkt); got.String() == want.String() {
				t.Fatalf("the flush left the service working: %v", got)
			}
			if !p.syncer.tableMissing(context.Background()) {
				t.Fatal("tableMissing does not notice a flushed table")
			}

			p.RequestRulesCheck()
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got := newTracer(t, fake.Fake, tf.nodeIP).trace(pkt); got.String() != want.String() {
				t.Fatalf("after the first sync past syncPeriod: got %v, want %v", got, want)
			}
			if p.syncer.tableMissing(context.Background()) {
				t.Fatal("tableMissing still reports the repaired table missing")
			}
		})
	}
}
