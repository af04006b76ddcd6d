//go:build linux

package nftables

import (
	"context"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
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
		return a.mapIndex == b.mapIndex && a.base < b.base+b.size && b.base < a.base+a.size
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

// Freed ranges are reused: under churn, a map's slot space stays within what
// its peak number of live ranges needs.
func TestSlotAllocatorReusesRanges(t *testing.T) {
	a := newSlotAllocator()
	live := map[int]uint32{}
	peak := map[int]uint32{}
	for round := range 100 {
		for i := range 50 {
			r := a.reserve("chain-"+itoa(round)+"-"+itoa(i), "tcp", 10)
			live[r.mapIndex]++
			peak[r.mapIndex] = max(peak[r.mapIndex], live[r.mapIndex])
		}
		a.commit()
		for i := range 50 {
			name := "chain-" + itoa(round) + "-" + itoa(i)
			live[a.ranges[name].mapIndex]--
			a.release(name)
		}
		a.commit()
	}
	for m, n := range a.next {
		if n > peak[m]*16 {
			t.Errorf("map %d grew to %d slots; at most %d ranges of 16 were live at once", m, n, peak[m])
		}
	}
}

// runHookNFT calls after once each transaction has been applied.
type runHookNFT struct {
	*countingNFT
	after func()
}

func (r *runHookNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	if err := r.countingNFT.Run(ctx, tx); err != nil {
		return err
	}
	r.after()
	return nil
}

// TestRestartNeverMisroutes restarts kube-proxy over an existing table: the
// new process assigns endpoint slots differently (here: the services come in
// the opposite order) and applies its first full sync in many small
// transactions. After every one of them, traffic to each Service must go to
// that Service's own endpoints and nowhere else; at the end, no map of the
// old generation is left and the table means what a fresh sync produces.
func TestRestartNeverMisroutes(t *testing.T) {
	t.Run("nft", func(t *testing.T) { testRestartNeverMisroutes(t, false) })
	// With endpoint elements over netlink (nlbatch.go), the restart's
	// endpoint maps are created up front and its elements written between
	// nft transactions.
	t.Run("elements over netlink", func(t *testing.T) { testRestartNeverMisroutes(t, true) })
}

func testRestartNeverMisroutes(t *testing.T, withElements bool) {
	tf := families[0]
	ctx := context.Background()
	var svcs []tsvc
	for i := range 300 {
		sv := tsvc{ns: "ns", name: "s" + itoa(i), portName: "p", clusterIP: "172.30." + itoa(1+i/250) + "." + itoa(i%250+1), port: 80}
		for j := range 1 + i%3 {
			sv.eps = append(sv.eps, tep{ip: "10.180." + itoa(i/100) + "." + itoa((i%100)*2+j+1), port: 8000 + i})
		}
		svcs = append(svcs, sv)
	}
	reversed := slices.Clone(svcs)
	slices.Reverse(reversed)

	old, fake := newTestSyncer(t, tf, nil)
	if _, err := old.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
		t.Fatal(err)
	}
	oldMaps, _ := fake.List(ctx, "maps")

	restarted, _ := newTestSyncer(t, tf, func(c *syncerConfig) { c.maxOps = 40 })
	checks := 0
	hook := &runHookNFT{countingNFT: fake, after: func() {
		checks++
		tr := newTracer(t, fake.Fake, tf.nodeIP)
		for _, sv := range svcs {
			got := tr.trace(packet{src: "10.1.2.3", dst: sv.clusterIP, proto: "tcp", dport: sv.port})
			for _, d := range got.dnat {
				ok := false
				for _, ep := range sv.eps {
					ok = ok || d == ep.ip+":"+itoa(ep.port)
				}
				if !ok {
					t.Fatalf("after transaction %d, %s/%s was sent to %s: %v", checks, sv.ns, sv.name, d, got)
				}
			}
		}
	}}
	restarted.nft = hook
	if withElements {
		// Element batches go to the fake through the hook too, so the state
		// after each of them is checked as well.
		restarted.elements = &fakeElements{nft: hook}
	}
	res, err := restarted.sync(ctx, syncInput{full: true, services: models(tf.ip, reversed...)})
	if err != nil {
		t.Fatal(err)
	}
	if res.transactions < 20 {
		t.Fatalf("want the restart sync cut into many transactions, got %+v", res)
	}
	if restarted.view.epGen == old.view.epGen {
		t.Errorf("restart reused endpoint map generation %d", old.view.epGen)
	}
	maps, _ := fake.List(ctx, "maps")
	for _, name := range oldMaps {
		if endpointMapGeneration(name) >= 0 && slices.Contains(maps, name) {
			t.Errorf("old endpoint map %s was not deleted", name)
		}
	}
	if diff := cmp.Diff(fullDump(t, tf, nil, svcs), sortedDump(fake.Fake)); diff != "" {
		t.Errorf("after the restart the table differs from a fresh sync (-fresh +restarted):\n%s", diff)
	}
}
