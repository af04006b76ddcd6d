package nftables

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/knftables"
)

// A table deleted from outside is rebuilt at the first sync after syncPeriod, even
// when nothing changed; until then, no-op syncs still make no kernel call.
func TestDeletedTableRebuiltAfterSyncPeriod(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ip := tf.ip
			p, fake := newTestProxier(t, tf, nil)
			svc := makeService("ns1", "web", func(s *v1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
				s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
			})
			slice := makeSlice("ns1", "web", "web-1", tf.family, func(es *discovery.EndpointSlice) {
				es.Endpoints = append(es.Endpoints, epAt(ip("10.180.0.1"), testNodeName, true, true, false))
				es.Ports = tcpPort("http", 8080)
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
			if err := p.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			if fake.runs.Load() != runs || fake.lists.Load() != lists {
				t.Fatalf("a no-op sync within syncPeriod made kernel calls: runs %d→%d, lists %d→%d", runs, fake.runs.Load(), lists, fake.lists.Load())
			}
			if fake.Table != nil {
				t.Fatal("table came back without a sync doing anything")
			}

			p.lastKernelContact = time.Now().Add(-p.syncPeriod - time.Second)
			p.tableCheckDue.Store(true)
			if err := p.syncProxyRules(); err != nil {
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
			p.lastKernelContact = time.Now().Add(-p.syncPeriod - time.Second)
			p.tableCheckDue.Store(true)
			if err := p.syncProxyRules(); err != nil {
				t.Fatal(err)
			}
			if got := fake.lists.Load() - lists; got != 1 || fake.runs.Load() != runs {
				t.Fatalf("periodic check with the table present: %d listings (want 1), %d transactions (want 0)", got, fake.runs.Load()-runs)
			}
		})
	}
}
