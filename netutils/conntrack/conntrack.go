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
	"sync"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
)

// Interface lists and deletes conntrack entries of one address family (unix.AF_INET or
// unix.AF_INET6).
type Interface interface {
	// ListEntries returns the entries of the family. If the kernel interrupted the dump on
	// every attempt, it returns the partial result together with an error that matches
	// unix.EINTR (errors.Is), so callers may still act on what was read.
	ListEntries(ipFamily uint8) ([]*netlink.ConntrackFlow, error)
	// DeleteEntries deletes exactly the given entries (matched on protocol and both tuples)
	// and returns how many were deleted. Entries already gone are not an error.
	DeleteEntries(ipFamily uint8, flows []*netlink.ConntrackFlow) (int, error)
}

// maxAttempts bounds retries of dumps the kernel interrupted because the table changed
// underneath them (NLM_F_DUMP_INTR); a busy table makes this common and transient.
const maxAttempts = 5

// handle is the subset of *netlink.Handle used here, so tests can count netlink round trips.
type handle interface {
	ConntrackTableList(netlink.ConntrackTableType, netlink.InetFamily) ([]*netlink.ConntrackFlow, error)
	ConntrackDeleteFilters(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error)
}

// Conntracker is the netlink implementation of Interface.
type Conntracker struct {
	// mu serialises requests: a netlink socket answers one request at a time, and interleaved
	// dumps on a shared socket would corrupt each other.
	mu     sync.Mutex
	h      handle
	exact  exactDeleter // nil: always delete through a table dump
	closer func()
	logger klog.Logger
}

var _ Interface = &Conntracker{}

// New returns an Interface for the network namespace of the calling thread at the time of each
// request (in practice the host namespace). It opens a netlink socket per request, like
// upstream, so it holds no resources and needs no Close.
func New() Interface {
	return newConntracker(&netlink.Handle{}, &nlExact{}, nil)
}

// NewInNamespace returns a Conntracker bound to the network namespace ns, whatever namespace
// the calling threads are in. Close it to release its netlink socket.
func NewInNamespace(ns netns.NsHandle) (*Conntracker, error) {
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_NETFILTER)
	if err != nil {
		return nil, fmt.Errorf("opening netfilter netlink socket in netns %s: %w", ns, err)
	}
	// A second socket for single-entry requests: the handle keeps its own private.
	s, err := nl.GetNetlinkSocketAt(ns, netns.None(), unix.NETLINK_NETFILTER)
	if err != nil {
		h.Close()
		return nil, fmt.Errorf("opening netfilter netlink socket in netns %s: %w", ns, err)
	}
	exact := &nlExact{sockets: map[int]*nl.SocketHandle{unix.NETLINK_NETFILTER: {Socket: s}}}
	return newConntracker(h, exact, func() { h.Close(); s.Close() }), nil
}

func newConntracker(h handle, exact exactDeleter, closer func()) *Conntracker {
	return &Conntracker{h: h, exact: exact, closer: closer, logger: klog.Background().WithName("conntrack")}
}

// Close releases the netlink socket of a Conntracker made by NewInNamespace.
func (ct *Conntracker) Close() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	if ct.closer != nil {
		ct.closer()
		ct.closer = nil
	}
}

func checkFamily(ipFamily uint8) error {
	if ipFamily != unix.AF_INET && ipFamily != unix.AF_INET6 {
		return fmt.Errorf("unsupported conntrack address family %d: want AF_INET (%d) or AF_INET6 (%d)", ipFamily, unix.AF_INET, unix.AF_INET6)
	}
	return nil
}

// ListEntries implements Interface.
func (ct *Conntracker) ListEntries(ipFamily uint8) ([]*netlink.ConntrackFlow, error) {
	if err := checkFamily(ipFamily); err != nil {
		return nil, err
	}
	ct.mu.Lock()
	defer ct.mu.Unlock()
	var flows []*netlink.ConntrackFlow
	var err error
	for range maxAttempts {
		flows, err = ct.h.ConntrackTableList(netlink.ConntrackTable, netlink.InetFamily(ipFamily))
		if err == nil || !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return flows, fmt.Errorf("listing conntrack entries of family %d: %w", ipFamily, err)
	}
	return flows, nil
}

// DeleteEntries implements Interface. Up to maxExactDeletes flows of port-based protocols are
// deleted one by one (two round trips each, independent of the table's size); larger batches
// cost one table dump plus one delete request per matching entry. Either way an entry is
// deleted only if both its tuples still match, so a newer connection that reuses a stale
// flow's original tuple survives.
func (ct *Conntracker) DeleteEntries(ipFamily uint8, flows []*netlink.ConntrackFlow) (int, error) {
	if len(flows) == 0 {
		return 0, nil
	}
	if err := checkFamily(ipFamily); err != nil {
		return 0, err
	}
	if ct.exact != nil && len(flows) <= maxExactDeletes && !slices.ContainsFunc(flows, func(f *netlink.ConntrackFlow) bool {
		return f != nil && !portProtocol(f.Forward.Protocol)
	}) {
		return ct.deleteEach(ipFamily, flows)
	}
	return ct.deleteMatching(ipFamily, NewFlowSet(flows))
}

func (ct *Conntracker) deleteEach(ipFamily uint8, flows []*netlink.ConntrackFlow) (int, error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	seen := make(map[flowKey]bool, len(flows))
	n := 0
	var errs []error
	for _, f := range flows {
		if f == nil {
			continue
		}
		k := keyOf(f)
		if seen[k] {
			continue
		}
		seen[k] = true
		deleted, err := ct.exact.deleteExact(ipFamily, f)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if deleted {
			n++
			if v := ct.logger.V(6); v.Enabled() {
				v.Info("Deleted conntrack entry", "flow", f.String())
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return n, fmt.Errorf("deleting conntrack entries of family %d (%d deleted, %d failed): %w", ipFamily, n, len(errs), err)
	}
	return n, nil
}

// DeleteFiltered deletes the entries of the family matching any of filters in a single table
// dump, and returns how many were deleted.
func (ct *Conntracker) DeleteFiltered(ipFamily uint8, filters ...netlink.CustomConntrackFilter) (int, error) {
	if len(filters) == 0 {
		return 0, nil
	}
	if err := checkFamily(ipFamily); err != nil {
		return 0, err
	}
	return ct.deleteMatching(ipFamily, filters...)
}

func (ct *Conntracker) deleteMatching(ipFamily uint8, filters ...netlink.CustomConntrackFilter) (int, error) {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	logged := make([]netlink.CustomConntrackFilter, len(filters))
	for i, f := range filters {
		logged[i] = loggingFilter{f: f, logger: ct.logger}
	}
	var total uint
	var err error
	// An interrupted dump still deleted what it saw; retrying picks up the rest, and entries
	// deleted by the first pass no longer match, so the counts add up.
	for range maxAttempts {
		var n uint
		n, err = ct.h.ConntrackDeleteFilters(netlink.ConntrackTable, netlink.InetFamily(ipFamily), logged...)
		total += n
		if err == nil || !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		return int(total), fmt.Errorf("deleting conntrack entries of family %d (%d deleted before the error): %w", ipFamily, total, err)
	}
	return int(total), nil
}

// loggingFilter records each entry chosen for deletion at high verbosity: when a connection
// breaks, this is how an operator tells whether kube-proxy removed its entry.
type loggingFilter struct {
	f      netlink.CustomConntrackFilter
	logger klog.Logger
}

func (l loggingFilter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if !l.f.MatchConntrackFlow(flow) {
		return false
	}
	if v := l.logger.V(6); v.Enabled() {
		v.Info("Deleting conntrack entry", "flow", flow.String())
	}
	return true
}

// Count returns the number of entries of the family.
func (ct *Conntracker) Count(ipFamily uint8) (int, error) {
	return Count(ct, ipFamily)
}

// Count returns the number of entries ct lists for the family.
func Count(ct Interface, ipFamily uint8) (int, error) {
	flows, err := ct.ListEntries(ipFamily)
	if err != nil {
		return 0, err
	}
	return len(flows), nil
}

// DeleteFiltered deletes the entries of the family that match any of filters and returns how
// many were deleted. With a *Conntracker it needs one table dump; with any other Interface it
// lists, selects and calls DeleteEntries.
func DeleteFiltered(ct Interface, ipFamily uint8, filters ...netlink.CustomConntrackFilter) (int, error) {
	if c, ok := ct.(*Conntracker); ok {
		return c.DeleteFiltered(ipFamily, filters...)
	}
	if len(filters) == 0 {
		return 0, nil
	}
	flows, listErr := ct.ListEntries(ipFamily)
	if listErr != nil && !errors.Is(listErr, unix.EINTR) {
		return 0, listErr
	}
	n, err := ct.DeleteEntries(ipFamily, Select(flows, filters...))
	return n, errors.Join(listErr, err)
}

// Select returns the flows matching any of filters, in their original order.
func Select(flows []*netlink.ConntrackFlow, filters ...netlink.CustomConntrackFilter) []*netlink.ConntrackFlow {
	var out []*netlink.ConntrackFlow
	for _, flow := range flows {
		for _, f := range filters {
			if f.MatchConntrackFlow(flow) {
				out = append(out, flow)
				break
			}
		}
	}
	return out
}
