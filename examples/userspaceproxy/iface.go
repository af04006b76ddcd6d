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

// linkAddrs keeps the service addresses on the proxy's dummy interface.
type linkAddrs struct {
	name string
}

// ensure makes the interface's addresses of family include want (remove false) or equal
// want (remove true). The interface is created and brought up when missing.
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
			return fmt.Errorf("creating dummy interface %s: %w", a.name, err)
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
		if remove && !want[ip] {
			if err := netlink.AddrDel(link, &h); err != nil {
				errs = append(errs, fmt.Errorf("removing %s from %s: %w", ip, a.name, err))
			}
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
		}
	}
	return errors.Join(errs...)
}
