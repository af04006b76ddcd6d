//go:build linux

package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	libipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// This file holds what TestIPVS needs beyond the shared world: its own kube-proxy
// process (ipvs mode takes --ipvs-sync-period, not --iptables-sync-period, and the
// scheduler and restart cases change its flags), a reader of the kernel's IPVS table
// through netlink, echo servers that keep a connection open, and SCTP sockets (the net
// package has none).

// ipvsSyncPeriod bounds the repairs TestIPVS waits for ("within one sync period"). It
// is longer than the other modes' 2 s: under TCG in the QEMU guest the once-per-period
// check alone (a dozen iptables and ipset execs per family) takes several seconds, and
// with 2 s kube-proxy never rested.
const ipvsSyncPeriod = 10 * time.Second

// ipvsRepairSlack is what a repair may take beyond one sync period and the full sync
// that does it (measured from kube-proxy's log; see repairLimit): the check for state
// removed behind kube-proxy's back runs once per sync period, and a busy machine delays
// both. In the guest a repair took up to 7.7 s beyond the sync period when the longest
// full sync was 3.8 s: the check and the sync each cost about a full sync's time.
const ipvsRepairSlack = 5 * time.Second

// ipvsApplyTimeout bounds how long a manifest edit may take to reach the kernel. It is
// not what these tests measure (they report it), and under TCG in the QEMU guest a
// rescan and a sync take seconds each.
const ipvsApplyTimeout = 30 * time.Second

// holdPort is where the hold servers listen: they greet like the echo servers and then
// echo every line back until the client closes, so a test can keep a connection open
// through a virtual server and prove it still works.
const holdPort = 8081

// ipvsProxy is kube-proxy in ipvs mode in node-1.
type ipvsProxy struct {
	t       *testing.T
	w       *world
	dir     string
	bin     string
	out     *syncBuffer
	cmd     *exec.Cmd
	exited  chan error
	started time.Time
	extra   []string
	// synced is when the current run's first IPv4 sync was seen in its log; mark
	// is where that run's output starts.
	synced time.Time
	mark   int
}

func (w *world) startIPVSProxy(t *testing.T, dir string, extra ...string) *ipvsProxy {
	t.Helper()
	kp := &ipvsProxy{t: t, w: w, dir: dir, bin: kubeProxyBinary(t), out: &syncBuffer{}}
	t.Cleanup(func() {
		kp.kill()
		if t.Failed() {
			t.Logf("kube-proxy (ipvs) output (last 12kB):\n%s", tail(kp.out.String(), 12288))
		}
	})
	kp.start(extra...)
	return kp
}

// start runs kube-proxy with extra flags (replacing the previous run's extras) and
// waits for /healthz to turn 200, which it does after the first sync.
func (kp *ipvsProxy) start(extra ...string) {
	kp.t.Helper()
	kp.extra = extra
	n1 := kp.w.nodes[0]
	args := append([]string{"netns", "exec", n1.ns, kp.bin}, kp.flags()...)
	args = append(args, "-v=2")
	kp.cmd = exec.Command("ip", args...)
	kp.mark = len(kp.out.String())
	fmt.Fprintf(kp.out, "=== start %s\n", strings.Join(args, " "))
	kp.cmd.Stdout, kp.cmd.Stderr = kp.out, kp.out
	kp.started = time.Now()
	if err := kp.cmd.Start(); err != nil {
		kp.t.Fatal(err)
	}
	exited := make(chan error, 1)
	kp.exited = exited
	go func() { exited <- kp.cmd.Wait() }()
	kp.waitHealthy(90 * time.Second)
	kp.waitSynced(90 * time.Second)
}

// waitSynced waits for this run's first IPv4 sync to complete. /healthz is no proof of
// it: as upstream's, it answers 200 before the first sync while nothing is overdue, and
// under TCG in the QEMU guest kube-proxy takes some 10 s from start to its first sync.
func (kp *ipvsProxy) waitSynced(timeout time.Duration) {
	kp.t.Helper()
	eventually(kp.t, "kube-proxy's first IPv4 sync", timeout, func() (bool, string) {
		for _, l := range strings.Split(kp.out.String()[kp.mark:], "\n") {
			if strings.Contains(l, `"SyncProxyRules complete"`) && strings.Contains(l, `ipFamily="IPv4"`) {
				kp.synced = time.Now()
				return true, ""
			}
		}
		return false, tail(kp.out.String()[kp.mark:], 2048)
	})
}

// maxFullSync is the longest full IPv4 sync in kube-proxy's log so far ("elapsed" of
// its "SyncProxyRules complete" lines at -v=2).
func (kp *ipvsProxy) maxFullSync() time.Duration {
	var longest time.Duration
	for _, l := range strings.Split(kp.out.String(), "\n") {
		if !strings.Contains(l, `"SyncProxyRules complete"`) || !strings.Contains(l, `ipFamily="IPv4"`) || !strings.Contains(l, "fullSync=true") {
			continue
		}
		_, rest, ok := strings.Cut(l, `elapsed="`)
		if !ok {
			continue
		}
		v, _, _ := strings.Cut(rest, `"`)
		if d, err := time.ParseDuration(v); err == nil && d > longest {
			longest = d
		}
	}
	return longest
}

// waitIdle waits until no IPv4 sync is in progress (the last sync line of the log is a
// completion), so that what a test does next is not queued behind a sync begun before.
func (kp *ipvsProxy) waitIdle(t *testing.T) {
	t.Helper()
	eventually(t, "kube-proxy's IPv4 sync in progress to end", 2*time.Minute, func() (bool, string) {
		idle := true
		for _, l := range strings.Split(kp.out.String()[kp.mark:], "\n") {
			if !strings.Contains(l, `ipFamily="IPv4"`) {
				continue
			}
			switch {
			case strings.Contains(l, `"Syncing rules"`):
				idle = false
			case strings.Contains(l, `"SyncProxyRules complete"`), strings.Contains(l, `"Sync failed"`):
				idle = true
			}
		}
		return idle, "an IPv4 sync is running"
	})
}

// logOnFailure logs kube-proxy's output written while t ran, if t fails.
func (kp *ipvsProxy) logOnFailure(t *testing.T) {
	from := len(kp.out.String())
	t.Cleanup(func() {
		if t.Failed() {
			out := kp.out.String()
			if from > len(out) {
				from = 0
			}
			t.Logf("kube-proxy output during %s (last 16kB):\n%s", t.Name(), tail(out[from:], 16384))
		}
	})
}

// flags are kube-proxy's flags; trace computes the expected state from the same ones.
func (kp *ipvsProxy) flags() []string {
	return append([]string{
		"--manifests=" + kp.dir, "--manifests-rescan-period=1s",
		"--hostname-override=" + kp.w.nodes[0].name,
		"--proxy-mode=ipvs",
		"--cluster-cidr=" + clusterCIDRs,
		// In ipvs mode --iptables-sync-period is ignored (as upstream): the ipvs
		// flags set the period.
		"--ipvs-sync-period=" + ipvsSyncPeriod.String(),
		"--ipvs-min-sync-period=100ms",
		"--ipvs-strict-arp",
		// conntrack limits are host-wide, not per namespace: leave them alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
	}, kp.extra...)
}

// kill ends kube-proxy with SIGKILL: it gets no chance to clean anything up, as in a
// crash or an OOM kill, and the state it leaves is what the next run must adopt.
func (kp *ipvsProxy) kill() {
	if kp.cmd == nil {
		return
	}
	_ = kp.cmd.Process.Signal(syscall.SIGKILL)
	<-kp.exited
	kp.cmd = nil
}

func (kp *ipvsProxy) waitHealthy(timeout time.Duration) {
	kp.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		select {
		case err := <-kp.exited:
			kp.cmd = nil
			kp.t.Fatalf("kube-proxy exited: %v\n%s", err, tail(kp.out.String(), 8192))
		default:
		}
		code, _, _ := httpGet(kp.w.nodes[0].ns, "http://127.0.0.1:10256/healthz")
		if code == http.StatusOK {
			return
		}
		if time.Now().After(deadline) {
			kp.t.Fatalf("kube-proxy not healthy after %v\n%s", timeout, tail(kp.out.String(), 8192))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ipvsHandle opens a netlink handle on the IPVS table of namespace ns.
func ipvsHandle(t testing.TB, ns string) *libipvs.Handle {
	t.Helper()
	h, err := libipvs.New("/run/netns/" + ns)
	if err != nil {
		t.Fatalf("IPVS netlink handle in %s: %v", ns, err)
	}
	t.Cleanup(h.Close)
	return h
}

// kernelVS is one virtual server as the kernel lists it, with its real servers.
type kernelVS struct {
	svc *libipvs.Service
	rss map[string]*libipvs.Destination // by "ip:port"
}

var ipvsProtoNames = map[uint16]string{unix.IPPROTO_TCP: "TCP", unix.IPPROTO_UDP: "UDP", unix.IPPROTO_SCTP: "SCTP"}

// vsKey spells a virtual server as ipvsadm does: "198.19.0.10:80/TCP".
func vsKey(addr string, port int, proto string) string {
	return net.JoinHostPort(addr, strconv.Itoa(port)) + "/" + proto
}

// readIPVSTable lists the kernel's IPVS table of one family (v6 false: IPv4).
func readIPVSTable(h *libipvs.Handle, v6 bool) (map[string]*kernelVS, error) {
	svcs, err := h.GetServices()
	if err != nil {
		return nil, fmt.Errorf("listing IPVS services: %w", err)
	}
	out := map[string]*kernelVS{}
	for _, s := range svcs {
		if s.Address == nil || (s.Address.To4() == nil) != v6 {
			continue
		}
		dsts, err := h.GetDestinations(s)
		if err != nil {
			return nil, fmt.Errorf("listing real servers of %s:%d: %w", s.Address, s.Port, err)
		}
		k := &kernelVS{svc: s, rss: map[string]*libipvs.Destination{}}
		for _, d := range dsts {
			k.rss[net.JoinHostPort(d.Address.String(), strconv.Itoa(int(d.Port)))] = d
		}
		out[vsKey(s.Address.String(), int(s.Port), ipvsProtoNames[s.Protocol])] = k
	}
	return out, nil
}

func (k *kernelVS) String() string {
	var rss []string
	for a, d := range k.rss {
		rss = append(rss, fmt.Sprintf("%s w%d fwd%d act%d inact%d", a, d.Weight, d.ConnectionFlags&libipvs.ConnFwdMask, d.ActiveConnections, d.InactiveConnections))
	}
	sort.Strings(rss)
	return fmt.Sprintf("%s flags %#x conns %d -> [%s]", k.svc.SchedName, k.svc.Flags, k.svc.Stats.Connections, strings.Join(rss, ", "))
}

func tableString(tab map[string]*kernelVS) string {
	var lines []string
	for key, k := range tab {
		lines = append(lines, key+" "+k.String())
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// holdServer accepts TCP connections in a pod, greets like the echo servers and then
// echoes every line until the client goes away.
type holdServer struct {
	l     net.Listener
	mu    sync.Mutex
	conns map[net.Conn]bool
	wg    sync.WaitGroup
}

func startHold(t *testing.T, p *pod) *holdServer {
	t.Helper()
	hs := &holdServer{conns: map[net.Conn]bool{}}
	err := inNetns(p.ns, func() error {
		var err error
		hs.l, err = net.Listen("tcp", fmt.Sprintf(":%d", holdPort))
		return err
	})
	if err != nil {
		t.Fatalf("hold server in %s: %v", p.name, err)
	}
	hs.wg.Add(1)
	go func() {
		defer hs.wg.Done()
		for {
			c, err := hs.l.Accept()
			if err != nil {
				return
			}
			hs.mu.Lock()
			hs.conns[c] = true
			hs.mu.Unlock()
			hs.wg.Add(1)
			go func() {
				defer hs.wg.Done()
				defer func() {
					hs.mu.Lock()
					delete(hs.conns, c)
					hs.mu.Unlock()
					_ = c.Close()
				}()
				if _, err := fmt.Fprintf(c, "%s %s\n", p.name, c.RemoteAddr()); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = hs.l.Close()
		hs.mu.Lock()
		for c := range hs.conns {
			_ = c.Close()
		}
		hs.mu.Unlock()
		hs.wg.Wait()
	})
	return hs
}

// longConn is a client connection kept open through a Service.
type longConn struct {
	c     *net.TCPConn
	r     *bufio.Reader
	reply reply
}

func openLong(ns, addr string) (*longConn, error) {
	var c net.Conn
	err := inNetns(ns, func() error {
		var err error
		c, err = net.DialTimeout("tcp", addr, 3*time.Second)
		return err
	})
	if err != nil {
		return nil, err
	}
	lc := &longConn{c: c.(*net.TCPConn), r: bufio.NewReader(c)}
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := lc.r.ReadString('\n')
	if err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("greeting from %s: %w", addr, err)
	}
	if lc.reply, err = parseReply(line); err != nil {
		_ = c.Close()
		return nil, err
	}
	return lc, nil
}

// roundTrip proves the connection still carries data both ways.
func (lc *longConn) roundTrip(msg string) error {
	_ = lc.c.SetDeadline(time.Now().Add(3 * time.Second))
	if _, err := fmt.Fprintf(lc.c, "%s\n", msg); err != nil {
		return fmt.Errorf("writing %q: %w", msg, err)
	}
	line, err := lc.r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("reading the echo of %q: %w", msg, err)
	}
	if strings.TrimSpace(line) != msg {
		return fmt.Errorf("echo of %q was %q", msg, line)
	}
	return nil
}

// reset closes the connection with a RST: IPVS then keeps the connection entry in its
// CLOSE state for 10 s, where a FIN would leave it in TIME_WAIT for 2 minutes.
func (lc *longConn) reset() {
	_ = lc.c.SetLinger(0)
	_ = lc.c.Close()
}

// retarget rewrites objects made by svc.objects() so that the Service has only the
// given protocols and sends them to targetPort on the pods.
func retarget(objs []any, targetPort int32, protos ...v1.Protocol) []any {
	keep := func(p v1.Protocol) bool {
		for _, q := range protos {
			if p == q {
				return true
			}
		}
		return false
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			var ports []v1.ServicePort
			for _, p := range o.Spec.Ports {
				if keep(p.Protocol) {
					p.TargetPort = intstr.FromInt32(targetPort)
					ports = append(ports, p)
				}
			}
			o.Spec.Ports = ports
		case *discovery.EndpointSlice:
			var ports []discovery.EndpointPort
			for _, p := range o.Ports {
				if keep(*p.Protocol) {
					p.Port = ptr.To(targetPort)
					ports = append(ports, p)
				}
			}
			o.Ports = ports
		}
	}
	return objs
}

// sctpService is a Service with one SCTP port to echoPort: svc.objects() with the UDP
// port dropped and the TCP port renamed and turned into SCTP.
func sctpService(s svc) []any {
	objs := retarget(s.objects(), echoPort, v1.ProtocolTCP)
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			o.Spec.Ports[0].Protocol, o.Spec.Ports[0].Name = v1.ProtocolSCTP, "sctp"
		case *discovery.EndpointSlice:
			o.Ports[0].Protocol, o.Ports[0].Name = ptr.To(v1.ProtocolSCTP), ptr.To("sctp")
		}
	}
	return objs
}

// errNoSCTP says the kernel has no SCTP sockets (no sctp module).
var errNoSCTP = errors.New("no SCTP sockets in this kernel (sctp module missing)")

// sctpSocket opens a one-to-one style (SOCK_STREAM) IPv4 SCTP socket in ns. Such a
// socket behaves as a TCP one does for connect, accept, read and write.
func sctpSocket(ns string) (int, error) {
	fd := -1
	err := inNetns(ns, func() error {
		var err error
		fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, unix.IPPROTO_SCTP)
		return err
	})
	if errors.Is(err, unix.EPROTONOSUPPORT) || errors.Is(err, unix.ESOCKTNOSUPPORT) {
		return -1, fmt.Errorf("%w: %w", errNoSCTP, err)
	}
	if err != nil {
		return -1, fmt.Errorf("SCTP socket in %s: %w", ns, err)
	}
	return fd, nil
}

// startSCTPEcho serves SCTP on echoPort in pod p as the echo servers serve TCP. The
// listening socket is handed to the net package (as a stream listener), so Accept goes
// through the poller and Close stops it.
func startSCTPEcho(t *testing.T, p *pod) error {
	t.Helper()
	fd, err := sctpSocket(p.ns)
	if err != nil {
		return err
	}
	if err := unix.Bind(fd, &unix.SockaddrInet4{Port: echoPort}); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("SCTP bind in %s: %w", p.name, err)
	}
	if err := unix.Listen(fd, 16); err != nil {
		_ = unix.Close(fd)
		return fmt.Errorf("SCTP listen in %s: %w", p.name, err)
	}
	f := os.NewFile(uintptr(fd), "sctp-listener")
	l, err := net.FileListener(f)
	_ = f.Close()
	if err != nil {
		return fmt.Errorf("SCTP listener in %s: %w", p.name, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			// The address is the SCTP peer's: the net package reads it as TCP.
			_, _ = fmt.Fprintf(c, "%s %s\n", p.name, c.RemoteAddr())
			_ = c.Close()
		}
	}()
	t.Cleanup(func() { _ = l.Close(); <-done })
	return nil
}

// askSCTP connects from ns to addr over SCTP and returns the echo.
func askSCTP(ns, addr string, timeout time.Duration) (reply, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return reply{}, err
	}
	ip := net.ParseIP(host).To4()
	pn, _ := strconv.Atoi(port)
	fd, err := sctpSocket(ns)
	if err != nil {
		return reply{}, err
	}
	defer func() { _ = unix.Close(fd) }()
	tv := unix.NsecToTimeval(timeout.Nanoseconds())
	// connect() and read() honour these on a blocking socket.
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	sa := &unix.SockaddrInet4{Port: pn}
	copy(sa.Addr[:], ip)
	if err := unix.Connect(fd, sa); err != nil {
		return reply{}, fmt.Errorf("SCTP connect to %s: %w", addr, err)
	}
	var buf []byte
	b := make([]byte, 256)
	for !strings.Contains(string(buf), "\n") {
		n, err := unix.Read(fd, b)
		if err != nil {
			return reply{}, fmt.Errorf("SCTP read from %s: %w", addr, err)
		}
		if n == 0 {
			break
		}
		buf = append(buf, b[:n]...)
	}
	return parseReply(string(buf))
}
