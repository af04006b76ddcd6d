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

// StaticNetwork is a NetworkInterfacer with a fixed list of addresses. A dry
// run computing the rules of a node other than the host it runs on (from
// manifests, or for `kube-proxy trace`) uses it with that node's addresses:
// the host's own interfaces would put the wrong addresses, or none, into
// the NodePort rules.
type StaticNetwork struct {
	IPs []net.IP
}

// InterfaceAddrs implements NetworkInterfacer: each IP as a host prefix.
func (n StaticNetwork) InterfaceAddrs() ([]net.Addr, error) {
	addrs := make([]net.Addr, 0, len(n.IPs))
	for _, ip := range n.IPs {
		bits := 8 * net.IPv6len
		if ip.To4() != nil {
			bits = 8 * net.IPv4len
		}
		addrs = append(addrs, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
	}
	return addrs, nil
}

var _ NetworkInterfacer = StaticNetwork{}
