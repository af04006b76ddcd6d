//go:build linux

package ipvs

// Like parity_format_test.go, this file is also overlaid into upstream
// v1.37.2's pkg/proxy/ipvs by the capture module, so that both proxiers of a
// dual-stack scenario see one node's interfaces through the same code. It
// may import only the standard library and apimachinery, and use only
// parity* names.

import (
	"fmt"
	"net"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/util/sets"
)

// parityNodeLinks is a node's interfaces and their addresses, shared by the
// proxiers of both families as the kernel is.
type parityNodeLinks struct {
	mu    sync.Mutex
	addrs map[string][]string
}

// parityNetlink is one family's view of parityNodeLinks, a NetLinkHandle
// (upstream's and ours have the same methods) that lists only addresses of
// its family, not loopback, and for IPv6 not link-local, as the real
// handles do.
type parityNetlink struct {
	links  *parityNodeLinks
	isIPv6 bool
}

func (h parityNetlink) EnsureAddressBind(address, dev string) (bool, error) {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	addrs, ok := h.links.addrs[dev]
	if !ok {
		return false, fmt.Errorf("binding %s: no interface %s", address, dev)
	}
	if slices.Contains(addrs, address) {
		return true, nil
	}
	h.links.addrs[dev] = append(addrs, address)
	return false, nil
}

func (h parityNetlink) UnbindAddress(address, dev string) error {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	addrs, ok := h.links.addrs[dev]
	if !ok {
		return fmt.Errorf("unbinding %s: no interface %s", address, dev)
	}
	i := slices.Index(addrs, address)
	if i < 0 {
		return fmt.Errorf("unbinding %s: not on %s", address, dev)
	}
	h.links.addrs[dev] = slices.Delete(addrs, i, i+1)
	return nil
}

func (h parityNetlink) EnsureDummyDevice(dev string) (bool, error) {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	if _, ok := h.links.addrs[dev]; ok {
		return true, nil
	}
	h.links.addrs[dev] = []string{}
	return false, nil
}

func (h parityNetlink) DeleteDummyDevice(dev string) error {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	if _, ok := h.links.addrs[dev]; !ok {
		return fmt.Errorf("deleting %s: no such interface", dev)
	}
	delete(h.links.addrs, dev)
	return nil
}

// ListBindAddress lists every address of dev, of both families, as
// "ip addr show dev" would.
func (h parityNetlink) ListBindAddress(dev string) ([]string, error) {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	addrs, ok := h.links.addrs[dev]
	if !ok {
		return nil, fmt.Errorf("listing %s: no such interface", dev)
	}
	return slices.Clone(addrs), nil
}

func (h parityNetlink) collect(want func(string) bool) sets.Set[string] {
	h.links.mu.Lock()
	defer h.links.mu.Unlock()
	res := sets.New[string]()
	for dev, addrs := range h.links.addrs {
		if !want(dev) {
			continue
		}
		for _, a := range addrs {
			ip := net.ParseIP(a)
			if ip == nil || (ip.To4() == nil) != h.isIPv6 || ip.IsLoopback() || (h.isIPv6 && ip.IsLinkLocalUnicast()) {
				continue
			}
			res.Insert(a)
		}
	}
	return res
}

func (h parityNetlink) GetAllLocalAddresses() (sets.Set[string], error) {
	return h.collect(func(string) bool { return true }), nil
}

func (h parityNetlink) GetLocalAddresses(dev string) (sets.Set[string], error) {
	return h.collect(func(d string) bool { return d == dev }), nil
}

func (h parityNetlink) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	return h.collect(func(d string) bool { return d != dev }), nil
}
