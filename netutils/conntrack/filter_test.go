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
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// mkFlow builds a flow from "ip:port" strings: the client's view (orig) and the answering side
// (reply source). The reply destination mirrors the original source, as without SNAT.
func mkFlow(proto uint8, origSrc, origDst, replySrc string) *netlink.ConntrackFlow {
	os, od, rs := netip.MustParseAddrPort(origSrc), netip.MustParseAddrPort(origDst), netip.MustParseAddrPort(replySrc)
	fam := uint8(unix.AF_INET)
	if od.Addr().Is6() {
		fam = unix.AF_INET6
	}
	return &netlink.ConntrackFlow{
		FamilyType: fam,
		Forward: netlink.IPTuple{Protocol: proto, SrcIP: net.IP(os.Addr().AsSlice()), SrcPort: os.Port(),
			DstIP: net.IP(od.Addr().AsSlice()), DstPort: od.Port()},
		Reverse: netlink.IPTuple{Protocol: proto, SrcIP: net.IP(rs.Addr().AsSlice()), SrcPort: rs.Port(),
			DstIP: net.IP(os.Addr().AsSlice()), DstPort: os.Port()},
	}
}

var (
	udpDNAT    = mkFlow(unix.IPPROTO_UDP, "198.18.0.1:40000", "198.18.10.1:53", "198.18.1.5:5353")
	tcpDNAT    = mkFlow(unix.IPPROTO_TCP, "198.18.0.1:40001", "198.18.10.1:53", "198.18.1.5:5353")
	udpDirect  = mkFlow(unix.IPPROTO_UDP, "198.18.0.1:40002", "198.18.1.5:5353", "198.18.1.5:5353")
	udpPortNAT = mkFlow(unix.IPPROTO_UDP, "198.18.0.1:40003", "198.18.1.5:80", "198.18.1.5:8080")
	udp6DNAT   = mkFlow(unix.IPPROTO_UDP, "[fd00::1]:40000", "[fd00:10::1]:53", "[fd00:1::5]:5353")
)

func TestFilter(t *testing.T) {
	svc := netip.MustParseAddr("198.18.10.1")
	ep := netip.MustParseAddr("198.18.1.5")
	tests := []struct {
		name   string
		filter Filter
		flow   *netlink.ConntrackFlow
		want   bool
	}{
		{name: "zero filter matches all", filter: Filter{}, flow: tcpDNAT, want: true},
		{name: "zero filter rejects nil", filter: Filter{}, flow: nil, want: false},
		{name: "protocol match", filter: Filter{Protocol: unix.IPPROTO_UDP}, flow: udpDNAT, want: true},
		{name: "protocol mismatch", filter: Filter{Protocol: unix.IPPROTO_UDP}, flow: tcpDNAT, want: false},
		{name: "orig dst ip", filter: Filter{OrigDstIP: svc}, flow: udpDNAT, want: true},
		{name: "orig dst ip mismatch", filter: Filter{OrigDstIP: svc}, flow: udpDirect, want: false},
		{name: "orig dst 4in6 form", filter: Filter{OrigDstIP: netip.MustParseAddr("::ffff:198.18.10.1")}, flow: udpDNAT, want: true},
		{name: "orig dst port", filter: Filter{OrigDstIP: svc, OrigDstPort: 53}, flow: udpDNAT, want: true},
		{name: "orig dst port mismatch", filter: Filter{OrigDstIP: svc, OrigDstPort: 54}, flow: udpDNAT, want: false},
		{name: "reply src ip and port", filter: Filter{ReplySrcIP: ep, ReplySrcPort: 5353}, flow: udpDNAT, want: true},
		{name: "reply src port mismatch", filter: Filter{ReplySrcIP: ep, ReplySrcPort: 5354}, flow: udpDNAT, want: false},
		{name: "reply src ip mismatch", filter: Filter{ReplySrcIP: svc}, flow: udpDNAT, want: false},
		{name: "dnat only, dnated", filter: Filter{NAT: DNATed}, flow: udpDNAT, want: true},
		{name: "dnat only, direct", filter: Filter{NAT: DNATed}, flow: udpDirect, want: false},
		{name: "dnat only, port-only translation", filter: Filter{NAT: DNATed}, flow: udpPortNAT, want: true},
		{name: "not dnated, direct", filter: Filter{NAT: NotDNATed}, flow: udpDirect, want: true},
		{name: "not dnated, dnated", filter: Filter{NAT: NotDNATed}, flow: udpDNAT, want: false},
		{name: "v4 filter never matches v6 flow", filter: Filter{OrigDstIP: svc}, flow: udp6DNAT, want: false},
		{name: "v6 full match", filter: Filter{Protocol: unix.IPPROTO_UDP, OrigDstIP: netip.MustParseAddr("fd00:10::1"), OrigDstPort: 53,
			ReplySrcIP: netip.MustParseAddr("fd00:1::5"), ReplySrcPort: 5353, NAT: DNATed}, flow: udp6DNAT, want: true},
		{name: "all fields v4", filter: Filter{Protocol: unix.IPPROTO_UDP, OrigDstIP: svc, OrigDstPort: 53, ReplySrcIP: ep, ReplySrcPort: 5353, NAT: DNATed}, flow: udpDNAT, want: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.filter.MatchConntrackFlow(tc.flow); got != tc.want {
				t.Errorf("%+v.MatchConntrackFlow(%v) = %v, want %v", tc.filter, tc.flow, got, tc.want)
			}
		})
	}
}

func TestFlowSet(t *testing.T) {
	set := NewFlowSet([]*netlink.ConntrackFlow{udpDNAT, nil, udp6DNAT, udpDNAT})
	if set.Len() != 2 {
		t.Errorf("Len() = %d, want 2 (nil skipped, duplicate collapsed)", set.Len())
	}
	// The kernel reports 4-byte IPv4 addresses; a caller may hold the 16-byte form.
	sixteen := *udpDNAT
	sixteen.Forward.SrcIP = net.ParseIP("198.18.0.1")
	sixteen.Forward.DstIP = net.ParseIP("198.18.10.1")
	// Counters and timeouts move between list and delete and must not matter.
	counted := *udpDNAT
	counted.Forward.Packets, counted.Reverse.Bytes, counted.TimeOut, counted.Mark = 10, 999, 30, 7

	mutate := func(fn func(f *netlink.ConntrackFlow)) *netlink.ConntrackFlow {
		c := *udpDNAT
		fn(&c)
		return &c
	}
	tests := []struct {
		name string
		flow *netlink.ConntrackFlow
		want bool
	}{
		{name: "same", flow: udpDNAT, want: true},
		{name: "v6 member", flow: udp6DNAT, want: true},
		{name: "16-byte IPv4 form", flow: &sixteen, want: true},
		{name: "counters differ", flow: &counted, want: true},
		{name: "nil", flow: nil, want: false},
		{name: "other protocol", flow: tcpDNAT, want: false},
		{name: "orig src port", flow: mutate(func(f *netlink.ConntrackFlow) { f.Forward.SrcPort++ }), want: false},
		{name: "orig dst port", flow: mutate(func(f *netlink.ConntrackFlow) { f.Forward.DstPort++ }), want: false},
		{name: "orig src ip", flow: mutate(func(f *netlink.ConntrackFlow) { f.Forward.SrcIP = net.IPv4(198, 18, 0, 9) }), want: false},
		{name: "orig dst ip", flow: mutate(func(f *netlink.ConntrackFlow) { f.Forward.DstIP = net.IPv4(198, 18, 10, 9) }), want: false},
		{name: "reply src ip (other endpoint)", flow: mutate(func(f *netlink.ConntrackFlow) { f.Reverse.SrcIP = net.IPv4(198, 18, 1, 6) }), want: false},
		{name: "reply src port", flow: mutate(func(f *netlink.ConntrackFlow) { f.Reverse.SrcPort++ }), want: false},
		{name: "reply dst ip (snat)", flow: mutate(func(f *netlink.ConntrackFlow) { f.Reverse.DstIP = net.IPv4(198, 18, 0, 254) }), want: false},
		{name: "reply dst port", flow: mutate(func(f *netlink.ConntrackFlow) { f.Reverse.DstPort++ }), want: false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := set.MatchConntrackFlow(tc.flow); got != tc.want {
				t.Errorf("MatchConntrackFlow(%v) = %v, want %v", tc.flow, got, tc.want)
			}
		})
	}
}

func TestSelect(t *testing.T) {
	all := []*netlink.ConntrackFlow{udpDNAT, tcpDNAT, udpDirect, udpPortNAT, udp6DNAT}
	tests := []struct {
		name    string
		filters []netlink.CustomConntrackFilter
		want    []*netlink.ConntrackFlow
	}{
		{name: "no filters selects nothing", want: nil},
		{name: "udp dnat", filters: []netlink.CustomConntrackFilter{Filter{Protocol: unix.IPPROTO_UDP, NAT: DNATed}},
			want: []*netlink.ConntrackFlow{udpDNAT, udpPortNAT, udp6DNAT}},
		{name: "union keeps order and has no duplicates",
			filters: []netlink.CustomConntrackFilter{Filter{Protocol: unix.IPPROTO_TCP}, Filter{OrigDstPort: 53}},
			want:    []*netlink.ConntrackFlow{udpDNAT, tcpDNAT, udp6DNAT}},
		{name: "flow set", filters: []netlink.CustomConntrackFilter{NewFlowSet([]*netlink.ConntrackFlow{udpDirect})},
			want: []*netlink.ConntrackFlow{udpDirect}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Select(all, tc.filters...)
			if len(got) != len(tc.want) {
				t.Fatalf("Select = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("Select[%d] = %v, want %v", i, got[i], tc.want[i])
				}
			}
		})
	}
}
