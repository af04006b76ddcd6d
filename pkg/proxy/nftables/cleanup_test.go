//go:build linux

package nftables

import (
	"context"
	"testing"
)

func TestCleanupTable(t *testing.T) {
	tf := families[0]
	s, fake := newTestSyncer(t, tf, nil)
	if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
		t.Fatal(err)
	}
	if cleanupTable(context.Background(), fake) {
		t.Fatal("cleanup reported an error")
	}
	if fake.Dump() != "" {
		t.Errorf("table left after cleanup:\n%s", fake.Dump())
	}
	// A second cleanup finds nothing and is not an error.
	if cleanupTable(context.Background(), fake) {
		t.Error("cleanup of a missing table reported an error")
	}
}
