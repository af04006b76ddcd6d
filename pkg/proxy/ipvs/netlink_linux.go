//go:build linux

package ipvs

import (
	"errors"
	"fmt"
	"net"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/sets"
	netutils "k8s.io/utils/net"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

type netlinkHandle struct {
	netlink.Handle
	isIPv6 bool
}

// NewNetLinkHandle returns a NetLinkHandle for the calling thread's network
// namespace, listing addresses of one family.
func NewNetLinkHandle(isIPv6 bool) NetLinkHandle {
	return &netlinkHandle{netlink.Handle{}, isIPv6}
}

func (h *netlinkHandle) EnsureAddressBind(address, devName string) (bool, error) {
	dev, err := h.LinkByName(devName)
	if err != nil {
		return false, fmt.Errorf("getting interface %q: %w", devName, err)
	}
	addr := netutils.ParseIPSloppy(address)
	if addr == nil {
		return false, fmt.Errorf("invalid IP address %q", address)
	}
	if err := h.AddrAdd(dev, &netlink.Addr{IPNet: netlink.NewIPNet(addr)}); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return true, nil
		}
		return false, fmt.Errorf("binding address %s to interface %q: %w", address, devName, err)
	}
	return false, nil
}

func (h *netlinkHandle) UnbindAddress(address, devName string) error {
	dev, err := h.LinkByName(devName)
	if err != nil {
		return fmt.Errorf("getting interface %q: %w", devName, err)
	}
	addr := netutils.ParseIPSloppy(address)
	if addr == nil {
		return fmt.Errorf("invalid IP address %q", address)
	}
	if err := h.AddrDel(dev, &netlink.Addr{IPNet: netlink.NewIPNet(addr)}); err != nil && !errors.Is(err, unix.ENXIO) {
		return fmt.Errorf("unbinding address %s from interface %q: %w", address, devName, err)
	}
	return nil
}

func (h *netlinkHandle) EnsureDummyDevice(devName string) (bool, error) {
	if _, err := h.LinkByName(devName); err == nil {
		return true, nil
	}
	if err := h.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: devName}}); err != nil {
		return false, fmt.Errorf("creating dummy interface %q: %w", devName, err)
	}
	return false, nil
}

func (h *netlinkHandle) DeleteDummyDevice(devName string) error {
	link, err := h.LinkByName(devName)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil
		}
		return fmt.Errorf("getting dummy interface %q: %w", devName, err)
	}
	dummy, ok := link.(*netlink.Dummy)
	if !ok {
		return fmt.Errorf("interface %q is a %s, not a dummy interface", devName, link.Type())
	}
	return h.LinkDel(dummy)
}

func (h *netlinkHandle) ListBindAddress(devName string) ([]string, error) {
	dev, err := h.LinkByName(devName)
	if err != nil {
		return nil, fmt.Errorf("getting interface %q: %w", devName, err)
	}
	addrs, err := h.AddrList(dev, 0)
	if err != nil {
		return nil, fmt.Errorf("listing addresses of interface %q: %w", devName, err)
	}
	ips := make([]string, 0, len(addrs))
	for _, addr := range addrs {
		ips = append(ips, addr.IP.String())
	}
	return ips, nil
}

func (h *netlinkHandle) GetAllLocalAddresses() (sets.Set[string], error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing local addresses: %w", err)
	}
	return proxyutil.AddressSet(h.isValidForSet, addrs), nil
}

func (h *netlinkHandle) GetLocalAddresses(dev string) (sets.Set[string], error) {
	ifi, err := net.InterfaceByName(dev)
	if err != nil {
		return nil, fmt.Errorf("getting interface %q: %w", dev, err)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return nil, fmt.Errorf("listing addresses of interface %q: %w", dev, err)
	}
	return proxyutil.AddressSet(h.isValidForSet, addrs), nil
}

func (h *netlinkHandle) isValidForSet(ip net.IP) bool {
	if h.isIPv6 != netutils.IsIPv6(ip) || ip.IsLoopback() {
		return false
	}
	return !h.isIPv6 || !ip.IsLinkLocalUnicast()
}

func (h *netlinkHandle) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	// A missing dev excludes nothing: the first sync lists node addresses
	// before anything could be bound to it.
	devIndex := -1
	if link, err := h.LinkByName(dev); err == nil {
		devIndex = link.Attrs().Index
	}
	addrs, err := h.AddrList(nil, unix.AF_UNSPEC)
	if err != nil {
		return nil, fmt.Errorf("listing node addresses: %w", err)
	}
	out := make([]net.Addr, 0, len(addrs))
	for _, a := range addrs {
		if a.LinkIndex != devIndex && a.IPNet != nil {
			out = append(out, a.IPNet)
		}
	}
	return proxyutil.AddressSet(h.isValidForSet, out), nil
}
