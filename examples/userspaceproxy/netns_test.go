//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// The real-traffic test runs in two private namespaces joined by a veth pair:
//
//	proxy ns: the proxy and the client; 198.18.0.1/24 on the veth, service IPs
//	          198.19.0.0/24 on the proxy's dummy interface
//	backend ns: the endpoints, 198.18.0.2/24 and 198.18.0.3/24 on the veth peer
//
// The host namespace is never touched. The proxy must do all its socket work inside the
// proxy ns, so the test binary re-runs itself there under `ip netns exec`.
const (
	childEnv   = "USERSPACEPROXY_NETNS_CHILD"
	backendEnv = "USERSPACEPROXY_BACKEND_NS"
	// modeEnv set to "out-of-process" makes the child run the proxy as a separate
	// process (this binary's main) fed over a node-local state socket.
	modeEnv  = "USERSPACEPROXY_MODE"
	thisNode = "node-a"
)

func TestRealTrafficInNetns(t *testing.T) {
	for _, mode := range []string{"in-process", "out-of-process"} {
		t.Run(mode, func(t *testing.T) { realTrafficInNetns(t, mode) })
	}
}

func realTrafficInNetns(t *testing.T, mode string) {
	if os.Getenv(childEnv) != "" {
		t.Skip("running as the child")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
	suffix := fmt.Sprintf("%d-%d", os.Getpid(), rand.IntN(1e6))
	proxyNS, backendNS := "usp-p-"+suffix, "usp-b-"+suffix
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Fatalf("ip %v: %v\n%s", args, err, out)
		}
	}
	for _, ns := range []string{proxyNS, backendNS} {
		run("netns", "add", ns)
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	}
	run("-n", proxyNS, "link", "add", "veth-p", "type", "veth", "peer", "name", "veth-b", "netns", backendNS)
	run("-n", proxyNS, "addr", "add", "198.18.0.1/24", "dev", "veth-p")
	run("-n", backendNS, "addr", "add", "198.18.0.2/24", "dev", "veth-b")
	run("-n", backendNS, "addr", "add", "198.18.0.3/24", "dev", "veth-b")
	// nodad: usable at once instead of after duplicate address detection.
	run("-n", proxyNS, "addr", "add", "fd00:198:18::1/64", "dev", "veth-p", "nodad")
	run("-n", backendNS, "addr", "add", "fd00:198:18::2/64", "dev", "veth-b", "nodad")
	for _, ns := range []string{proxyNS, backendNS} {
		run("-n", ns, "link", "set", "lo", "up")
	}
	run("-n", proxyNS, "link", "set", "veth-p", "up")
	run("-n", backendNS, "link", "set", "veth-b", "up")

	args := []string{"netns", "exec", proxyNS, os.Args[0], "-test.run=^TestInProxyNamespace$", "-test.v", "-test.timeout=120s"}
	cmd := exec.Command("ip", args...)
	cmd.Env = append(os.Environ(), childEnv+"=1", backendEnv+"="+backendNS, modeEnv+"="+mode)
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
}

// inNamespace runs fn on a thread switched into the named namespace; sockets fn creates
// stay there after the thread switches back.
func inNamespace(t *testing.T, name string, fn func()) {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	orig, err := netns.Get()
	if err != nil {
		t.Fatal(err)
	}
	defer orig.Close()
	target, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer target.Close()
	if err := netns.Set(target); err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := netns.Set(orig); err != nil {
			panic(fmt.Sprintf("cannot return to the original namespace: %v", err))
		}
	}()
	fn()
}

// TestInProxyNamespace is the child half of TestRealTrafficInNetns: the whole library
// path (static source, proxyrun, this backend) with real sockets.
func TestInProxyNamespace(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("only runs inside TestRealTrafficInNetns's namespace")
	}
	inNamespace(t, os.Getenv(backendEnv), func() {
		tcpServer(t, "198.18.0.2:8080", "pod-2")
		tcpServer(t, "198.18.0.3:8080", "pod-3")
		udpServer(t, "198.18.0.2:5353", "pod-2")
		udpServer(t, "198.18.0.3:5353", "pod-3")
		tcpServer(t, "[fd00:198:18::2]:8080", "pod-2-v6")
	})

	web := netip.MustParseAddrPort("198.19.0.10:80")
	dns := netip.MustParseAddrPort("198.19.0.53:53")
	ext := netip.MustParseAddrPort("198.19.0.99:80")
	udpPort := func(s *v1.Service) {
		s.Spec.Ports = []v1.ServicePort{{Name: "dns", Protocol: v1.ProtocolUDP, Port: 53}}
	}
	udpSlice := func(eps ...discovery.Endpoint) *discovery.EndpointSlice {
		sl := st.EndpointSlice("ns", "dns", "dns-1", "dns", 5353, eps...)
		proto := v1.ProtocolUDP
		sl.Ports[0].Protocol = &proto
		return sl
	}
	src := source.NewStatic()
	src.SetService(st.Service("ns", "web", []string{web.Addr().String()}, st.ExternalIPs(ext.Addr().String()), st.ExternalLocal(0)))
	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", 8080,
		st.Endpoint("198.18.0.2", thisNode), st.Endpoint("198.18.0.3", "node-b")))
	src.SetService(st.Service("ns", "dns", []string{dns.Addr().String()}, udpPort))
	src.SetEndpointSlice(udpSlice(st.Endpoint("198.18.0.2", "node-b"), st.Endpoint("198.18.0.3", "node-b")))
	web6 := netip.MustParseAddrPort("[fd00:198:19::10]:80")
	src.SetService(st.Service("ns", "web6", []string{web6.Addr().String()}))
	src.SetEndpointSlice(st.EndpointSlice("ns", "web6", "web6-1", "http", 8080, st.Endpoint("fd00:198:18::2", "node-b")))

	iface = "usp0"
	if err := netlink.LinkAdd(&netlink.Dummy{LinkAttrs: netlink.LinkAttrs{Name: iface}}); err != nil {
		t.Logf("no dummy interface (%v): service addresses go on lo", err)
		iface = "lo"
	}
	if os.Getenv(modeEnv) == "out-of-process" {
		startOutOfProcess(t, src)
	} else {
		ctx, cancel := context.WithCancel(context.Background())
		p := New(Options{Interface: iface, DialTimeout: time.Second})
		done := make(chan error, 1)
		go func() {
			done <- proxyrun.Run(ctx, src, p, proxyrun.Options{NodeName: thisNode,
				Families: []localnode.Family{localnode.IPv4, localnode.IPv6}, MinSyncInterval: 10 * time.Millisecond})
		}()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("proxyrun.Run: %v", err)
			}
			if err := p.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
			if got := dummyAddrs(t); len(got) != 0 {
				t.Errorf("service addresses left on %s after Close: %v", iface, got)
			}
		})
	}

	expect := func(what string, n int, get func() (string, error), want map[string]int) {
		t.Helper()
		var got map[string]int
		if msg := eventually(10*time.Second, func() string {
			got = ids(n, get)
			if fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Sprintf("%s: got %v, want %v", what, got, want)
			}
			return ""
		}); msg != "" {
			t.Fatal(msg)
		}
		t.Logf("%s: %v", what, got)
	}
	tcp := func(at netip.AddrPort) func() (string, error) { return func() (string, error) { return tcpGet(at) } }
	udp := func(at netip.AddrPort) func() (string, error) { return func() (string, error) { return udpGet(at) } }

	expect("TCP cluster IP, round-robin over both endpoints", 4, tcp(web), map[string]int{"pod-2": 2, "pod-3": 2})
	expect("external IP under eTP Local: only this node's endpoint", 4, tcp(ext), map[string]int{"pod-2": 4})
	expect("UDP cluster IP, round-robin over both endpoints", 4, udp(dns), map[string]int{"pod-2": 2, "pod-3": 2})
	expect("IPv6 TCP cluster IP", 2, tcp(web6), map[string]int{"pod-2-v6": 2})
	if got := dummyAddrs(t); fmt.Sprint(got) != "[198.19.0.10 198.19.0.53 198.19.0.99]" {
		t.Errorf("%s holds %v", iface, got)
	}

	src.SetEndpointSlice(udpSlice(st.Endpoint("198.18.0.3", "node-b")))
	expect("UDP after an endpoint left", 4, udp(dns), map[string]int{"pod-3": 4})

	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", 8080,
		st.Endpoint("198.18.0.2", thisNode, st.Terminating(true)), st.Endpoint("198.18.0.3", "node-b", st.Terminating(true))))
	expect("only serving-terminating endpoints: still used", 4, tcp(web), map[string]int{"pod-2": 2, "pod-3": 2})

	src.DeleteEndpointSlice("ns", "web-1")
	expect("no endpoints: rejected", 2, tcp(web), map[string]int{"error": 2})

	src.DeleteService("ns", "web")
	if msg := eventually(10*time.Second, func() string {
		if got := dummyAddrs(t); fmt.Sprint(got) != "[198.19.0.53]" {
			return fmt.Sprintf("%s holds %v after deleting web", iface, got)
		}
		return ""
	}); msg != "" {
		t.Fatal(msg)
	}
	if _, err := tcpGet(web); err == nil {
		t.Error("deleted service still answers")
	}
}

// iface is the interface the child's proxy puts service addresses on.
var iface string

// dummyAddrs lists the service addresses (198.19.0.0/16) on the proxy's interface, sorted.
func dummyAddrs(t *testing.T) []netip.Addr {
	t.Helper()
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil
	}
	list, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		t.Fatal(err)
	}
	var out []netip.Addr
	for _, a := range list {
		ip, _ := netip.AddrFromSlice(a.IP)
		if ip = ip.Unmap(); netip.MustParsePrefix("198.19.0.0/16").Contains(ip) {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
