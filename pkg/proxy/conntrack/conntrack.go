//go:build linux

package conntrack

import (
	"github.com/vishvananda/netlink"

	netconntrack "k8s.io/net-utils/conntrack"
)

// Interface lists and deletes conntrack entries. It is the net-utils
// interface, so implementations of either are interchangeable.
type Interface = netconntrack.Interface

// New returns an Interface backed by netlink in the current network
// namespace.
func New() Interface {
	return netconntrack.New()
}

// NewFake returns an Interface over an empty table: listing finds nothing
// and deleting deletes nothing. Dry runs use it to touch no kernel. Tests
// that seed entries or check deletions use k8s.io/net-utils/conntrack/testing;
// production code never imports a testing package, which would also tie
// this package to Linux.
func NewFake() Interface { return emptyTable{} }

type emptyTable struct{}

func (emptyTable) ListEntries(uint8) ([]*netlink.ConntrackFlow, error) { return nil, nil }

func (emptyTable) DeleteEntries(uint8, []*netlink.ConntrackFlow) (int, error) { return 0, nil }
