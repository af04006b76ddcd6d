package util

import "net"

// NetworkInterfacer lists the host's interface addresses; it exists so tests
// can substitute a fake host.
type NetworkInterfacer interface {
	InterfaceAddrs() ([]net.Addr, error)
}

// RealNetwork reads the addresses of the current network namespace.
type RealNetwork struct{}

// InterfaceAddrs implements NetworkInterfacer.
func (RealNetwork) InterfaceAddrs() ([]net.Addr, error) {
	return net.InterfaceAddrs()
}

var _ NetworkInterfacer = RealNetwork{}
var _ NetworkInterfacer = &RealNetwork{}
