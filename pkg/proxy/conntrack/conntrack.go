package conntrack

import (
	netconntrack "k8s.io/net-utils/conntrack"
	fakeconntrack "k8s.io/net-utils/conntrack/testing"
)

// Interface lists and deletes conntrack entries. It is the net-utils
// interface, so implementations of either are interchangeable.
type Interface = netconntrack.Interface

// New returns an Interface backed by netlink in the current network
// namespace.
func New() Interface {
	return netconntrack.New()
}

// NewFake returns an in-memory Interface with an empty table. Tests that
// need to seed entries can use k8s.io/net-utils/conntrack/testing directly.
func NewFake() Interface {
	return fakeconntrack.NewFake()
}
