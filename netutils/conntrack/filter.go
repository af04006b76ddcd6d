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
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// flowKey identifies an entry by protocol and both tuples. It is a comparable value rather
// than a formatted string, so building and probing a set of thousands of flows does not
// allocate per flow.
type flowKey struct {
	proto                                        uint8
	origSrc, origDst, replySrc, replyDst         netip.Addr
	origSport, origDport, replySport, replyDport uint16
}

// addr converts a netlink address to netip form. IPv4 addresses are unmapped so that a flow
// built with the 16-byte form of net.ParseIP matches the 4-byte form the kernel reports.
func addr(ip net.IP) netip.Addr {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}
	}
	return a.Unmap()
}

func keyOf(flow *netlink.ConntrackFlow) flowKey {
	return flowKey{
		proto:      flow.Forward.Protocol,
		origSrc:    addr(flow.Forward.SrcIP),
		origDst:    addr(flow.Forward.DstIP),
		origSport:  flow.Forward.SrcPort,
		origDport:  flow.Forward.DstPort,
		replySrc:   addr(flow.Reverse.SrcIP),
		replyDst:   addr(flow.Reverse.DstIP),
		replySport: flow.Reverse.SrcPort,
		replyDport: flow.Reverse.DstPort,
	}
}

// FlowSet matches exactly the flows it was built from: same protocol and the same addresses
// and ports in both directions. Counters, timeouts and marks are ignored, so an entry read by
// an earlier ListEntries still matches after its counters moved on.
type FlowSet struct {
	keys map[flowKey]struct{}
}

var _ netlink.CustomConntrackFilter = &FlowSet{}

// NewFlowSet returns a FlowSet of flows. Nil flows are ignored.
func NewFlowSet(flows []*netlink.ConntrackFlow) *FlowSet {
	s := &FlowSet{keys: make(map[flowKey]struct{}, len(flows))}
	for _, f := range flows {
		if f != nil {
			s.keys[keyOf(f)] = struct{}{}
		}
	}
	return s
}

// Len returns the number of distinct flows in the set.
func (s *FlowSet) Len() int { return len(s.keys) }

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (s *FlowSet) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow == nil {
		return false
	}
	_, ok := s.keys[keyOf(flow)]
	return ok
}

// NATMatch selects flows by whether their destination was translated.
type NATMatch uint8

const (
	// AnyNAT matches flows whether or not they were DNATed.
	AnyNAT NATMatch = iota
	// DNATed matches flows whose reply source differs from the original destination, address
	// or port: the connection was sent to a service frontend and redirected to a backend.
	DNATed
	// NotDNATed matches flows that reached their original destination unchanged.
	NotDNATed
)

// Filter matches conntrack entries field by field, like conntrack(8)'s -p, --orig-dst,
// --orig-port-dst, --reply-src, --reply-port-src and --dst-nat options. Zero-valued fields
// match anything, so the zero Filter matches every entry.
type Filter struct {
	// Protocol is an IP protocol number (unix.IPPROTO_UDP, ...); 0 matches any.
	Protocol uint8
	// OrigDstIP is the destination the client addressed, e.g. a service IP.
	OrigDstIP netip.Addr
	// OrigDstPort is the destination port the client addressed; 0 matches any.
	OrigDstPort uint16
	// ReplySrcIP is the address answering the connection, e.g. the chosen endpoint.
	ReplySrcIP netip.Addr
	// ReplySrcPort is the port answering the connection; 0 matches any.
	ReplySrcPort uint16
	// NAT restricts the match to DNATed or un-NATed flows.
	NAT NATMatch
}

var _ netlink.CustomConntrackFilter = Filter{}

// MatchConntrackFlow implements netlink.CustomConntrackFilter.
func (f Filter) MatchConntrackFlow(flow *netlink.ConntrackFlow) bool {
	if flow == nil {
		return false
	}
	if f.Protocol != 0 && flow.Forward.Protocol != f.Protocol {
		return false
	}
	if f.OrigDstPort != 0 && flow.Forward.DstPort != f.OrigDstPort {
		return false
	}
	if f.ReplySrcPort != 0 && flow.Reverse.SrcPort != f.ReplySrcPort {
		return false
	}
	if f.OrigDstIP.IsValid() && addr(flow.Forward.DstIP) != f.OrigDstIP.Unmap() {
		return false
	}
	if f.ReplySrcIP.IsValid() && addr(flow.Reverse.SrcIP) != f.ReplySrcIP.Unmap() {
		return false
	}
	switch f.NAT {
	case DNATed:
		return IsDNATed(flow)
	case NotDNATed:
		return !IsDNATed(flow)
	}
	return true
}

// IsDNATed reports whether the flow's destination was translated: the reply comes from an
// address or port other than the one the client addressed.
func IsDNATed(flow *netlink.ConntrackFlow) bool {
	return flow.Reverse.SrcPort != flow.Forward.DstPort || addr(flow.Reverse.SrcIP) != addr(flow.Forward.DstIP)
}
