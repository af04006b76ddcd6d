package nftables

import (
	"runtime"
	"runtime/metrics"
)

// collector bounds the heap while a large full sync generates, plans and
// applies its rules.
//
// A cold start builds a few hundred bytes of long-lived state per endpoint
// (the view, the plan) while producing about as much garbage again (models,
// rendered strings, transaction text). With Go's default pacing (GOGC=100)
// the heap may grow to twice what the previous collection left live before
// the next one, so the garbage of that burst piled up on top of the growing
// state: at 10k Services x 10 endpoints the Go heap peaked at ~132 MB for
// ~83 MB live, and the process at ~174 MiB RSS. Collecting whenever the
// heap has grown by an eighth of what was live keeps the peak close to the
// live state (test/bench, 10k: heap peak ~91 MB, RSS ~127 MiB; 50k: RSS 915
// -> 470 MiB). The collections run while the heap is small; they cost ~15
// ms each at 10k and the full sync took about as long as before (1.2-1.3 s),
// ~1 s of a 12 s full sync at 50k.
//
// It sets no process-wide GC setting (GOGC, memory limit): a proxier is a
// library, and the process it runs in is its embedder's.
type collector struct {
	samples [2]metrics.Sample
	next    uint64 // total heap allocation at which to collect
}

// collectorMinLive is the live heap under which maybe never collects: a
// small cluster's sync has a small burst, and a collection would cost more
// than it saves.
const collectorMinLive = 32 << 20

func newCollector() *collector {
	c := &collector{}
	c.samples[0].Name = "/gc/heap/allocs:bytes"
	c.samples[1].Name = "/gc/heap/live:bytes"
	c.read()
	return c
}

func (c *collector) read() (allocated, live uint64) {
	metrics.Read(c.samples[:])
	if c.samples[0].Value.Kind() != metrics.KindUint64 || c.samples[1].Value.Kind() != metrics.KindUint64 {
		return 0, 0 // an older runtime without these metrics: never collect
	}
	allocated, live = c.samples[0].Value.Uint64(), c.samples[1].Value.Uint64()
	if live < collectorMinLive {
		c.next = allocated + collectorMinLive/8
	} else {
		c.next = allocated + live/8
	}
	return allocated, live
}

// maybe collects if the heap grew by an eighth of the live heap since the
// last collection it ran or saw.
func (c *collector) maybe() {
	metrics.Read(c.samples[:1])
	if c.samples[0].Value.Kind() != metrics.KindUint64 || c.samples[0].Value.Uint64() < c.next {
		return
	}
	if _, live := c.read(); live < collectorMinLive {
		return
	}
	runtime.GC()
	c.read()
}
