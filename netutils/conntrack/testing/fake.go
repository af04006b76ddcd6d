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

// Package testing provides an in-memory conntrack.Interface that records what callers listed
// and deleted.

package testing

import (
	"fmt"
	"slices"
	"sync"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"k8s.io/net-utils/conntrack"
)

// Fake is an in-memory conntrack table. Deletion uses conntrack.FlowSet, the same exact-flow
// match as the real implementation, so a test that passes against the fake deletes the same
// entries on a kernel.
type Fake struct {
	mu      sync.Mutex
	entries []*netlink.ConntrackFlow
	deleted []*netlink.ConntrackFlow

	// ListErr and DeleteErr, when set, are returned by every ListEntries / DeleteEntries call.
	// ListEntries still returns the table with ListErr, as the real one does for an
	// interrupted dump.
	ListErr   error
	DeleteErr error

	// ListCalls and DeleteCalls count calls, to assert that a caller batches its deletions.
	ListCalls   int
	DeleteCalls int
}

var _ conntrack.Interface = &Fake{}

// NewFake returns a Fake holding the given entries.
func NewFake(entries ...*netlink.ConntrackFlow) *Fake {
	f := &Fake{}
	f.AddEntries(entries...)
	return f
}

// familyOf returns the flow's address family, deriving it from the addresses when a test left
// FamilyType unset.
func familyOf(flow *netlink.ConntrackFlow) uint8 {
	if flow.FamilyType != 0 {
		return flow.FamilyType
	}
	if flow.Forward.SrcIP.To4() != nil || flow.Forward.DstIP.To4() != nil {
		return unix.AF_INET
	}
	return unix.AF_INET6
}

// AddEntries appends entries to the table.
func (f *Fake) AddEntries(entries ...*netlink.ConntrackFlow) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range entries {
		if e != nil {
			f.entries = append(f.entries, e)
		}
	}
}

// Entries returns the current table, all families.
func (f *Fake) Entries() []*netlink.ConntrackFlow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.entries)
}

// Deleted returns every entry deleted so far, in deletion order.
func (f *Fake) Deleted() []*netlink.ConntrackFlow {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.deleted)
}

// Reset empties the table and the deletion record and zeroes the call counters.
func (f *Fake) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.entries, f.deleted = nil, nil
	f.ListCalls, f.DeleteCalls = 0, 0
}

func checkFamily(ipFamily uint8) error {
	if ipFamily != unix.AF_INET && ipFamily != unix.AF_INET6 {
		return fmt.Errorf("unsupported conntrack address family %d", ipFamily)
	}
	return nil
}

// ListEntries implements conntrack.Interface.
func (f *Fake) ListEntries(ipFamily uint8) ([]*netlink.ConntrackFlow, error) {
	if err := checkFamily(ipFamily); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ListCalls++
	var out []*netlink.ConntrackFlow
	for _, e := range f.entries {
		if familyOf(e) == ipFamily {
			out = append(out, e)
		}
	}
	return out, f.ListErr
}

// DeleteEntries implements conntrack.Interface.
func (f *Fake) DeleteEntries(ipFamily uint8, flows []*netlink.ConntrackFlow) (int, error) {
	if len(flows) == 0 {
		return 0, nil
	}
	if err := checkFamily(ipFamily); err != nil {
		return 0, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.DeleteCalls++
	if f.DeleteErr != nil {
		return 0, f.DeleteErr
	}
	set := conntrack.NewFlowSet(flows)
	n := 0
	f.entries = slices.DeleteFunc(f.entries, func(e *netlink.ConntrackFlow) bool {
		if familyOf(e) == ipFamily && set.MatchConntrackFlow(e) {
			f.deleted = append(f.deleted, e)
			n++
			return true
		}
		return false
	})
	return n, nil
}
