//go:build linux

package ebpf

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// The real-kernel test: the programs are attached to a cgroup the test creates under
// the cgroup v2 root (never the root itself), and a child process is started directly
// into that cgroup and into a private network namespace. The child runs echo servers on
// the endpoint addresses (on its loopback) and, on command, is the client. No route
// leads to the service addresses in that namespace and no nftables rule translates
// them: a connection to a ClusterIP succeeds only through the socket hooks.

const childEnv = "KUBE_PROXY_SOCKETLB_TEST_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(childAgent())
	}
	if spec := os.Getenv(backendEnv); spec != "" {
		os.Exit(backendAgent(spec))
	}
	os.Exit(m.Run())
}

var (
	v4Backends = []string{"198.18.0.1", "198.18.0.2"}
	v6Backends = []string{"fd00::1", "fd00::2"}
)

const backendPort = 8080

// nodeIPv4 is the "node address" NodePorts are reached on: configured in the child's
// namespace, with nothing listening on the node port, so only a translation answers.
// The external IP and load-balancer VIPs are configured nowhere.
const (
	nodeIPv4   = "198.18.0.10"
	externalIP = "198.19.100.1"
	lbVIP      = "198.19.100.2"
	lbVIPRange = "198.19.100.3"
)

// request and result are the parent's commands to the child, one JSON line each.
type request struct {
	Op   string // tcp, tcp6mapped, udp (unconnected), udpconn, conntrack, bench
	Addr string
	// bench: connections to Addr and to Direct, alternating, Count of each.
	Direct string
	Count  int
}

type result struct {
	Err        string
	Refused    bool
	Peer       string // getpeername (tcp, udpconn) or recvfrom's source (udp)
	Client     string // the client socket's own address
	ServerSaw  string // the client address the server saw
	ServerAddr string // the server's own address (the endpoint reached)
	Count      int    // conntrack: entries with that original destination
	// bench: connect-and-first-byte latencies in microseconds, through Addr and Direct.
	Via, Direct []float64
}

func childAgent() int {
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", v4Backends[0] + "/32", "dev", "lo"},
		{"addr", "add", v4Backends[1] + "/32", "dev", "lo"},
		{"addr", "add", nodeIPv4 + "/32", "dev", "lo"},
		{"-6", "addr", "add", v6Backends[0] + "/128", "dev", "lo", "nodad"},
		{"-6", "addr", "add", v6Backends[1] + "/128", "dev", "lo", "nodad"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "ip %v: %v: %s\n", args, err, out)
			return 1
		}
	}
	// BenchmarkConnect makes tens of thousands of connections to one server address
	// in this namespace, and the server closes first, so its TIME_WAIT sockets hold
	// the 4-tuples: with the default 28k ephemeral ports, connect() slowed down as
	// they filled (2k instead of 9k connections per second at 24k connections) and
	// then failed. These sysctls are this namespace's own.
	for file, value := range map[string]string{
		"/proc/sys/net/ipv4/ip_local_port_range": "1024 65000",
		"/proc/sys/net/ipv4/tcp_tw_reuse":        "1",
	} {
		if err := os.WriteFile(file, []byte(value), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", file, err)
			return 1
		}
	}
	// Conntrack only runs in a namespace where some rule uses it; with this one it
	// tracks every connection, so the parent can look for a DNAT entry.
	if _, err := exec.LookPath("nft"); err == nil {
		rules := "add table inet socketlbtest; add chain inet socketlbtest out { type filter hook output priority 0; }; add rule inet socketlbtest out ct state new counter"
		if out, err := exec.Command("nft", rules).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "nft: %v: %s\n", err, out)
			return 1
		}
	}
	for _, a := range append(append([]string{}, v4Backends...), v6Backends...) {
		ap := netip.AddrPortFrom(netip.MustParseAddr(a), backendPort).String()
		ln, err := net.Listen("tcp", ap)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				fmt.Fprintf(c, "%s|%s\n", c.LocalAddr(), c.RemoteAddr())
				c.Close()
			}
		}()
		pc, err := net.ListenPacket("udp", ap)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		go func() {
			buf := make([]byte, 512)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = pc.WriteTo([]byte(fmt.Sprintf("%s|%s", pc.LocalAddr(), from)), from)
			}
		}()
	}
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req request
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		_ = enc.Encode(do(req))
	}
	return 0
}

func peerOf(c syscall.Conn) string {
	rc, err := c.SyscallConn()
	if err != nil {
		return err.Error()
	}
	var sa unix.Sockaddr
	var serr error
	_ = rc.Control(func(fd uintptr) { sa, serr = unix.Getpeername(int(fd)) })
	if serr != nil {
		return serr.Error()
	}
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port)).String()
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port)).String()
	}
	return "?"
}

func do(req request) (res result) {
	fail := func(err error) result {
		return result{Err: err.Error(), Refused: errors.Is(err, syscall.ECONNREFUSED)}
	}
	var reply string
	switch req.Op {
	case "bench":
		return bench(req)
	case "conntrack":
		out, _ := exec.Command("conntrack", "-L", "--orig-dst", req.Addr).Output()
		for _, l := range strings.Split(string(out), "\n") {
			if strings.TrimSpace(l) != "" {
				res.Count++
			}
		}
		return res
	case "tcp":
		c, err := net.DialTimeout("tcp", req.Addr, 2*time.Second)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		res.Peer, res.Client = peerOf(c.(*net.TCPConn)), c.LocalAddr().String()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		reply, err = bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fail(err)
		}
	case "tcp6mapped":
		// An AF_INET6 socket to an IPv4 address in its IPv4-mapped form, as dual-stack
		// applications connect; Go's net package would open an AF_INET socket instead.
		ap := netip.MustParseAddrPort(req.Addr)
		fd, err := unix.Socket(unix.AF_INET6, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fail(err)
		}
		f := os.NewFile(uintptr(fd), "tcp6mapped")
		defer f.Close()
		mapped := netip.AddrFrom16(ap.Addr().As16())
		if err := unix.Connect(fd, &unix.SockaddrInet6{Addr: mapped.As16(), Port: int(ap.Port())}); err != nil {
			return fail(err)
		}
		c, err := net.FileConn(f)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		peer := netip.MustParseAddrPort(peerOf(c.(*net.TCPConn)))
		res.Peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port()).String()
		client := netip.MustParseAddrPort(c.LocalAddr().String())
		res.Client = netip.AddrPortFrom(client.Addr().Unmap(), client.Port()).String()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		reply, err = bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return fail(err)
		}
	case "udpconn":
		c, err := net.Dial("udp", req.Addr)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		res.Peer, res.Client = peerOf(c.(*net.UDPConn)), c.LocalAddr().String()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Write([]byte("x")); err != nil {
			return fail(err)
		}
		buf := make([]byte, 512)
		n, err := c.Read(buf)
		if err != nil {
			return fail(err)
		}
		reply = string(buf[:n])
	case "udp":
		dst := net.UDPAddrFromAddrPort(netip.MustParseAddrPort(req.Addr))
		network := "udp4"
		if dst.IP.To4() == nil {
			network = "udp6"
		}
		c, err := net.ListenUDP(network, nil)
		if err != nil {
			return fail(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.WriteToUDP([]byte("x"), dst); err != nil {
			return fail(err)
		}
		buf := make([]byte, 512)
		n, from, err := c.ReadFromUDPAddrPort(buf)
		if err != nil {
			return fail(err)
		}
		res.Peer = netip.AddrPortFrom(from.Addr().Unmap(), from.Port()).String()
		reply = string(buf[:n])
	default:
		return result{Err: "unknown op " + req.Op}
	}
	server, client, _ := strings.Cut(strings.TrimSpace(reply), "|")
	res.ServerAddr, res.ServerSaw = server, client
	return res
}

// env is the parent's side: the datapath, the backend and the child.
type env struct {
	cg     string
	mu     sync.Mutex
	pin    string
	dp     *Datapath
	differ *backend.Differ
	in     *json.Encoder
	out    *bufio.Scanner
}

// hostSetup makes the test's cgroup (under the cgroup v2 root, removed at cleanup) and
// a private bpf filesystem for the pins; it skips when the host cannot.
func hostSetup(t testing.TB) (cg, pin string) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a cgroup, a bpf filesystem and a network namespace, and loads BPF programs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip command")
	}
	var st unix.Statfs_t
	if err := unix.Statfs(DefaultCgroupPath, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
		t.Skipf("needs a cgroup v2 hierarchy at %s", DefaultCgroupPath)
	}
	if err := CheckKernel(Config{CgroupPath: DefaultCgroupPath, PinPath: "/sys/fs/bpf/x"}); err != nil && !strings.Contains(err.Error(), "bpf filesystem") {
		t.Skipf("kernel cannot run the socket load balancer: %v", err)
	}
	cg = filepath.Join(DefaultCgroupPath, fmt.Sprintf("kube-proxy-socketlb-test-%d-%s", os.Getpid(), strings.NewReplacer("/", "-").Replace(t.Name())))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The child processes have exited by now (their cleanups ran first); retry
		// while the kernel finishes tearing them down.
		for i := 0; i < 50; i++ {
			if err := os.Remove(cg); err == nil || errors.Is(err, os.ErrNotExist) {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Errorf("could not remove test cgroup %s", cg)
	})
	bpffs := t.TempDir()
	if err := unix.Mount("bpf", bpffs, "bpf", 0, ""); err != nil {
		t.Skipf("cannot mount a bpf filesystem: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(bpffs, unix.MNT_DETACH) })
	return cg, filepath.Join(bpffs, "socketlb")
}

func newEnv(t testing.TB) *env {
	cg, pin := hostSetup(t)
	e := &env{cg: cg, pin: pin}
	dp, err := Open(Config{CgroupPath: cg, PinPath: e.pin})
	if err != nil {
		t.Fatalf("opening the datapath: %v", err)
	}
	e.dp = dp
	t.Cleanup(func() {
		if e.dp != nil {
			_ = e.dp.Close()
		}
		if err := Cleanup(e.pin); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	e.differ = backend.NewDiffer(NewBackend(dp.Maps(), []netip.Addr{netip.MustParseAddr(nodeIPv4)}, dp.Adopted))
	e.startClient(t)
	return e
}

// startClient starts the child: in a new network namespace, born in the test cgroup.
func (e *env) startClient(t testing.TB) {
	cgfd, err := unix.Open(e.cg, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(cgfd)
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, UseCgroupFD: true, CgroupFD: cgfd}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	e.in, e.out = json.NewEncoder(stdin), bufio.NewScanner(stdout)
	if !e.out.Scan() || e.out.Text() != "ready" {
		t.Fatalf("child did not start: %q", e.out.Text())
	}
}

func (e *env) do(t testing.TB, op, addr string) result {
	t.Helper()
	res, err := e.try(op, addr)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// try is do for any goroutine: the child answers one request at a time.
func (e *env) try(op, addr string) (result, error) {
	return e.try2(request{Op: op, Addr: addr})
}

func (e *env) try2(req request) (result, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var res result
	if err := e.in.Encode(req); err != nil {
		return res, err
	}
	if !e.out.Scan() {
		return res, fmt.Errorf("child gone: %v", e.out.Err())
	}
	return res, json.Unmarshal(e.out.Bytes(), &res)
}

func (e *env) sync(t testing.TB, f localnode.Family, svcs ...localnode.Service) {
	t.Helper()
	st := &localnode.State{Family: f, Services: svcs}
	st.Normalize()
	if err := st.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := e.differ.Sync(context.Background(), st); err != nil {
		t.Fatal(err)
	}
}

func svc(name string, proto localnode.Protocol, vip string, port uint16, eps ...string) localnode.Service {
	s := localnode.Service{ServicePort: localnode.ServicePort{
		Name:      localnode.PortName{Namespace: "ns", Name: name, Port: "p", Protocol: proto},
		ClusterIP: netip.MustParseAddr(vip), Port: port,
	}, HasAnyEndpoints: len(eps) > 0}
	for _, ep := range eps {
		s.Endpoints = append(s.Endpoints, localnode.Endpoint{IP: netip.MustParseAddr(ep), Port: backendPort,
			Ready: true, Serving: true, ForCluster: true, ForLocal: true})
	}
	return s
}

// reach connects n times and returns the endpoints reached, checking on every
// connection that the application saw only the service address and that the server
// saw the client's own address.
func (e *env) reach(t testing.TB, op, addr string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for i := 0; i < n; i++ {
		r := e.do(t, op, addr)
		if r.Err != "" {
			t.Fatalf("%s %s: %s", op, addr, r.Err)
		}
		if r.Peer != addr {
			t.Fatalf("%s %s: the application saw peer %s, want the service address", op, addr, r.Peer)
		}
		if r.Client != "" && r.ServerSaw != r.Client {
			t.Fatalf("%s %s: server saw client %s, client is %s (translated on the way?)", op, addr, r.ServerSaw, r.Client)
		}
		seen[netip.MustParseAddrPort(r.ServerAddr).Addr().String()]++
	}
	return seen
}

func keys(m map[string]int) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return strings.Join(sortStrings(out), ",")
}

func sortStrings(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func TestKernelSocketLB(t *testing.T) {
	e := newEnv(t)
	const n = 24 // both of two endpoints are missed with probability 2^-23

	tcp4 := svc("web", localnode.TCP, "10.96.0.10", 80, v4Backends...)
	udp4 := svc("dns", localnode.UDP, "10.96.0.10", 53, v4Backends...)
	e.sync(t, localnode.IPv4, tcp4, udp4)
	both := strings.Join(v4Backends, ",")

	t.Run("ClusterIP TCP reaches both endpoints", func(t *testing.T) {
		if got := keys(e.reach(t, "tcp", "10.96.0.10:80", n)); got != both {
			t.Errorf("endpoints reached: %s, want %s", got, both)
		}
	})
	t.Run("ClusterIP UDP unconnected and connected", func(t *testing.T) {
		if got := keys(e.reach(t, "udp", "10.96.0.10:53", n)); got != both {
			t.Errorf("unconnected: endpoints reached: %s, want %s", got, both)
		}
		if got := keys(e.reach(t, "udpconn", "10.96.0.10:53", n)); got != both {
			t.Errorf("connected: endpoints reached: %s, want %s", got, both)
		}
	})
	t.Run("IPv6 socket to the IPv4-mapped ClusterIP", func(t *testing.T) {
		if got := keys(e.reach(t, "tcp6mapped", "10.96.0.10:80", n)); got != both {
			t.Errorf("endpoints reached: %s, want %s", got, both)
		}
	})
	t.Run("no DNAT conntrack entry", func(t *testing.T) {
		if _, err := exec.LookPath("conntrack"); err != nil {
			t.Skip("needs the conntrack tool")
		}
		if _, err := exec.LookPath("nft"); err != nil {
			t.Skip("needs nft to enable conntrack in the namespace")
		}
		e.reach(t, "tcp", "10.96.0.10:80", 2)
		if got := e.do(t, "conntrack", "10.96.0.10").Count; got != 0 {
			t.Errorf("%d conntrack entries with the ClusterIP as original destination, want 0", got)
		}
		total := 0
		for _, b := range v4Backends {
			total += e.do(t, "conntrack", b).Count
		}
		if total == 0 {
			t.Errorf("no conntrack entry to an endpoint: the check cannot see connections")
		}
	})
	t.Run("endpoint removal and re-add", func(t *testing.T) {
		e.sync(t, localnode.IPv4, svc("web", localnode.TCP, "10.96.0.10", 80, v4Backends[1]), udp4)
		if got := keys(e.reach(t, "tcp", "10.96.0.10:80", n)); got != v4Backends[1] {
			t.Errorf("after removal: endpoints reached: %s, want %s", got, v4Backends[1])
		}
		e.sync(t, localnode.IPv4, tcp4, udp4)
		if got := keys(e.reach(t, "tcp", "10.96.0.10:80", n)); got != both {
			t.Errorf("after re-add: endpoints reached: %s, want %s", got, both)
		}
	})
	t.Run("no endpoints rejects with ECONNREFUSED", func(t *testing.T) {
		e.sync(t, localnode.IPv4, svc("web", localnode.TCP, "10.96.0.10", 80), svc("dns", localnode.UDP, "10.96.0.10", 53))
		for _, op := range []string{"tcp", "udp"} {
			addr := map[string]string{"tcp": "10.96.0.10:80", "udp": "10.96.0.10:53"}[op]
			if r := e.do(t, op, addr); !r.Refused {
				t.Errorf("%s %s with no endpoints: %+v, want ECONNREFUSED", op, addr, r)
			}
		}
		e.sync(t, localnode.IPv4, tcp4, udp4)
	})
	t.Run("ClientIP affinity", func(t *testing.T) {
		a := svc("sticky", localnode.TCP, "10.96.0.11", 80, v4Backends...)
		a.SessionAffinity, a.AffinityTimeout = localnode.AffinityClientIP, time.Hour
		e.sync(t, localnode.IPv4, tcp4, udp4, a)
		got := e.reach(t, "tcp", "10.96.0.11:80", n)
		if len(got) != 1 {
			t.Fatalf("with affinity, endpoints reached: %v, want one", got)
		}
		// The remembered endpoint goes: the client moves to the other one, and stays
		// there when the first comes back (its choice is still valid).
		first := keys(got)
		other := v4Backends[0]
		if other == first {
			other = v4Backends[1]
		}
		b := svc("sticky", localnode.TCP, "10.96.0.11", 80, other)
		b.SessionAffinity, b.AffinityTimeout = localnode.AffinityClientIP, time.Hour
		e.sync(t, localnode.IPv4, tcp4, udp4, b)
		if got := keys(e.reach(t, "tcp", "10.96.0.11:80", n)); got != other {
			t.Errorf("remembered endpoint removed: reached %s, want %s", got, other)
		}
		e.sync(t, localnode.IPv4, tcp4, udp4, a)
		if got := keys(e.reach(t, "tcp", "10.96.0.11:80", n)); got != other {
			t.Errorf("first endpoint back: reached %s, want still %s", got, other)
		}
	})
	t.Run("NodePort, externalIP and LB VIP for local clients", func(t *testing.T) {
		lb := svc("lb", localnode.TCP, "10.96.0.12", 80, v4Backends...)
		lb.NodePort = 30080
		lb.ExternalIPs = []netip.Addr{netip.MustParseAddr(externalIP)}
		lb.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr(lbVIP)}
		// Under Local policy only the first endpoint is on this node; local clients
		// still use both, as kube-proxy's rules short-circuit local traffic.
		lb.ExternalPolicy = localnode.PolicyLocal
		lb.Endpoints[1].ForLocal = false
		ranged := svc("ranged", localnode.TCP, "10.96.0.13", 80, v4Backends...)
		ranged.LoadBalancerVIPs = []netip.Addr{netip.MustParseAddr(lbVIPRange)}
		ranged.SourceRanges = []netip.Prefix{netip.MustParsePrefix("198.18.0.0/15")}
		e.sync(t, localnode.IPv4, tcp4, udp4, lb, ranged)
		for _, addr := range []string{nodeIPv4 + ":30080", externalIP + ":80", lbVIP + ":80", "10.96.0.12:80"} {
			if got := keys(e.reach(t, "tcp", addr, n)); got != both {
				t.Errorf("%s: endpoints reached: %s, want %s", addr, got, both)
			}
		}
		// What the maps say, read back as a tracer would, from the pins.
		rm, closeMaps, err := OpenPinnedReadOnly(e.pin)
		if err != nil {
			t.Fatal(err)
		}
		defer closeMaps()
		tr, err := rm.Lookup(netip.MustParseAddrPort(nodeIPv4+":30080"), localnode.TCP)
		if err != nil || tr == nil || len(tr.Endpoints) != 2 {
			t.Errorf("read back %s:30080: %+v %v, want two endpoints", nodeIPv4, tr, err)
		}
		// A VIP with source ranges is left to nftables (none here: unreachable).
		if r := e.do(t, "tcp", lbVIPRange+":80"); r.Err == "" {
			t.Errorf("LB VIP with source ranges was translated: %+v", r)
		}
		if got := keys(e.reach(t, "tcp", "10.96.0.13:80", n)); got != both {
			t.Errorf("ClusterIP of the ranged service: endpoints reached: %s, want %s", got, both)
		}
	})
	t.Run("IPv6 ClusterIP TCP and UDP", func(t *testing.T) {
		e.sync(t, localnode.IPv6, svc("web", localnode.TCP, "fd00:96::10", 80, v6Backends...),
			svc("dns", localnode.UDP, "fd00:96::10", 53, v6Backends...))
		both6 := strings.Join(v6Backends, ",")
		for _, c := range []struct{ op, addr string }{{"tcp", "[fd00:96::10]:80"}, {"udp", "[fd00:96::10]:53"}, {"udpconn", "[fd00:96::10]:53"}} {
			if got := keys(e.reach(t, c.op, c.addr, n)); got != both6 {
				t.Errorf("%s %s: endpoints reached: %s, want %s", c.op, c.addr, got, both6)
			}
		}
	})
	t.Run("restart re-adopts, cleanup removes", func(t *testing.T) {
		// Connections keep being made, one after another, through the whole restart;
		// none may fail.
		stop, done := make(chan struct{}), make(chan struct{})
		var made, failed int
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := e.try("tcp", "10.96.0.10:80")
				made++
				if err != nil || r.Err != "" || r.Peer != "10.96.0.10:80" {
					failed++
					t.Errorf("connection during restart: %+v %v", r, err)
				}
			}
		}()
		// A restart: this process's handles go, the programs stay attached and keep
		// translating with the maps' contents.
		if err := e.dp.Close(); err != nil {
			t.Fatal(err)
		}
		e.dp = nil
		if got := keys(e.reach(t, "tcp", "10.96.0.10:80", n)); got != both {
			t.Errorf("between runs: endpoints reached: %s, want %s", got, both)
		}
		// Reopening for another cgroup is refused while the pins say otherwise.
		other := e.cg + "-other"
		if err := os.Mkdir(other, 0o755); err != nil {
			t.Fatal(err)
		}
		defer os.Remove(other)
		if dp, err := Open(Config{CgroupPath: other, PinPath: e.pin}); err == nil {
			dp.Close()
			t.Errorf("reopen for another cgroup %s succeeded", other)
		} else if !strings.Contains(err.Error(), "run cleanup first") {
			t.Errorf("reopen for another cgroup: %v, want it to name the cgroup mismatch", err)
		}
		if got := attachedPrograms(t, other, ebpf.AttachCGroupInet4Connect); got != 0 {
			t.Errorf("%d programs attached to the other cgroup", got)
		}
		dp, err := Open(Config{CgroupPath: e.cg, PinPath: e.pin})
		if err != nil {
			t.Fatal(err)
		}
		e.dp = dp
		if dp.Adopted == nil || len(dp.Adopted.Frontends) == 0 {
			t.Fatalf("reopen adopted nothing: %+v", dp.Adopted)
		}
		if got := attachedPrograms(t, e.cg, ebpf.AttachCGroupInet4Connect); got != 1 {
			t.Errorf("after reopen %d connect4 programs attached, want 1 (replaced in place)", got)
		}
		// The new run's first sync takes over what it still wants and drops the rest.
		e.differ = backend.NewDiffer(NewBackend(dp.Maps(), []netip.Addr{netip.MustParseAddr(nodeIPv4)}, dp.Adopted))
		e.sync(t, localnode.IPv4, tcp4)
		if got := keys(e.reach(t, "tcp", "10.96.0.10:80", n)); got != both {
			t.Errorf("after restart: endpoints reached: %s, want %s", got, both)
		}
		close(stop)
		<-done
		t.Logf("%d connections during the restart, %d failed", made, failed)
		if r := e.do(t, "udp", "10.96.0.10:53"); r.Err == "" {
			t.Errorf("a service the new run does not have still translates: %+v", r)
		}
		if err := e.dp.Close(); err != nil {
			t.Fatal(err)
		}
		e.dp = nil
		if err := Cleanup(e.pin); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(e.pin); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("pin path after cleanup: %v", err)
		}
		if got := attachedPrograms(t, e.cg, ebpf.AttachCGroupInet4Connect); got != 0 {
			t.Errorf("after cleanup %d connect4 programs attached, want 0", got)
		}
		if r := e.do(t, "tcp", "10.96.0.10:80"); r.Err == "" {
			t.Errorf("after cleanup the ClusterIP still translates: %+v", r)
		}
	})
}

func attachedPrograms(t *testing.T, cg string, typ ebpf.AttachType) int {
	t.Helper()
	f, err := os.Open(cg)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(f.Fd()), Attach: typ})
	if err != nil {
		t.Fatal(err)
	}
	return len(res.Programs)
}

// TestOpenNamesWhatIsMissing: a host without what the programs need gets an error
// naming it, and nothing is pinned or attached.
func TestOpenNamesWhatIsMissing(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to probe BPF features")
	}
	notCgroup, notBPF := t.TempDir(), t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"cgroup path not cgroup v2", Config{CgroupPath: notCgroup, PinPath: filepath.Join(notBPF, "pins")}, "not on a cgroup v2 filesystem"},
		{"pin path not on bpffs", Config{CgroupPath: DefaultCgroupPath, PinPath: filepath.Join(notBPF, "pins")}, "is not a bpf filesystem"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.cfg.CgroupPath == DefaultCgroupPath {
				var st unix.Statfs_t
				if err := unix.Statfs(DefaultCgroupPath, &st); err != nil || st.Type != unix.CGROUP2_SUPER_MAGIC {
					t.Skipf("needs a cgroup v2 hierarchy at %s", DefaultCgroupPath)
				}
			}
			dp, err := Open(tc.cfg)
			if err == nil {
				dp.Close()
				_ = Cleanup(tc.cfg.PinPath)
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if _, err := os.Stat(tc.cfg.PinPath); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("pin path created anyway: %v", err)
			}
		})
	}
}
