//go:build linux

package nftables

import (
	"context"
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
				if len(s.view.haveSets) == 0 {
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
