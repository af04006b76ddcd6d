//go:build linux

package nftables

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// TestKernelTableDeletedUnderneath: someone deletes the whole table while
// kube-proxy runs (nft flush ruleset, a --cleanup run). Listing a missing
// table through netlink fails with a plain ENOENT that knftables does not
// classify as "not found"; the next full sync must still rebuild everything,
// including the affinity sets the view believed to exist.
func TestKernelTableDeletedUnderneath(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				ref, fake := newTestSyncer(t, tf, nil)
				ms := func() []*serviceModel { return models(tf.ip, testServices...) }
				for _, sy := range []*syncer{s, ref} {
					if _, err := sy.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
						t.Fatalf("full sync: %v", err)
					}
				}
				if len(s.view.sets.have) == 0 {
					t.Fatal("test services must include an affinity service")
				}

				tx := nft.NewTransaction()
				tx.Delete(&knftables.Table{})
				if err := nft.Run(ctx, tx); err != nil {
					t.Fatalf("deleting the table: %v", err)
				}
				if _, err := nft.List(ctx, "sets"); err == nil || !isNotFound(err) {
					t.Errorf("listing sets of a missing table: got %v, want a not-found error", err)
				}

				if _, err := s.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
					t.Fatalf("full sync after the table was deleted: %v", err)
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from the fake after the repair (-fake +kernel):\n%s", diff)
				}
			})
		})
	}
}

// TestKernelLongNames: the longest legal namespace, service and port names
// (63-character DNS labels) with affinity and every frontend type must give
// chain, set and comment names the kernel accepts.
func TestKernelLongNames(t *testing.T) {
	long := func(c string) string { return strings.Repeat(c, 63) }
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				svc := tsvc{
					ns: long("n"), name: long("s"), portName: long("p"),
					clusterIP: "172.30.0.99", port: 80, nodePort: 3099,
					externalIPs: []string{"192.168.99.99"}, lbIPs: []string{"5.6.7.99"}, sourceRanges: []string{"203.0.113.0/25"},
					affinitySeconds: 10800, extLocal: true,
					eps: []tep{{ip: "10.180.0.99", port: 65535, local: true}, {ip: "10.180.1.99", port: 65535}},
				}
				empty := svc
				empty.name, empty.clusterIP, empty.nodePort, empty.eps = long("e"), "172.30.0.98", 3098, nil
				empty.externalIPs, empty.lbIPs = []string{"192.168.99.98"}, []string{"5.6.7.98"}
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svc, empty)}); err != nil {
					t.Fatalf("the kernel rejected the longest names: %v", err)
				}
				if got := len(snapshot(t, nft)); got == 0 {
					t.Fatal("nothing was programmed")
				}
			})
		})
	}
}

// TestKernelTableFlushedUnderneath: "nft flush table" keeps the chains, sets
// and maps but drops every rule. The periodic check must notice it, and the
// full sync it triggers must put back exactly what a clean sync programs.
func TestKernelTableFlushedUnderneath(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			inNetns(t, func() {
				ctx := context.Background()
				s, nft := realSyncer(t, tf, nil)
				ref, fake := newTestSyncer(t, tf, nil)
				ms := func() []*serviceModel { return models(tf.ip, testServices...) }
				for _, sy := range []*syncer{s, ref} {
					if _, err := sy.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
						t.Fatalf("full sync: %v", err)
					}
				}
				if s.tableMissing(ctx) {
					t.Fatal("tableMissing reports a freshly synced table missing")
				}

				if out, err := exec.Command("nft", "flush", "table", string(familyOf(tf.family)), kubeProxyTable).CombinedOutput(); err != nil {
					t.Fatalf("nft flush table: %v: %s", err, out)
				}
				if !s.tableMissing(ctx) {
					t.Fatal("tableMissing does not notice a flushed table")
				}

				if _, err := s.sync(ctx, syncInput{full: true, services: ms()}); err != nil {
					t.Fatalf("full sync after the flush: %v", err)
				}
				if diff := cmp.Diff(snapshot(t, fake), snapshot(t, nft)); diff != "" {
					t.Fatalf("kernel differs from the fake after the repair (-fake +kernel):\n%s", diff)
				}
				if s.tableMissing(ctx) {
					t.Fatal("tableMissing still reports the repaired table missing")
				}
			})
		})
	}
}
