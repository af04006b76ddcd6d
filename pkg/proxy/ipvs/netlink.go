//go:build linux

package ipvs

import "k8s.io/apimachinery/pkg/util/sets"

// NetLinkHandle manages the dummy interface the virtual addresses are bound
// to and lists the node's addresses. Address lists hold only the handle's
// family, without loopback and IPv6 link-local addresses.
type NetLinkHandle interface {
	// EnsureAddressBind binds address to devName; exist reports it was already bound.
	EnsureAddressBind(address, devName string) (exist bool, err error)
	// UnbindAddress removes address from devName.
	UnbindAddress(address, devName string) error
	// EnsureDummyDevice creates the dummy device devName; exist reports it was already there.
	EnsureDummyDevice(devName string) (exist bool, err error)
	// DeleteDummyDevice deletes the dummy device devName, if present.
	DeleteDummyDevice(devName string) error
	// ListBindAddress returns every address bound to devName.
	ListBindAddress(devName string) ([]string, error)
	// GetAllLocalAddresses returns the node's addresses.
	GetAllLocalAddresses() (sets.Set[string], error)
	// GetLocalAddresses returns dev's addresses.
	GetLocalAddresses(dev string) (sets.Set[string], error)
	// GetAllLocalAddressesExcept returns the addresses of every interface but
	// dev. It is not GetAllLocalAddresses minus GetLocalAddresses: an address
	// may be on dev and on another interface (https://issues.k8s.io/114815).
	GetAllLocalAddressesExcept(dev string) (sets.Set[string], error)
}
