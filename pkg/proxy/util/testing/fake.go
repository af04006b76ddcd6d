package testing

import (
	"net"
	"sort"
)

// FakeNetwork is a NetworkInterfacer whose addresses are set by the test.
type FakeNetwork struct {
	NetworkInterfaces []net.Interface
	// Address maps an interface name to its addresses.
	Address map[string][]net.Addr
}

// NewFakeNetwork returns a FakeNetwork with no interfaces.
func NewFakeNetwork() *FakeNetwork {
	return &FakeNetwork{
		NetworkInterfaces: []net.Interface{},
		Address:           map[string][]net.Addr{},
	}
}

// AddInterfaceAddr adds intf with addrs.
func (f *FakeNetwork) AddInterfaceAddr(intf *net.Interface, addrs []net.Addr) {
	f.NetworkInterfaces = append(f.NetworkInterfaces, *intf)
	f.Address[intf.Name] = addrs
}

// InterfaceAddrs returns every address of every interface, ordered by
// interface name so results are reproducible.
func (f *FakeNetwork) InterfaceAddrs() ([]net.Addr, error) {
	names := make([]string, 0, len(f.Address))
	for n := range f.Address {
		names = append(names, n)
	}
	sort.Strings(names)
	out := []net.Addr{}
	for _, n := range names {
		out = append(out, f.Address[n]...)
	}
	return out, nil
}
