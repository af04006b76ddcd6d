//go:build linux

package main

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// linkAddrs keeps the service addresses on the proxy's interface. A dummy interface is the
// proxy's alone, so any address on it that no service wants is removed (even one left by
// an earlier run); on any other interface (lo, where dummy interfaces are unavailable) only
// addresses this process added are ever removed.
type linkAddrs struct {
	name  string
	owned map[netip.Addr]bool
}

// ensure makes the interface's addresses of family include want (remove false) or equal
// want (remove true). A missing interface is created as a dummy and brought up.
func (a *linkAddrs) ensure(family localnode.Family, want map[netip.Addr]bool, remove bool) error {
	link, err := netlink.LinkByName(a.name)
	if err != nil {
		if !errors.As(err, &netlink.LinkNotFoundError{}) {
			return fmt.Errorf("interface %s: %w", a.name, err)
		}
		if len(want) == 0 {
			return nil
		}
		if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: a.name}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating dummy interface %s (use an existing interface such as lo if the kernel has no dummy support): %w", a.name, err)
		}
		if link, err = netlink.LinkByName(a.name); err != nil {
			return fmt.Errorf("interface %s: %w", a.name, err)
		}
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		if err := netlink.LinkSetUp(link); err != nil {
			return fmt.Errorf("bringing up %s: %w", a.name, err)
		}
	}
	nlFamily, bits := unix.AF_INET, 32
	if family == localnode.IPv6 {
		nlFamily, bits = unix.AF_INET6, 128
	}
	have, err := netlink.AddrList(link, nlFamily)
	if err != nil {
		return fmt.Errorf("listing addresses of %s: %w", a.name, err)
	}
	if a.owned == nil {
		a.owned = map[netip.Addr]bool{}
	}
	exclusive := link.Type() == "dummy"
	present := map[netip.Addr]bool{}
	var errs []error
	for _, h := range have {
		ip, ok := netip.AddrFromSlice(h.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.IsLinkLocalUnicast() {
			continue // the kernel's own IPv6 link-local address
		}
		present[ip] = true
		if remove && !want[ip] && (exclusive || a.owned[ip]) {
			if err := netlink.AddrDel(link, &h); err != nil {
				errs = append(errs, fmt.Errorf("removing %s from %s: %w", ip, a.name, err))
				continue
			}
			delete(a.owned, ip)
		}
	}
	for ip := range want {
		if present[ip] {
			continue
		}
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(bits, bits)}}
		if family == localnode.IPv6 {
			// Without this the address is "tentative" for a second and binding fails.
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrReplace(link, addr); err != nil {
			errs = append(errs, fmt.Errorf("adding %s to %s: %w", ip, a.name, err))
			continue
		}
		a.owned[ip] = true
	}
	return errors.Join(errs...)
}
