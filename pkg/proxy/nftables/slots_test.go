package nftables

import (
	"testing"
)

func TestEndpointMapNames(t *testing.T) {
	for _, tc := range []struct {
		gen, i int
		want   string
	}{
		{0, 0, "endpoints-0-tcp-00"},
		{3, 255, "endpoints-3-tcp-ff"},
		{1, endpointMapShards + 0x3f, "endpoints-1-udp-3f"},
		{12, 2*endpointMapShards + 1, "endpoints-12-sctp-01"},
	} {
		if got := endpointMapName(tc.gen, tc.i); got != tc.want {
			t.Errorf("endpointMapName(%d, %d) = %q, want %q", tc.gen, tc.i, got, tc.want)
		}
		if g := endpointMapGeneration(tc.want); g != tc.gen {
			t.Errorf("endpointMapGeneration(%q) = %d, want %d", tc.want, g, tc.gen)
		}
	}
	for _, name := range []string{"service-ips", "endpoints-", "endpoints-x-tcp-00", "endpoints--1-tcp-00", "endpoints-7"} {
		if g := endpointMapGeneration(name); g != -1 {
			t.Errorf("endpointMapGeneration(%q) = %d, want -1", name, g)
		}
	}
	if i := endpointMapIndex("service-X-ns/a/udp/p", "udp"); i/endpointMapShards != 1 {
		t.Errorf("udp chain got map %d, not a udp map", i)
	}
	if i := endpointMapIndex("service-X-ns/a/sctp/p", "sctp"); i/endpointMapShards != 2 {
		t.Errorf("sctp chain got map %d, not an sctp map", i)
	}
}

func TestSlotAllocator(t *testing.T) {
	overlaps := func(a, b slotRange) bool {
		return a.m == b.m && a.base < b.base+b.size && b.base < a.base+a.size
	}
	type step struct {
		op    string // "reserve", "release", "commit"
		chain string
		n     int
		// for reserve: the expected capacity, and whether the range must be
		// the chain's previous one
		size uint32
		same bool
	}
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"sizes are powers of two", []step{
			{op: "reserve", chain: "a", n: 1, size: 1},
			{op: "reserve", chain: "b", n: 3, size: 4},
			{op: "reserve", chain: "c", n: 10, size: 16},
			{op: "reserve", chain: "d", n: 16, size: 16},
			{op: "reserve", chain: "e", n: 17, size: 32},
		}},
		{"a range is kept while it fits well", []step{
			{op: "reserve", chain: "a", n: 10, size: 16},
			{op: "reserve", chain: "a", n: 16, size: 16, same: true},
			{op: "reserve", chain: "a", n: 5, size: 16, same: true},
			{op: "reserve", chain: "a", n: 17, size: 32},
			{op: "reserve", chain: "a", n: 8, size: 8},
			{op: "reserve", chain: "a", n: 1, size: 1},
			{op: "reserve", chain: "a", n: 4, size: 4},
			{op: "reserve", chain: "a", n: 1, size: 4, same: true},
		}},
		{"released ranges wait for the commit", []step{
			{op: "reserve", chain: "a", n: 10, size: 16},
			{op: "release", chain: "a"},
			{op: "reserve", chain: "b", n: 10, size: 16},
			{op: "commit"},
			{op: "release", chain: "b"},
			{op: "commit"},
			{op: "reserve", chain: "c", n: 9, size: 16},
			{op: "reserve", chain: "d", n: 9, size: 16},
			{op: "reserve", chain: "e", n: 9, size: 16},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newSlotAllocator()
			live := map[string]slotRange{}
			// Ranges freed but not yet committed: still off limits.
			var pendingFree []slotRange
			for i, st := range tc.steps {
				switch st.op {
				case "reserve":
					prev, had := live[st.chain]
					r := a.reserve(st.chain, "tcp", st.n)
					if r.size != st.size {
						t.Fatalf("step %d: reserve(%s, %d) size %d, want %d", i, st.chain, st.n, r.size, st.size)
					}
					if st.same && (!had || prev != r) {
						t.Fatalf("step %d: reserve(%s, %d) moved from %+v to %+v", i, st.chain, st.n, prev, r)
					}
					if had && prev != r {
						pendingFree = append(pendingFree, prev)
					}
					delete(live, st.chain)
					for other, o := range live {
						if overlaps(r, o) {
							t.Fatalf("step %d: %s got %+v overlapping %s's %+v", i, st.chain, r, other, o)
						}
					}
					for _, f := range pendingFree {
						if overlaps(r, f) {
							t.Fatalf("step %d: %s got %+v, released in this sync: %+v", i, st.chain, r, f)
						}
					}
					live[st.chain] = r
				case "release":
					pendingFree = append(pendingFree, live[st.chain])
					delete(live, st.chain)
					a.release(st.chain)
				case "commit":
					pendingFree = nil
					a.commit()
				}
			}
		})
	}
}

// Freed ranges are reused: churn does not grow the slot space.
func TestSlotAllocatorReusesRanges(t *testing.T) {
	a := newSlotAllocator()
	for round := range 100 {
		for i := range 50 {
			a.reserve("chain-"+itoa(round)+"-"+itoa(i), "tcp", 10)
		}
		a.commit()
		for i := range 50 {
			a.release("chain-" + itoa(round) + "-" + itoa(i))
		}
		a.commit()
	}
	var total uint32
	for _, n := range a.next {
		total += n
	}
	if total > 2*50*16 {
		t.Errorf("slot space grew to %d slots for 50 live chains of 16", total)
	}
}
