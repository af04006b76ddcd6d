//go:build linux

package e2e

import (
	"bufio"
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

	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
)

// TestSocketLB runs the kube-proxy binary with --proxy-mode nftables --socket-lb and
// sends real traffic from clients that live in a cgroup v2 directory the test creates
// (never the host's root cgroup): the socket programs are attached to that cgroup only,
// so nothing else on the host is load-balanced by them. The same cases then run with
// the flag off, where the nftables rules carry the traffic.
//
// The clients are a child process of the test binary (clientAgent), born into the
// test's cgroup with clone3's CLONE_INTO_CGROUP: cgroup membership is per process, so
// sockets the test process itself opened would be outside it. The pods' echo servers
// stay in the test process: they must not be load-balanced.
//
// What proves the socket path: node-1's conntrack table has no entry whose original
// destination is the Service address (there was no DNAT), there is one to the endpoint
// (so the check can see these connections at all), and the server sees the client
// socket's own address, also for a client on the node, which nftables would
// masquerade. With the flag off the same conntrack query must find the DNAT entry: the
// check fails when the socket path is not taken.
func TestSocketLB(t *testing.T) {
	requireRoot(t, "nft", "unshare", "nsenter", "mount")
	if modes, err := selectedModes(os.Getenv(modesEnv)); err != nil {
		t.Fatal(err)
	} else if !containsString(modes, modeNFTables) {
		t.Skipf("socket load balancing runs on nftables mode, which %s=%q leaves out", modesEnv, os.Getenv(modesEnv))
	}
	requireMode(t, modeNFTables)
	cgroupRoot, err := cgroup2Root()
	if err != nil {
		t.Skipf("socket load balancing needs a cgroup v2 hierarchy: %v", err)
	}
	if err := bpfFSUsable(); err != nil {
		t.Skipf("socket load balancing needs a bpf filesystem: %v", err)
	}
	for _, tc := range []struct {
		name     string
		socketLB bool
	}{
		{"socket-lb", true},
		{"nftables-alone", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testSocketLB(t, cgroupRoot, tc.socketLB)
		})
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// socketLBWorld is the world of one TestSocketLB variant.
type socketLBWorld struct {
	*world
	kp         *kubeProxy
	dir        string
	client     *pod // on node-1, endpoint of nothing
	a1, a2, b1 *pod
	agent      *clientAgentProc
	services   map[string]svc
}

func testSocketLB(t *testing.T, cgroupRoot string, socketLB bool) {
	start := time.Now()
	w := &socketLBWorld{world: newWorld(t), dir: t.TempDir(), services: map[string]svc{}}
	cg := filepath.Join(cgroupRoot, w.prefix+"clients")
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Fatalf("creating the clients' cgroup: %v", err)
	}
	t.Cleanup(func() { removeCgroup(t, cg) })
	// Registered after the cgroup's removal, so it runs before it: a cgroup with a
	// process in it cannot be removed.
	w.agent = startClientAgent(t, cg)

	w.client = w.addPod("client", 0, 50)
	w.a1, w.a2, w.b1 = w.addPod("a1", 0, 11), w.addPod("a2", 0, 12), w.addPod("b1", 1, 11)
	writeManifest(t, w.dir, "cluster", w.clusterObjects()...)
	for _, s := range []svc{
		{name: "web", typ: v1.ServiceTypeNodePort, ip4: "198.19.0.10", ip6: "fd00:96::10", port: 80, nodePort: 30080, eps: ready(w.a1, w.b1)},
		{name: "readd", ip4: "198.19.0.24", port: 80, eps: ready(w.a1, w.a2)},
	} {
		w.services[s.name] = s
		writeService(t, w.dir, s)
	}
	kp := &kubeProxy{mode: modeNFTables, dir: w.dir}
	if socketLB {
		kp.socketLBCgroup = cg
	}
	w.kp = w.startKubeProxyOn(t, kp)
	// The first sync may have run before every manifest was read; and a world this
	// new may still be settling IPv6 (link-local addresses, neighbours), which lost
	// the first SYNs to an IPv6 ClusterIP in a run of the flag-off variant.
	n1 := w.nodes[0]
	for _, c := range []struct{ ns, addr string }{
		{w.client.ns, hostPort("198.19.0.24", 80)}, {w.client.ns, hostPort("fd00:96::10", 80)}, {n1.ns, hostPort("fd00:96::10", 80)},
	} {
		eventually(t, "an answer from "+c.addr, 30*time.Second, func() (bool, string) {
			r := w.agent.ask(t, "tcp", c.ns, c.addr)
			return r.Err == "", fmt.Sprint(r)
		})
	}
	t.Logf("world and kube-proxy (socket-lb=%v) ready in %v", socketLB, time.Since(start).Round(time.Millisecond))

	from := []struct{ name, ns string }{{"pod", w.client.ns}, {"node", n1.ns}}
	web := w.services["web"]

	t.Run("ClusterIP", func(t *testing.T) {
		for _, addr := range []string{hostPort(web.ip4, 80), hostPort(web.ip6, 80)} {
			for _, op := range []string{"tcp", "udpconn", "udp"} {
				seen := map[string]int{}
				for _, f := range from {
					for range 8 {
						r := w.agent.ask(t, op, f.ns, addr)
						// Through nftables the server may see another address: the
						// node's clients are masqueraded.
						w.checkAnswer(t, fmt.Sprintf("%s %s from %s", op, addr, f.name), r, addr, socketLB)
						seen[r.Pod]++
					}
				}
				if len(seen) != 2 || seen[w.a1.name] == 0 || seen[w.b1.name] == 0 {
					t.Errorf("%s %s: answered by %v, want both a1 and b1", op, addr, seen)
				}
			}
		}
	})

	t.Run("NodePort from the node", func(t *testing.T) {
		for _, addr := range []string{hostPort(n1.lan4, web.nodePort), hostPort(n1.lan6, web.nodePort)} {
			for _, op := range []string{"tcp", "udpconn"} {
				for range 4 {
					r := w.agent.ask(t, op, n1.ns, addr)
					w.checkAnswer(t, fmt.Sprintf("%s %s from the node", op, addr), r, addr, socketLB)
				}
			}
		}
	})

	t.Run("socket path or nftables", func(t *testing.T) {
		if _, err := exec.LookPath("conntrack"); err != nil {
			t.Skipf("needs the conntrack tool to read node-1's connection tracking: %v", err)
		}
		// A fresh connection of each kind, so the entries are there whatever ran
		// before.
		for _, c := range []struct{ op, ns, addr string }{
			{"tcp", w.client.ns, hostPort(web.ip4, 80)}, {"udpconn", w.client.ns, hostPort(web.ip4, 80)},
			{"tcp", n1.ns, hostPort(web.ip6, 80)}, {"udpconn", n1.ns, hostPort(web.ip6, 80)},
			{"tcp", n1.ns, hostPort(n1.lan4, web.nodePort)},
		} {
			if r := w.agent.ask(t, c.op, c.ns, c.addr); r.Err != "" {
				t.Fatalf("%s %s: %s", c.op, c.addr, r.Err)
			}
		}
		for _, c := range []struct {
			proto, dst string
			port       int32
		}{
			{"tcp", web.ip4, 80}, {"udp", web.ip4, 80}, {"tcp", web.ip6, 80}, {"udp", web.ip6, 80},
			{"tcp", n1.lan4, web.nodePort},
		} {
			dnat := conntrackCount(t, n1.ns, c.proto, c.dst, c.port)
			if socketLB && dnat != 0 {
				t.Errorf("%s to %s port %d: %d conntrack entries with the Service address as original destination, want 0 (translated by nftables, not at the socket)", c.proto, c.dst, c.port, dnat)
			}
			if !socketLB && dnat == 0 {
				t.Errorf("%s to %s port %d: no conntrack entry with the Service address as original destination: nftables did not DNAT it", c.proto, c.dst, c.port)
			}
		}
		// The same table must show the connections themselves, to the endpoints,
		// or a zero above would prove nothing.
		direct := 0
		for _, p := range []*pod{w.a1, w.b1} {
			direct += conntrackCount(t, n1.ns, "tcp", p.ip4, echoPort)
		}
		if socketLB && direct == 0 {
			t.Errorf("no conntrack entry to an endpoint: the check cannot see the connections")
		}
		t.Logf("socket-lb=%v: %d conntrack entries with an endpoint as original destination", socketLB, direct)
	})

	t.Run("endpoint removal and re-add", func(t *testing.T) {
		addr := hostPort("198.19.0.24", 80)
		s := w.services["readd"]
		s.eps = ready(w.a1)
		writeService(t, w.dir, s)
		// a2 keeps serving, so only the translation can keep new connections from it.
		took := eventually(t, "connections to stop reaching the removed endpoint", syncPeriod+changeSlack(t), func() (bool, string) {
			seen := w.spread(t, w.client.ns, addr, 10)
			return len(seen) == 1 && seen[w.a1.name] == 10, fmt.Sprint(seen)
		})
		t.Logf("removal took effect in %v", took.Round(time.Millisecond))
		s.eps = ready(w.a1, w.a2)
		writeService(t, w.dir, s)
		took = eventually(t, "the re-added endpoint to be reached again", syncPeriod+changeSlack(t), func() (bool, string) {
			seen := w.spread(t, w.client.ns, addr, 10)
			return seen[w.a2.name] > 0, fmt.Sprint(seen)
		})
		t.Logf("re-add took effect in %v", took.Round(time.Millisecond))
	})
	t.Logf("socket-lb=%v: %v in all", socketLB, time.Since(start).Round(time.Millisecond))
}

// checkAnswer checks one answer through Service address svcAddr: it came from an
// endpoint of the Service, the application saw only the Service address as its peer
// and, when sameAddr, the server saw the client socket's own address.
func (w *socketLBWorld) checkAnswer(t *testing.T, what string, r agentResult, svcAddr string, sameAddr bool) {
	t.Helper()
	if r.Err != "" {
		t.Fatalf("%s: %s", what, r.Err)
	}
	if r.Pod != w.a1.name && r.Pod != w.b1.name {
		t.Errorf("%s: answered by %q, want a1 or b1", what, r.Pod)
	}
	if r.Peer != svcAddr {
		t.Errorf("%s: the application saw peer %s, want the Service address", what, r.Peer)
	}
	if sameAddr && r.Saw != r.Local {
		t.Errorf("%s: the server saw client %s, the client socket is %s (translated on the way)", what, r.Saw, r.Local)
	}
}

// spread makes n TCP connections from ns through the agent and counts answers per pod.
func (w *socketLBWorld) spread(t *testing.T, ns, addr string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	for range n {
		r := w.agent.ask(t, "tcp", ns, addr)
		if r.Err != "" {
			t.Fatalf("tcp from %s to %s: %s", ns, addr, r.Err)
		}
		seen[r.Pod]++
	}
	return seen
}

// conntrackCount counts node namespace ns's conntrack entries of proto whose original
// destination is dst:port.
func conntrackCount(t *testing.T, ns, proto, dst string, port int32) int {
	t.Helper()
	family := "ipv4"
	if strings.Contains(dst, ":") {
		family = "ipv6"
	}
	cmd := exec.Command("ip", "netns", "exec", ns, "conntrack", "-L", "-f", family, "-p", proto,
		"--orig-dst", dst, "--orig-port-dst", fmt.Sprint(port))
	out, err := cmd.Output() // the entries; the summary line goes to stderr
	if err != nil {
		t.Fatalf("conntrack -L in %s: %v", ns, err)
	}
	n := 0
	for _, l := range strings.Split(string(out), "\n") {
		if strings.TrimSpace(l) != "" {
			n++
		}
	}
	return n
}

// cgroup2Root finds where the cgroup v2 hierarchy is mounted: /sys/fs/cgroup on a
// unified host, /sys/fs/cgroup/unified on a hybrid one.
func cgroup2Root() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		// mountinfo: ID parent major:minor root mountpoint options ... - fstype source options
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		f, pf := strings.Fields(pre), strings.Fields(post)
		if len(f) >= 5 && len(pf) >= 1 && pf[0] == "cgroup2" && f[3] == "/" {
			return f[4], nil
		}
	}
	return "", errors.New("no cgroup2 filesystem in /proc/self/mountinfo")
}

// bpfFSUsable mounts a bpf filesystem in a throwaway mount namespace, as kube-proxy's
// wrapper does (socketLBCommand).
func bpfFSUsable() error {
	out, err := exec.Command("unshare", "--mount", "--propagation", "private", "mount", "-t", "bpf", "bpf", "/sys/fs/bpf").CombinedOutput()
	if err != nil {
		return fmt.Errorf("mount -t bpf bpf /sys/fs/bpf in a new mount namespace: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}

// socketLBCommand runs kube-proxy with --socket-lb in network namespace ns, in a mount
// namespace of its own with a fresh bpf filesystem on /sys/fs/bpf: its pins (at the
// fixed default path) are then private to this run, neither the host's nor another
// test's, and go away with the process. nsenter enters only the network namespace
// (`ip netns exec` would remount /sys and hide the cgroup v2 mount). unshare and
// nsenter exec without forking, so the command's process is kube-proxy itself.
func socketLBCommand(ns, cgroup, bin string, args []string) *exec.Cmd {
	full := append([]string{"--mount", "--propagation", "private", "sh", "-c",
		`mount -t bpf bpf /sys/fs/bpf || exit 1; ns=$1; shift; exec nsenter --net=/run/netns/"$ns" -- "$@"`,
		"kube-proxy-socketlb", ns, bin, "--socket-lb", "--socket-lb-cgroup-path=" + cgroup}, args...)
	return exec.Command("unshare", full...)
}

// removeCgroup removes the test's cgroup once its processes are gone; the kernel
// finishes tearing an exited process down shortly after wait returns.
func removeCgroup(t *testing.T, cg string) {
	for range 50 {
		if err := os.Remove(cg); err == nil || errors.Is(err, os.ErrNotExist) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("could not remove the test cgroup %s", cg)
}

// clientAgentEnv makes the test binary the client agent (TestMain).
const clientAgentEnv = "KUBE_PROXY_E2E_CLIENT_AGENT"

type agentRequest struct {
	Op   string // tcp, udpconn (connected UDP), udp (unconnected: sendto and recvfrom)
	NS   string // network namespace to open the socket in
	Addr string
}

type agentResult struct {
	Err   string
	Local string // the client socket's own address
	Peer  string // getpeername (tcp, udpconn) or recvfrom's source (udp)
	Pod   string // the pod that answered
	Saw   string // the client address the pod saw
}

// clientAgentProc is the parent's handle on the agent.
type clientAgentProc struct {
	mu  sync.Mutex
	in  *json.Encoder
	out *bufio.Scanner
}

// startClientAgent starts the agent directly in cgroup cg; it is killed at cleanup.
func startClientAgent(t *testing.T, cg string) *clientAgentProc {
	t.Helper()
	cgfd, err := unix.Open(cg, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.Close(cgfd) }()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), clientAgentEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: cgfd}
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
		t.Skipf("cannot start a process in cgroup %s (clone3 CLONE_INTO_CGROUP, Linux 5.7): %v", cg, err)
	}
	t.Cleanup(func() {
		_ = stdin.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	a := &clientAgentProc{in: json.NewEncoder(stdin), out: bufio.NewScanner(stdout)}
	if !a.out.Scan() || a.out.Text() != "ready" {
		t.Fatalf("client agent did not start: %q %v", a.out.Text(), a.out.Err())
	}
	return a
}

// ask has the agent make one exchange; a failed exchange is in the result's Err.
func (a *clientAgentProc) ask(t *testing.T, op, ns, addr string) agentResult {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	if err := a.in.Encode(agentRequest{Op: op, NS: ns, Addr: addr}); err != nil {
		t.Fatalf("client agent: %v", err)
	}
	if !a.out.Scan() {
		t.Fatalf("client agent gone: %v", a.out.Err())
	}
	var r agentResult
	if err := json.Unmarshal(a.out.Bytes(), &r); err != nil {
		t.Fatalf("client agent answer %q: %v", a.out.Text(), err)
	}
	return r
}

// clientAgent serves agentRequests, one JSON line each on stdin, until stdin closes.
func clientAgent() int {
	fmt.Println("ready")
	in := bufio.NewScanner(os.Stdin)
	enc := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var req agentRequest
		if err := json.Unmarshal(in.Bytes(), &req); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		r, err := agentExchange(req)
		if err != nil {
			r = agentResult{Err: err.Error()}
		}
		if err := enc.Encode(r); err != nil {
			return 1
		}
	}
	return 0
}

func agentExchange(req agentRequest) (agentResult, error) {
	const timeout = 2 * time.Second
	var r agentResult
	dst, err := netip.ParseAddrPort(req.Addr)
	if err != nil {
		return r, err
	}
	var c net.Conn
	var uc *net.UDPConn
	err = inNetns(req.NS, func() error {
		var err error
		switch req.Op {
		case "tcp":
			c, err = net.DialTimeout("tcp", req.Addr, timeout)
		case "udpconn":
			c, err = net.Dial("udp", req.Addr)
		case "udp":
			network := "udp4"
			if dst.Addr().Is6() {
				network = "udp6"
			}
			uc, err = net.ListenUDP(network, nil)
			c = uc
		default:
			err = fmt.Errorf("unknown op %q", req.Op)
		}
		return err
	})
	if err != nil {
		return r, err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(timeout))
	var line string
	switch req.Op {
	case "tcp":
		line, err = bufio.NewReader(c).ReadString('\n')
		// Go reads the peer with getpeername after connect: what the
		// application sees, which the socket programs keep at the Service address.
		r.Peer = c.RemoteAddr().String()
	case "udpconn":
		if _, err = c.Write([]byte("?")); err == nil {
			buf := make([]byte, 1500)
			var n int
			n, err = c.Read(buf)
			line = string(buf[:n])
		}
		r.Peer = c.RemoteAddr().String()
	case "udp":
		if _, err = uc.WriteToUDPAddrPort([]byte("?"), dst); err == nil {
			buf := make([]byte, 1500)
			var n int
			var from netip.AddrPort
			n, from, err = uc.ReadFromUDPAddrPort(buf)
			line = string(buf[:n])
			r.Peer = netip.AddrPortFrom(from.Addr().Unmap(), from.Port()).String()
		}
	}
	if err != nil {
		return r, err
	}
	rep, err := parseReply(line)
	if err != nil {
		return r, err
	}
	r.Pod, r.Saw = rep.pod, rep.client
	// The server prints only the host part; compare hosts.
	local := c.LocalAddr().String()
	if host, _, err := net.SplitHostPort(local); err == nil {
		r.Local = host
	}
	if r.Local == "::" || r.Local == "0.0.0.0" || r.Local == "" {
		// An unconnected socket bound to the wildcard: the source the kernel chose
		// is what the server saw; there is nothing else to compare with.
		r.Local = r.Saw
	}
	return r, nil
}
