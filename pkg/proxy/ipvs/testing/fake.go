package testing

import (
	"fmt"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
	netutils "k8s.io/utils/net"
)

// FakeNetlinkHandle is an in-memory NetLinkHandle: interfaces are names with
// address lists; the dummy interface exists once EnsureDummyDevice made it.
type FakeNetlinkHandle struct {
	mu             sync.Mutex
	localAddresses map[string][]string

	// IsIPv6 selects the family the address listings return.
	IsIPv6 bool
}

// NewFakeNetlinkHandle returns a handle without interfaces.
func NewFakeNetlinkHandle(isIPv6 bool) *FakeNetlinkHandle {
	return &FakeNetlinkHandle{localAddresses: map[string][]string{}, IsIPv6: isIPv6}
}

// EnsureAddressBind implements NetLinkHandle.
func (h *FakeNetlinkHandle) EnsureAddressBind(address, devName string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if devName == "" {
		return false, fmt.Errorf("device name can't be empty")
	}
	addrs, ok := h.localAddresses[devName]
	if !ok {
		return false, fmt.Errorf("error bind address: %s to a non-exist interface: %s", address, devName)
	}
	if slices.Contains(addrs, address) {
		return true, nil
	}
	h.localAddresses[devName] = append(addrs, address)
	return false, nil
}

// UnbindAddress implements NetLinkHandle.
func (h *FakeNetlinkHandle) UnbindAddress(address, devName string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if devName == "" {
		return fmt.Errorf("device name can't be empty")
	}
	addrs, ok := h.localAddresses[devName]
	if !ok {
		return fmt.Errorf("error unbind address: %s from a non-exist interface: %s", address, devName)
	}
	i := slices.Index(addrs, address)
	if i < 0 {
		return fmt.Errorf("address: %s is not found in interface: %s", address, devName)
	}
	h.localAddresses[devName] = slices.Delete(addrs, i, i+1)
	return nil
}

// EnsureDummyDevice implements NetLinkHandle.
func (h *FakeNetlinkHandle) EnsureDummyDevice(devName string) (bool, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if devName == "" {
		return false, fmt.Errorf("device name can't be empty")
	}
	if _, ok := h.localAddresses[devName]; ok {
		return true, nil
	}
	h.localAddresses[devName] = []string{}
	return false, nil
}

// DeleteDummyDevice implements NetLinkHandle.
func (h *FakeNetlinkHandle) DeleteDummyDevice(devName string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if devName == "" {
		return fmt.Errorf("device name can't be empty")
	}
	if _, ok := h.localAddresses[devName]; !ok {
		return fmt.Errorf("error deleting a non-exist interface: %s", devName)
	}
	delete(h.localAddresses, devName)
	return nil
}

// ListBindAddress implements NetLinkHandle.
func (h *FakeNetlinkHandle) ListBindAddress(devName string) ([]string, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if devName == "" {
		return nil, fmt.Errorf("device name can't be empty")
	}
	addrs, ok := h.localAddresses[devName]
	if !ok {
		return nil, fmt.Errorf("error list addresses from a non-exist interface: %s", devName)
	}
	return slices.Clone(addrs), nil
}

// GetLocalAddresses implements NetLinkHandle.
func (h *FakeNetlinkHandle) GetLocalAddresses(dev string) (sets.Set[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.collect(func(name string) bool { return name == dev }), nil
}

// GetAllLocalAddresses implements NetLinkHandle.
func (h *FakeNetlinkHandle) GetAllLocalAddresses() (sets.Set[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.collect(func(string) bool { return true }), nil
}

// GetAllLocalAddressesExcept implements NetLinkHandle.
func (h *FakeNetlinkHandle) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.collect(func(name string) bool { return name != dev }), nil
}

func (h *FakeNetlinkHandle) collect(want func(string) bool) sets.Set[string] {
	res := sets.New[string]()
	for name, addrs := range h.localAddresses {
		if !want(name) {
			continue
		}
		for _, a := range addrs {
			if h.isValidForSet(a) {
				res.Insert(a)
			}
		}
	}
	return res
}

// SetLocalAddresses makes dev an interface holding exactly ips.
func (h *FakeNetlinkHandle) SetLocalAddresses(dev string, ips ...string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if dev == "" {
		return fmt.Errorf("device name can't be empty")
	}
	if h.localAddresses == nil {
		h.localAddresses = map[string][]string{}
	}
	h.localAddresses[dev] = slices.Clone(ips)
	return nil
}

func (h *FakeNetlinkHandle) isValidForSet(s string) bool {
	ip := netutils.ParseIPSloppy(s)
	if ip == nil || h.IsIPv6 != (ip.To4() == nil) || ip.IsLoopback() {
		return false
	}
	return !h.IsIPv6 || !ip.IsLinkLocalUnicast()
}
