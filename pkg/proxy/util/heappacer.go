package util

import (
	"runtime"
	"runtime/metrics"
)

// HeapPacer bounds the heap while a large full sync generates, plans and
// applies its rules: a backend creates one per full sync and calls Pace
// often (every few dozen service ports, every thousand plan entries,
// between restores or transactions).
//
// A cold start builds a few hundred bytes of long-lived state per endpoint
// (the view, the plan) while producing about as much garbage again (models,
// rendered strings, transaction text). With Go's default pacing (GOGC=100)
// the heap may grow to twice what the previous collection left live before
// the next one, so the garbage of that burst piled up on top of the growing
// state: in nftables mode at 10k Services x 10 endpoints the Go heap peaked at ~132 MB for
// ~83 MB live, and the process at ~174 MiB RSS. Collecting whenever the
// heap has grown by an eighth of what was live keeps the peak close to the
// live state (test/bench, 10k: heap peak ~91 MB, RSS ~127 MiB; 50k: RSS 915
// -> 470 MiB). The collections run while the heap is small; they cost ~15
// ms each at 10k and the full sync took about as long as before (1.2-1.3 s),
// ~1 s of a 12 s full sync at 50k.
//
// It sets no process-wide GC setting (GOGC, memory limit): a proxier is a
// library, and the process it runs in is its embedder's. In iptables mode
// (legacy backend, 10k Services) it took the peak RSS from ~301 to ~280 MiB.
type HeapPacer struct {
	samples [2]metrics.Sample
	next    uint64 // total heap allocation at which to collect
}

// pacerMinLive is the live heap under which Pace never collects: a
// small cluster's sync has a small burst, and a collection would cost more
// than it saves.
const pacerMinLive = 32 << 20

// NewHeapPacer returns a pacer that counts from the heap's state now.
func NewHeapPacer() *HeapPacer {
	c := &HeapPacer{}
	c.samples[0].Name = "/gc/heap/allocs:bytes"
	c.samples[1].Name = "/gc/heap/live:bytes"
	c.read()
	return c
}

func (c *HeapPacer) read() (allocated, live uint64) {
	metrics.Read(c.samples[:])
	if c.samples[0].Value.Kind() != metrics.KindUint64 || c.samples[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0 // an older runtime without these metrics: never collect
	}
	allocated, live = c.samples[0].Value.Uint64(), c.samples[1].Value.Uint64()
	if live < pacerMinLive {
		c.next = allocated + pacerMinLive/8
	} else {
		c.next = allocated + live/8
	}
	return allocated, live
}

// Pace collects if the heap grew by an eighth of the live heap since the
// last collection it ran or saw. It is cheap to call (a runtime metrics
// read) when it does not collect.
func (c *HeapPacer) Pace() {
	metrics.Read(c.samples[:1])
	if c.samples[0].Value.Kind() != metrics.KindUint64 || c.samples[0].Value.Uint64() < c.next {
		return
	}
	if _, live := c.read(); live < pacerMinLive {
		return
	}
	runtime.GC()
	c.read()
}
