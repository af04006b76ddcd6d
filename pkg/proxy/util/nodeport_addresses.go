package util

import (
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	netutils "k8s.io/utils/net"
)

// NodePortAddresses is the set of CIDRs, for one IP family, whose local
// addresses accept NodePort traffic.
type NodePortAddresses struct {
	cidrStrings []string
	cidrs       []*net.IPNet

	containsIPv4Loopback     bool
	containsExplicitLoopback bool
	matchAll                 bool
}

var ipv4LoopbackStart = net.IPv4(127, 0, 0, 0)

// NewNodePortAddresses keeps the entries of cidrStrings that belong to family.
// With no such entry it matches every address of the family. cidrStrings are
// expected to be validated already; unparsable entries are ignored.
func NewNodePortAddresses(family v1.IPFamily, cidrStrings []string) *NodePortAddresses {
	npa := &NodePortAddresses{}
	wantV4 := family == v1.IPv4Protocol
	for _, s := range cidrStrings {
		_, cidr, err := netutils.ParseCIDRSloppy(s)
		if err != nil || netutils.IsIPv4CIDR(cidr) != wantV4 {
			continue
		}
		npa.cidrStrings = append(npa.cidrStrings, s)
		if cidr.IP.IsLoopback() {
			npa.containsExplicitLoopback = true
		}
		if wantV4 && (cidr.IP.IsLoopback() || cidr.Contains(ipv4LoopbackStart)) {
			npa.containsIPv4Loopback = true
		}
		if !npa.matchAll {
			if IsZeroCIDR(cidr) {
				// A zero CIDR subsumes the rest; keep only it for matching.
				npa.cidrs = []*net.IPNet{cidr}
				npa.matchAll = true
			} else {
				npa.cidrs = append(npa.cidrs, cidr)
			}
		}
	}
	if len(npa.cidrStrings) == 0 {
		zero := IPv6ZeroCIDR
		if wantV4 {
			zero = IPv4ZeroCIDR
			npa.containsIPv4Loopback = true
		}
		_, cidr, _ := netutils.ParseCIDRSloppy(zero)
		npa.cidrStrings = []string{zero}
		npa.cidrs = []*net.IPNet{cidr}
		npa.matchAll = true
	}
	return npa
}

// String returns the CIDRs in use, e.g. "[10.0.0.0/8 192.168.1.0/24]".
func (npa *NodePortAddresses) String() string {
	return fmt.Sprintf("%v", npa.cidrStrings)
}

// MatchAll reports whether every address of the family is a NodePort address.
func (npa *NodePortAddresses) MatchAll() bool {
	return npa.matchAll
}

// GetNodeIPs returns the host addresses (from nw) inside the configured CIDRs,
// without duplicates.
func (npa *NodePortAddresses) GetNodeIPs(nw NetworkInterfacer) ([]net.IP, error) {
	addrs, err := nw.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing host interface addresses: %w", err)
	}
	seen := make(map[string]bool, len(addrs))
	var ips []net.IP
	for _, a := range addrs {
		ip := addrIP(a)
		if ip == nil {
			continue
		}
		key := ip.String()
		if seen[key] {
			continue
		}
		for _, cidr := range npa.cidrs {
			if cidr.Contains(ip) {
				seen[key] = true
				ips = append(ips, ip)
				break
			}
		}
	}
	if ips == nil {
		ips = []net.IP{}
	}
	return ips, nil
}

// ContainsIPv4Loopback reports whether some CIDR covers an IPv4 loopback address.
func (npa *NodePortAddresses) ContainsIPv4Loopback() bool {
	return npa.containsIPv4Loopback
}

// ContainsExplicitLoopback reports whether a configured CIDR is itself a
// loopback network (as opposed to a zero CIDR that merely includes it).
func (npa *NodePortAddresses) ContainsExplicitLoopback() bool {
	return npa.containsExplicitLoopback
}
