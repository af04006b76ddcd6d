//go:build linux

/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package conntrack

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"runtime"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

func mustAddr(s string) netip.Addr { return netip.MustParseAddr(s) }

// syntheticFlow is UDP flow i of a table where client i talks to service i%10, DNATed to
// endpoint i%20.
func syntheticFlow(i int) *netlink.ConntrackFlow {
	client := net.IPv4(198, 18, byte(i/250), byte(1+i%250)).To4()
	svc := net.IPv4(198, 18, 200, byte(1+i%10)).To4()
	ep := net.IPv4(198, 18, 100, byte(1+i%20)).To4()
	sport := uint16(10000 + i%50000)
	return &netlink.ConntrackFlow{
		FamilyType: unix.AF_INET,
		Forward:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: client, DstIP: svc, SrcPort: sport, DstPort: 53},
		Reverse:    netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: ep, DstIP: client, SrcPort: 5353, DstPort: sport},
		TimeOut:    600,
	}
}

// fillTable inserts flows into the namespace's table through ctnetlink, which needs neither
// traffic nor rules.
func fillTable(tb testing.TB, h *netlink.Handle, flows []*netlink.ConntrackFlow) {
	tb.Helper()
	for _, f := range flows {
		if err := h.ConntrackCreate(netlink.ConntrackTable, unix.AF_INET, f); err != nil {
			tb.Fatalf("inserting %s: %v", f, err)
		}
	}
}

func scaleSetup(tb testing.TB, n int) (*Conntracker, *netlink.Handle, []*netlink.ConntrackFlow) {
	tb.Helper()
	if os.Geteuid() != 0 {
		tb.Skip("needs root to create a network namespace")
	}
	ns := newNSTB(tb)
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		tb.Fatalf("netlink handle: %v", err)
	}
	tb.Cleanup(h.Close)
	ct, err := NewInNamespace(ns)
	if err != nil {
		tb.Fatalf("NewInNamespace: %v", err)
	}
	tb.Cleanup(ct.Close)
	flows := make([]*netlink.ConntrackFlow, n)
	for i := range flows {
		flows[i] = syntheticFlow(i)
	}
	fillTable(tb, h, flows)
	return ct, h, flows
}

// newNSTB is newNS for benchmarks too.
func newNSTB(tb testing.TB) netns.NsHandle {
	tb.Helper()
	type result struct {
		ns  netns.NsHandle
		err error
	}
	rc := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, err := netns.New()
		rc <- result{ns, err}
	}()
	r := <-rc
	if r.err != nil {
		tb.Fatalf("creating netns: %v", r.err)
	}
	tb.Cleanup(func() { r.ns.Close() })
	return r.ns
}

// TestKernelScale deletes by filter and by exact flows in a table of 2000 entries and checks
// that exactly the chosen entries went.
func TestKernelScale(t *testing.T) {
	const n = 2000
	ct, _, flows := scaleSetup(t, n)
	listed, err := ct.ListEntries(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != n {
		t.Fatalf("listed %d entries, inserted %d", len(listed), n)
	}

	// Endpoint 198.18.100.1 went away: every flow DNATed to it (i%20 == 0) is stale.
	gone := map[flowKey]bool{}
	for i, f := range flows {
		if i%20 == 0 {
			gone[keyOf(f)] = true
		}
	}
	deleted, err := DeleteFiltered(ct, unix.AF_INET, Filter{Protocol: unix.IPPROTO_UDP, ReplySrcIP: mustAddr("198.18.100.1"), NAT: DNATed})
	if err != nil || deleted != len(gone) {
		t.Fatalf("DeleteFiltered = %d, %v; want %d", deleted, err, len(gone))
	}

	// Then delete 300 flows by identity, taken from the stale listing: a third of them
	// (i%20 == 0) are already gone and must not be counted.
	var batch []*netlink.ConntrackFlow
	want := 0
	for i := 0; i < n; i += n / 300 {
		batch = append(batch, listed[i])
		if !gone[keyOf(listed[i])] {
			want++
			gone[keyOf(listed[i])] = true
		}
	}
	deleted, err = ct.DeleteEntries(unix.AF_INET, batch)
	if err != nil || deleted != want {
		t.Fatalf("DeleteEntries(%d flows) = %d, %v; want %d", len(batch), deleted, err, want)
	}

	left, err := ct.ListEntries(unix.AF_INET)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != n-len(gone) {
		t.Errorf("%d entries left, want %d", len(left), n-len(gone))
	}
	for _, f := range left {
		if gone[keyOf(f)] {
			t.Errorf("deleted flow survived: %s", f)
		}
	}
}

// BenchmarkKernelList measures listing a table of n entries.
func BenchmarkKernelList(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("table=%d", n), func(b *testing.B) {
			ct, _, _ := scaleSetup(b, n)
			b.ResetTimer()
			for range b.N {
				if listed, err := ct.ListEntries(unix.AF_INET); err != nil || len(listed) != n {
					b.Fatalf("listed %d, %v", len(listed), err)
				}
			}
		})
	}
}

// BenchmarkKernelDelete compares deleting k flows from a table of n entries one by one (what
// DeleteEntries does for small batches) with one table dump (what it does for large ones and
// what upstream always does). Deleted flows are re-inserted, untimed, between rounds.
func BenchmarkKernelDelete(b *testing.B) {
	for _, size := range []struct{ n, k int }{{1000, 10}, {10000, 10}, {10000, 100}} {
		for _, path := range []string{"exact", "dump"} {
			b.Run(fmt.Sprintf("table=%d/delete=%d/%s", size.n, size.k, path), func(b *testing.B) {
				ct, h, flows := scaleSetup(b, size.n)
				victims := flows[:size.k]
				del := func() (int, error) { return ct.deleteEach(unix.AF_INET, victims) }
				if path == "dump" {
					del = func() (int, error) { return ct.deleteMatching(unix.AF_INET, NewFlowSet(victims)) }
				}
				b.ResetTimer()
				for range b.N {
					if d, err := del(); err != nil || d != size.k {
						b.Fatalf("deleted %d, %v", d, err)
					}
					b.StopTimer()
					fillTable(b, h, victims)
					b.StartTimer()
				}
			})
		}
	}
}

// TestKernelReusedTuple checks that deleting a stale flow spares a newer connection that
// reuses its original tuple but was sent to another endpoint, on both deletion paths.
func TestKernelReusedTuple(t *testing.T) {
	for _, path := range []string{"exact", "dump"} {
		t.Run(path, func(t *testing.T) {
			ct, h, flows := scaleSetup(t, 1)
			stale := flows[0]
			if _, err := h.ConntrackDeleteFilters(netlink.ConntrackTable, unix.AF_INET, NewFlowSet(flows)); err != nil {
				t.Fatal(err)
			}
			fresh := *stale
			fresh.Reverse.SrcIP = net.IPv4(198, 18, 100, 99).To4()
			fillTable(t, h, []*netlink.ConntrackFlow{&fresh})

			batch := []*netlink.ConntrackFlow{stale}
			if path == "dump" {
				// Push the batch over the exact-delete limit with flows that do not exist.
				for i := 1; len(batch) <= maxExactDeletes; i++ {
					batch = append(batch, syntheticFlow(1000+i))
				}
			}
			n, err := ct.DeleteEntries(unix.AF_INET, batch)
			if err != nil || n != 0 {
				t.Fatalf("DeleteEntries = %d, %v; want 0, nil", n, err)
			}
			left, err := ct.ListEntries(unix.AF_INET)
			if err != nil || len(left) != 1 || !NewFlowSet(left).MatchConntrackFlow(&fresh) {
				t.Fatalf("table = %v, %v; want only the fresh flow", left, err)
			}
			// The fresh flow itself is deleted when asked for.
			if n, err := ct.DeleteEntries(unix.AF_INET, append(batch[1:], &fresh)); err != nil || n != 1 {
				t.Fatalf("DeleteEntries(fresh) = %d, %v; want 1", n, err)
			}
		})
	}
}
