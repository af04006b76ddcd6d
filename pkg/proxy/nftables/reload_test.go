//go:build linux

package nftables

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// listFailingNFT fails List of one object type, as a flaky netlink dump
// would, and otherwise is the fake.
type listFailingNFT struct {
	*countingNFT
	failType string
}

func (l *listFailingNFT) List(ctx context.Context, objectType string) ([]string, error) {
	if objectType == l.failType {
		return nil, errors.New("injected listing failure")
	}
	return l.countingNFT.List(ctx, objectType)
}

// A full sync whose listing of chains or sets fails keeps what it knew by
// name only (chain content and set timeouts unknown), so it rewrites every
// wanted chain and set, and still removes a Service's leftovers: the table
// ends up as a sync of the remaining Services from scratch would make it.
func TestFullSyncWithFailedListing(t *testing.T) {
	ctx := context.Background()
	// svc7 has session affinity, so it owns sets as well as chains.
	keep := []tsvc{testServices[0], testServices[6]}
	gone := testServices[1]
	for _, tf := range families {
		for _, failType := range []string{"chains", "sets", "maps"} {
			t.Run(string(tf.family)+"/"+failType, func(t *testing.T) {
				s, fake := newTestSyncer(t, tf, nil)
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, append(keep, gone)...)}); err != nil {
					t.Fatal(err)
				}
				// Removing a Service leaves its flushed chains waiting
				// in the stale list.
				if _, err := s.sync(ctx, syncInput{removed: []string{gone.model(tf.ip).owner}}); err != nil {
					t.Fatal(err)
				}
				if !s.staleChainsPending() {
					t.Fatal("no stale chains after removing a Service")
				}
				s.nft = &listFailingNFT{countingNFT: fake, failType: failType}
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, keep...)}); err != nil {
					t.Fatalf("full sync with failing %s listing: %v", failType, err)
				}
				s.nft = fake
				if err := s.deleteStaleChains(ctx, time.Now().Add(time.Hour), time.Second); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(fullDump(t, tf, nil, keep), sortedDump(fake.Fake)); diff != "" {
					t.Errorf("table differs from a sync from scratch (-want +got):\n%s", diff)
				}
			})
		}
	}
}
