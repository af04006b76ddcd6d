/*
Copyright The Kubernetes Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package conntrack

import (
	"bytes"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// inNS runs fn on a new goroutine whose thread has joined ns. The thread is never unlocked,
// so the runtime discards it afterwards instead of reusing a thread in the wrong namespace.
func inNS(ns netns.NsHandle, fn func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		if err := netns.Set(ns); err != nil {
			errc <- fmt.Errorf("entering netns: %w", err)
			return
		}
		errc <- fn()
	}()
	return <-errc
}

// newNS creates a network namespace that lives as long as the test holds its handle.
func newNS(t *testing.T) netns.NsHandle {
	t.Helper()
	return newNSTB(t)
}

func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// datapath is a client namespace and a server namespace joined by a veth pair. The server
// namespace DNATs the "service" addresses svc4:53 and [svc6]:53 to its own port 5353.
type datapath struct {
	client, server netns.NsHandle
}

var (
	clientIP4 = netip.MustParseAddr("198.18.0.1")
	serverIP4 = netip.MustParseAddr("198.18.0.2")
	svcIP4    = netip.MustParseAddr("198.18.10.1")
	clientIP6 = netip.MustParseAddr("fd00:18::1")
	serverIP6 = netip.MustParseAddr("fd00:18::2")
	svcIP6    = netip.MustParseAddr("fd00:18:10::1")
)

const nftRules = `
table ip ctest {
	chain pre {
		type nat hook prerouting priority dstnat;
		ip daddr 198.18.10.1 udp dport 53 dnat to 198.18.0.2:5353
		ip daddr 198.18.10.1 tcp dport 53 dnat to 198.18.0.2:5353
	}
}
table ip6 ctest {
	chain pre {
		type nat hook prerouting priority dstnat;
		ip6 daddr fd00:18:10::1 udp dport 53 dnat to [fd00:18::2]:5353
	}
}
`

func setupDatapath(t *testing.T) *datapath {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	nft, err := exec.LookPath("nft")
	if err != nil {
		t.Skip("needs the nft binary for the DNAT rule")
	}
	d := &datapath{client: newNS(t), server: newNS(t)}
	hc, err := netlink.NewHandleAt(d.client)
	must(t, "netlink handle in client netns", err)
	t.Cleanup(hc.Close)
	hs, err := netlink.NewHandleAt(d.server)
	must(t, "netlink handle in server netns", err)
	t.Cleanup(hs.Close)

	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "ct-c"}, PeerName: "ct-s", PeerNamespace: netlink.NsFd(int(d.server))}
	must(t, "creating veth", hc.LinkAdd(veth))
	cl, err := hc.LinkByName("ct-c")
	must(t, "client link", err)
	sl, err := hs.LinkByName("ct-s")
	must(t, "server link", err)
	addAddr := func(h *netlink.Handle, l netlink.Link, a netip.Addr, bits int) {
		must(t, "adding "+a.String(), h.AddrAdd(l, &netlink.Addr{
			IPNet: &net.IPNet{IP: a.AsSlice(), Mask: net.CIDRMask(bits, a.BitLen())},
			Flags: unix.IFA_F_NODAD, // no duplicate address detection delay for IPv6
		}))
	}
	addAddr(hc, cl, clientIP4, 24)
	addAddr(hs, sl, serverIP4, 24)
	addAddr(hc, cl, clientIP6, 64)
	addAddr(hs, sl, serverIP6, 64)
	for _, hl := range []struct {
		h *netlink.Handle
		l netlink.Link
	}{{hc, cl}, {hs, sl}} {
		must(t, "link up", hl.h.LinkSetUp(hl.l))
		lo, err := hl.h.LinkByName("lo")
		must(t, "lo", err)
		must(t, "lo up", hl.h.LinkSetUp(lo))
	}
	must(t, "route to v4 service", hc.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index,
		Dst: &net.IPNet{IP: svcIP4.AsSlice(), Mask: net.CIDRMask(32, 32)}, Gw: serverIP4.AsSlice()}))
	must(t, "route to v6 service", hc.RouteAdd(&netlink.Route{LinkIndex: cl.Attrs().Index,
		Dst: &net.IPNet{IP: svcIP6.AsSlice(), Mask: net.CIDRMask(128, 128)}, Gw: serverIP6.AsSlice()}))

	must(t, "loading DNAT rules", inNS(d.server, func() error {
		cmd := exec.Command(nft, "-f", "-")
		cmd.Stdin = strings.NewReader(nftRules)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}))
	return d
}

// serve starts a UDP echo server and a TCP accept loop on port 5353 of the server namespace.
func (d *datapath) serve(t *testing.T) {
	t.Helper()
	for _, ip := range []netip.Addr{serverIP4, serverIP6} {
		must(t, "server sockets", inNS(d.server, func() error {
			uc, err := net.ListenUDP("udp", net.UDPAddrFromAddrPort(netip.AddrPortFrom(ip, 5353)))
			if err != nil {
				return err
			}
			t.Cleanup(func() { uc.Close() })
			go func() {
				buf := make([]byte, 64)
				for {
					n, from, err := uc.ReadFromUDPAddrPort(buf)
					if err != nil {
						return
					}
					_, _ = uc.WriteToUDPAddrPort(buf[:n], from)
				}
			}()
			if ip.Is6() {
				return nil
			}
			tl, err := net.ListenTCP("tcp", net.TCPAddrFromAddrPort(netip.AddrPortFrom(ip, 5353)))
			if err != nil {
				return err
			}
			t.Cleanup(func() { tl.Close() })
			go func() {
				for {
					c, err := tl.Accept()
					if err != nil {
						return
					}
					t.Cleanup(func() { c.Close() })
				}
			}()
			return nil
		}))
	}
}

// connect opens a connection from the client namespace and, for UDP, waits for the echo so the
// entry is confirmed in both directions. It returns the client's local port.
func (d *datapath) connect(t *testing.T, network string, dst netip.AddrPort) uint16 {
	t.Helper()
	var local netip.AddrPort
	must(t, fmt.Sprintf("%s connection to %v", network, dst), inNS(d.client, func() error {
		dialer := net.Dialer{Timeout: 5 * time.Second}
		c, err := dialer.Dial(network, dst.String())
		if err != nil {
			return err
		}
		t.Cleanup(func() { c.Close() })
		local = netip.MustParseAddrPort(c.LocalAddr().String())
		if network != "udp" {
			return nil
		}
		if err := c.SetDeadline(time.Now().Add(5 * time.Second)); err != nil {
			return err
		}
		if _, err := c.Write([]byte("ping")); err != nil {
			return err
		}
		buf := make([]byte, 8)
		_, err = c.Read(buf)
		return err
	}))
	return local.Port()
}

// conntrackCLI lists the server namespace's table with conntrack(8), an implementation
// independent of the netlink library under test.
func (d *datapath) conntrackCLI(t *testing.T, family string) string {
	t.Helper()
	bin, err := exec.LookPath("conntrack")
	if err != nil {
		t.Log("conntrack binary not found; skipping the independent check")
		return ""
	}
	var out bytes.Buffer
	must(t, "conntrack -L", inNS(d.server, func() error {
		cmd := exec.Command(bin, "-L", "-f", family)
		cmd.Stdout = &out
		return cmd.Run()
	}))
	return out.String()
}

func flowSummary(flows []*netlink.ConntrackFlow) string {
	var b strings.Builder
	for _, f := range flows {
		fmt.Fprintf(&b, "\n  %s", f)
	}
	return b.String()
}

func TestKernelListAndDelete(t *testing.T) {
	d := setupDatapath(t)
	d.serve(t)
	svc4 := netip.AddrPortFrom(svcIP4, 53)
	direct4 := netip.AddrPortFrom(serverIP4, 5353)
	udpNATPort := d.connect(t, "udp", svc4)
	tcpNATPort := d.connect(t, "tcp", svc4)
	udpDirectPort := d.connect(t, "udp", direct4)
	tcpDirectPort := d.connect(t, "tcp", direct4)
	udp6Port := d.connect(t, "udp", netip.AddrPortFrom(svcIP6, 53))

	ct, err := NewInNamespace(d.server)
	must(t, "NewInNamespace", err)
	t.Cleanup(ct.Close)

	flows, err := ct.ListEntries(unix.AF_INET)
	must(t, "ListEntries(AF_INET)", err)
	byClientPort := func(flows []*netlink.ConntrackFlow, proto uint8, port uint16) *netlink.ConntrackFlow {
		for _, f := range flows {
			if f.Forward.Protocol == proto && f.Forward.SrcPort == port && (addr(f.Forward.SrcIP) == clientIP4 || addr(f.Forward.SrcIP) == clientIP6) {
				return f
			}
		}
		return nil
	}
	want := []struct {
		name  string
		proto uint8
		port  uint16
		dnat  bool
	}{
		{"udp via service", unix.IPPROTO_UDP, udpNATPort, true},
		{"tcp via service", unix.IPPROTO_TCP, tcpNATPort, true},
		{"udp direct", unix.IPPROTO_UDP, udpDirectPort, false},
		{"tcp direct", unix.IPPROTO_TCP, tcpDirectPort, false},
	}
	for _, w := range want {
		f := byClientPort(flows, w.proto, w.port)
		if f == nil {
			t.Fatalf("no %s entry (client port %d) in:%s", w.name, w.port, flowSummary(flows))
		}
		if IsDNATed(f) != w.dnat {
			t.Errorf("%s: IsDNATed = %v, want %v: %s", w.name, !w.dnat, w.dnat, f)
		}
		if w.dnat && (addr(f.Forward.DstIP) != svcIP4 || addr(f.Reverse.SrcIP) != serverIP4 || f.Reverse.SrcPort != 5353) {
			t.Errorf("%s: unexpected tuples %s", w.name, f)
		}
	}
	if n, err := ct.Count(unix.AF_INET); err != nil || n != len(flows) {
		t.Errorf("Count(AF_INET) = %d, %v; want %d", n, err, len(flows))
	}

	// Delete exactly the DNATed UDP flow to the service, as stale-endpoint cleanup would.
	n, err := DeleteFiltered(ct, unix.AF_INET, Filter{
		Protocol: unix.IPPROTO_UDP, OrigDstIP: svcIP4, OrigDstPort: 53,
		ReplySrcIP: serverIP4, ReplySrcPort: 5353, NAT: DNATed,
	})
	if err != nil || n != 1 {
		t.Fatalf("DeleteFiltered = %d, %v; want 1", n, err)
	}
	after, err := ct.ListEntries(unix.AF_INET)
	must(t, "ListEntries after filter delete", err)
	if f := byClientPort(after, unix.IPPROTO_UDP, udpNATPort); f != nil {
		t.Errorf("filtered UDP flow survived: %s", f)
	}
	for _, w := range want[1:] {
		if byClientPort(after, w.proto, w.port) == nil {
			t.Errorf("%s was deleted but did not match the filter; table:%s", w.name, flowSummary(after))
		}
	}

	// DeleteEntries with an entry from the earlier listing: counters have moved on since, and
	// the exact-flow match must still find it. A flow of the other family is not touched.
	v6flows, err := ct.ListEntries(unix.AF_INET6)
	must(t, "ListEntries(AF_INET6)", err)
	udp6 := byClientPort(v6flows, unix.IPPROTO_UDP, udp6Port)
	if udp6 == nil || !IsDNATed(udp6) || addr(udp6.Reverse.SrcIP) != serverIP6 {
		t.Fatalf("no DNATed IPv6 UDP entry for client port %d in:%s", udp6Port, flowSummary(v6flows))
	}
	stale := byClientPort(flows, unix.IPPROTO_TCP, tcpDirectPort)
	n, err = ct.DeleteEntries(unix.AF_INET, []*netlink.ConntrackFlow{stale, udp6})
	if err != nil || n != 1 {
		t.Fatalf("DeleteEntries(AF_INET, [tcp direct, v6 flow]) = %d, %v; want 1", n, err)
	}
	after, err = ct.ListEntries(unix.AF_INET)
	must(t, "ListEntries after DeleteEntries", err)
	if byClientPort(after, unix.IPPROTO_TCP, tcpDirectPort) != nil {
		t.Errorf("tcp direct flow survived DeleteEntries")
	}
	if byClientPort(after, unix.IPPROTO_TCP, tcpNATPort) == nil || byClientPort(after, unix.IPPROTO_UDP, udpDirectPort) == nil {
		t.Errorf("DeleteEntries removed more than asked; table:%s", flowSummary(after))
	}
	if v6, err := ct.Count(unix.AF_INET6); err != nil || v6 != len(v6flows) {
		t.Errorf("IPv6 count after an AF_INET delete = %d, %v; want %d", v6, err, len(v6flows))
	}
	n, err = ct.DeleteEntries(unix.AF_INET6, []*netlink.ConntrackFlow{udp6})
	if err != nil || n != 1 {
		t.Errorf("DeleteEntries(AF_INET6) = %d, %v; want 1", n, err)
	}

	// Deleting what is already gone is not an error.
	if n, err := ct.DeleteEntries(unix.AF_INET, []*netlink.ConntrackFlow{stale}); err != nil || n != 0 {
		t.Errorf("second DeleteEntries = %d, %v; want 0, nil", n, err)
	}

	// Independent check with conntrack(8): the TCP service flow remains, the UDP one is gone.
	if out := d.conntrackCLI(t, "ipv4"); out != "" {
		if !strings.Contains(out, fmt.Sprintf("sport=%d dport=53", tcpNATPort)) {
			t.Errorf("conntrack -L lacks the TCP service flow:\n%s", out)
		}
		if strings.Contains(out, fmt.Sprintf("sport=%d dport=53", udpNATPort)) {
			t.Errorf("conntrack -L still shows the deleted UDP flow:\n%s", out)
		}
	}
}
