package util

import (
	"runtime"
	"runtime/debug"
	"testing"
)

// TestHeapPacer: Pace collects once the heap grew by an eighth of the live
// heap, and never while the live heap is under pacerMinLive.
func TestHeapPacer(t *testing.T) {
	// Only Pace may collect during the test.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	numGC := func() uint32 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return ms.NumGC
	}
	var sink [][]byte
	garbage := func(mb int) {
		for range mb {
			sink = append(sink, make([]byte, 1<<20))
		}
		sink = nil
	}

	runtime.GC()
	c := NewHeapPacer()
	before := numGC()
	garbage(16)
	c.Pace()
	if got := numGC() - before; got != 0 {
		t.Errorf("a small live heap: %d collections, want none", got)
	}

	live := make([][]byte, 64) // 64 MB live: Pace collects after ~8 MB
	for i := range live {
		live[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	c = NewHeapPacer()
	before = numGC()
	garbage(2)
	c.Pace()
	if got := numGC() - before; got != 0 {
		t.Errorf("2 MB over 64 MB live: %d collections, want none", got)
	}
	garbage(8)
	c.Pace()
	if got := numGC() - before; got != 1 {
		t.Errorf("10 MB over 64 MB live: %d collections, want 1", got)
	}
	c.Pace()
	if got := numGC() - before; got != 1 {
		t.Errorf("right after a collection: %d collections in all, want 1", got)
	}
	runtime.KeepAlive(live)
}
