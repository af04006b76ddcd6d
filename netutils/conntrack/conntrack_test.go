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
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// fakeHandle is a scripted netlink handle. Each call pops the next error from errs (nil when
// exhausted); an EINTR-class error makes the call process only the first half of the table,
// as an interrupted dump does.
type fakeHandle struct {
	entries     []*netlink.ConntrackFlow
	errs        []error
	listCalls   int
	deleteCalls int
	lastFamily  netlink.InetFamily
}

func (h *fakeHandle) nextErr() error {
	if len(h.errs) == 0 {
		return nil
	}
	err := h.errs[0]
	h.errs = h.errs[1:]
	return err
}

func (h *fakeHandle) ConntrackTableList(_ netlink.ConntrackTableType, fam netlink.InetFamily) ([]*netlink.ConntrackFlow, error) {
	h.listCalls++
	h.lastFamily = fam
	err := h.nextErr()
	if errors.Is(err, unix.EINTR) {
		return slices.Clone(h.entries[:len(h.entries)/2]), err
	}
	if err != nil {
		return nil, err
	}
	return slices.Clone(h.entries), nil
}

func (h *fakeHandle) ConntrackDeleteFilters(_ netlink.ConntrackTableType, fam netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
	h.deleteCalls++
	h.lastFamily = fam
	err := h.nextErr()
	if err != nil && !errors.Is(err, unix.EINTR) {
		return 0, err
	}
	seen := h.entries
	if err != nil {
		seen = h.entries[:len(h.entries)/2]
	}
	var n uint
	var keep []*netlink.ConntrackFlow
	for i, e := range h.entries {
		if i < len(seen) && slices.ContainsFunc(filters, func(f netlink.CustomConntrackFilter) bool { return f.MatchConntrackFlow(e) }) {
			n++
			continue
		}
		keep = append(keep, e)
	}
	h.entries = keep
	return n, err
}

func manyFlows(n int) []*netlink.ConntrackFlow {
	out := make([]*netlink.ConntrackFlow, n)
	for i := range out {
		out[i] = mkFlow(unix.IPPROTO_UDP, fmt.Sprintf("198.18.%d.%d:%d", i/50000, 1+i%200, 1024+i%50000), "198.18.10.1:53", fmt.Sprintf("198.18.1.%d:5353", 1+i%7))
	}
	return out
}

func TestListEntries(t *testing.T) {
	eintr := fmt.Errorf("dump: %w", unix.EINTR)
	tests := []struct {
		name      string
		family    uint8
		errs      []error
		wantLen   int
		wantCalls int
		wantErr   bool
		wantEINTR bool
	}{
		{name: "ok", family: unix.AF_INET, wantLen: 10, wantCalls: 1},
		{name: "v6 family passed through", family: unix.AF_INET6, wantLen: 10, wantCalls: 1},
		{name: "bad family", family: 7, wantErr: true},
		{name: "retries interrupted dump", family: unix.AF_INET, errs: []error{eintr, eintr}, wantLen: 10, wantCalls: 3},
		{name: "partial result after persistent interruption", family: unix.AF_INET, errs: []error{eintr, eintr, eintr, eintr, eintr, eintr},
			wantLen: 5, wantCalls: maxAttempts, wantErr: true, wantEINTR: true},
		{name: "other errors are not retried", family: unix.AF_INET, errs: []error{unix.EPERM}, wantCalls: 1, wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandle{entries: manyFlows(10), errs: tc.errs}
			ct := newConntracker(h, nil, nil)
			got, err := ct.ListEntries(tc.family)
			if (err != nil) != tc.wantErr {
				t.Fatalf("ListEntries error = %v, want error %v", err, tc.wantErr)
			}
			if tc.wantEINTR != errors.Is(err, unix.EINTR) {
				t.Errorf("errors.Is(%v, EINTR) = %v, want %v", err, !tc.wantEINTR, tc.wantEINTR)
			}
			if len(got) != tc.wantLen || h.listCalls != tc.wantCalls {
				t.Errorf("got %d entries in %d calls, want %d in %d", len(got), h.listCalls, tc.wantLen, tc.wantCalls)
			}
			if h.listCalls > 0 && uint8(h.lastFamily) != tc.family {
				t.Errorf("family sent = %d, want %d", h.lastFamily, tc.family)
			}
		})
	}
}

func TestDeleteEntries(t *testing.T) {
	eintr := fmt.Errorf("dump: %w", unix.EINTR)
	table := manyFlows(10)
	tests := []struct {
		name       string
		family     uint8
		del        []*netlink.ConntrackFlow
		errs       []error
		wantN      int
		wantCalls  int
		wantErr    bool
		wantRemain int
	}{
		{name: "nothing to delete makes no request", family: unix.AF_INET, wantRemain: 10},
		{name: "batch is one dump", family: unix.AF_INET, del: []*netlink.ConntrackFlow{table[1], table[3], table[8]}, wantN: 3, wantCalls: 1, wantRemain: 7},
		{name: "absent flows are not an error", family: unix.AF_INET, del: []*netlink.ConntrackFlow{udp6DNAT, udpDirect}, wantN: 0, wantCalls: 1, wantRemain: 10},
		{name: "bad family", family: 0, del: table[:1], wantErr: true, wantRemain: 10},
		// The first, interrupted pass only sees the first half; the retry deletes the rest and the
		// counts add up.
		{name: "interrupted pass is retried and counted", family: unix.AF_INET, del: []*netlink.ConntrackFlow{table[1], table[8]}, errs: []error{eintr},
			wantN: 2, wantCalls: 2, wantRemain: 8},
		{name: "error after partial deletion reports the count", family: unix.AF_INET, del: []*netlink.ConntrackFlow{table[1], table[8]},
			errs: []error{eintr, unix.ENOBUFS}, wantN: 1, wantCalls: 2, wantErr: true, wantRemain: 9},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := &fakeHandle{entries: slices.Clone(table), errs: tc.errs}
			ct := newConntracker(h, nil, nil)
			n, err := ct.DeleteEntries(tc.family, tc.del)
			if (err != nil) != tc.wantErr {
				t.Fatalf("DeleteEntries error = %v, want error %v", err, tc.wantErr)
			}
			if n != tc.wantN || h.deleteCalls != tc.wantCalls || len(h.entries) != tc.wantRemain {
				t.Errorf("deleted %d in %d calls leaving %d; want %d in %d leaving %d", n, h.deleteCalls, len(h.entries), tc.wantN, tc.wantCalls, tc.wantRemain)
			}
			for _, d := range tc.del {
				if slices.ContainsFunc(h.entries, NewFlowSet([]*netlink.ConntrackFlow{d}).MatchConntrackFlow) && !tc.wantErr && tc.family != 0 {
					t.Errorf("flow %v still present", d)
				}
			}
		})
	}
}

// listOnly hides *Conntracker so DeleteFiltered takes its generic path.
type listOnly struct{ Interface }

func TestDeleteFiltered(t *testing.T) {
	table := []*netlink.ConntrackFlow{udpDNAT, tcpDNAT, udpDirect, udpPortNAT}
	filter := Filter{Protocol: unix.IPPROTO_UDP, NAT: DNATed}
	for _, generic := range []bool{false, true} {
		t.Run(fmt.Sprintf("generic=%v", generic), func(t *testing.T) {
			h := &fakeHandle{entries: slices.Clone(table)}
			var ct Interface = newConntracker(h, nil, nil)
			if generic {
				ct = listOnly{ct}
			}
			n, err := DeleteFiltered(ct, unix.AF_INET, filter)
			if err != nil || n != 2 {
				t.Fatalf("DeleteFiltered = %d, %v; want 2, nil", n, err)
			}
			if len(h.entries) != 2 || h.entries[0] != tcpDNAT || h.entries[1] != udpDirect {
				t.Errorf("remaining = %v, want tcpDNAT and udpDirect", h.entries)
			}
			wantList := 0
			if generic {
				wantList = 1
			}
			if h.listCalls != wantList || h.deleteCalls != 1 {
				t.Errorf("calls: list %d delete %d, want list %d delete 1", h.listCalls, h.deleteCalls, wantList)
			}
			if c, err := Count(ct, unix.AF_INET); err != nil || c != 2 {
				t.Errorf("Count = %d, %v; want 2", c, err)
			}
			if n, err := DeleteFiltered(ct, unix.AF_INET); n != 0 || err != nil {
				t.Errorf("DeleteFiltered with no filters = %d, %v; want 0, nil", n, err)
			}
		})
	}
}

// BenchmarkDeleteEntriesMatch measures the userspace side of a batch deletion: building the
// flow set and matching it against a dumped table (the kernel round trips are excluded).
func BenchmarkDeleteEntriesMatch(b *testing.B) {
	for _, size := range []struct{ table, del int }{{10000, 100}, {100000, 1000}} {
		b.Run(fmt.Sprintf("table=%d/delete=%d", size.table, size.del), func(b *testing.B) {
			table := manyFlows(size.table)
			del := table[:size.del]
			b.ReportAllocs()
			for b.Loop() {
				set := NewFlowSet(del)
				n := 0
				for _, f := range table {
					if set.MatchConntrackFlow(f) {
						n++
					}
				}
				if n != size.del {
					b.Fatalf("matched %d, want %d", n, size.del)
				}
			}
		})
	}
}
