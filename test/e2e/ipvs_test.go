//go:build linux

package e2e

// TestIPVS is ipvs mode against the kernel's own IPVS. The host of the development
// machine has no ip_vs, so it skips there; test/vm's TestDatapathInVM runs it in a QEMU
// guest on a Debian 6.1 kernel:
//
//	sudo KUBE_PROXY_VM_E2E_MODES=ipvs KUBE_PROXY_VM_E2E_RUN='^TestIPVS$' \
//	    go test -count=1 -v -run TestDatapathInVM ./test/vm/
//
// One world, one kube-proxy (--ipvs-sync-period 10s, strict ARP), read through netlink
// (github.com/moby/ipvs) in node-1's namespace. The subtests:
//   - TableMatchesPredictionAndConnections: every virtual server of ClusterIP, NodePort,
//     externalIP and LoadBalancer Services (TCP, UDP, SCTP) has exactly the expected real
//     servers, weight 1, masquerading; `kube-proxy trace --live` with the same manifests
//     and flags finds the live state (virtual and real servers, ip sets, kube-ipvs0,
//     iptables) equal to what the ipvs dry run plans, per family; the trace of the live
//     state names the kernel's real servers, and real connections reach only them and,
//     round robin, each of them. SCTP connections need the guest's sctp module; without
//     it the SCTP virtual server is still checked.
//   - Sysctls: net/ipv4/vs/{conntrack,expire_nodest_conn,expire_quiescent_template} 1,
//     conn_reuse_mode 0 on kernels 4.1 to 5.8 and left at 1 from 5.9, ip_forward 1,
//     arp_ignore 1 and arp_announce 2 (strict ARP), read from /proc/sys.
//   - GracefulTermination: an endpoint removed with a TCP connection open through it
//     leaves its real server at weight 0 with the connection active and working, new
//     connections avoid it, it survives a check of the manager (one a minute), and it is
//     deleted once the connection is reset and IPVS forgets it.
//   - UDPRealServerRemovedAtOnce: as upstream, a UDP real server is deleted at once (no
//     drain), and the same client socket then reaches the remaining endpoint.
//   - Repair: a virtual server, and a real server, deleted by hand are back within one
//     sync period plus the check and a full sync (measured, as TCG makes them slow).
//   - RestartAdoption: kube-proxy SIGKILLed and started with a TCP connection open
//     through a ClusterIP: the connection still works, and no virtual server is missing
//     from any poll of the table (every 20 ms) or restarts its connection counter.
//   - Schedulers: kube-proxy restarted with each scheduler the kernel has (rr wrr lc wlc
//     lblc lblcr dh sh sed nq mh fo ovf; twos when built): every virtual server uses it
//     (mh with the sh-port flag) and connections work.

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	libipvs "github.com/moby/ipvs"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/trace"
	utilipvs "k8s.io/net-utils/ipvs"
)

// ipvsWorld is TestIPVS's world: the shared namespaces with ipvs mode's kube-proxy in
// node-1 and Services of every kind.
type ipvsWorld struct {
	*world
	kp  *ipvsProxy
	dir string

	client, a1, a2, b1 *pod
	g1, g2, h1         *pod // hold servers: graceful termination, restart
	u1, u2             *pod // UDP graceful termination
	s1                 *pod // SCTP
	sctpErr            error
	services           map[string]svc
}

// ipvsGTPeriod is how often the graceful termination manager looks at draining real
// servers (upstream's rsCheckDeleteInterval).
const ipvsGTPeriod = time.Minute

// newIPVSWorld builds the world and starts kube-proxy in ipvs mode on its manifests.
func newIPVSWorld(t *testing.T) *ipvsWorld {
	w := &ipvsWorld{world: newWorld(t), dir: t.TempDir(), services: map[string]svc{}}
	w.client = w.addPod("client", 0, 50)
	w.a1, w.a2, w.b1 = w.addPod("a1", 0, 11), w.addPod("a2", 0, 12), w.addPod("b1", 1, 11)
	w.g1, w.g2, w.h1 = w.addPod("g1", 0, 21), w.addPod("g2", 0, 22), w.addPod("h1", 1, 23)
	w.u1, w.u2 = w.addPod("u1", 0, 31), w.addPod("u2", 1, 31)
	w.s1 = w.addPod("s1", 0, 41)
	for _, p := range []*pod{w.g1, w.g2, w.h1} {
		startHold(t, p)
	}
	w.sctpErr = startSCTPEcho(t, w.s1)
	if w.sctpErr != nil && !errors.Is(w.sctpErr, errNoSCTP) {
		t.Fatal(w.sctpErr)
	}

	writeManifest(t, w.dir, "cluster", w.clusterObjects()...)
	for _, s := range []svc{
		{name: "web", ip4: "198.19.0.10", port: 80, eps: ready(w.a1, w.a2, w.b1)},
		{name: "np", typ: v1.ServiceTypeNodePort, ip4: "198.19.0.11", port: 80, nodePort: 30080, eps: ready(w.a1, w.b1)},
		{name: "extip", ip4: "198.19.0.12", port: 80, externalIPs: []string{"198.18.100.10"}, eps: ready(w.a1, w.b1)},
		{name: "lb", typ: v1.ServiceTypeLoadBalancer, ip4: "198.19.0.13", port: 80, nodePort: 30081,
			lbIP: "198.18.100.20", eps: ready(w.a1, w.b1)},
		{name: "sctp", ip4: "198.19.0.14", port: 80, eps: ready(w.s1)},
		{name: "gt", ip4: "198.19.0.20", port: 80, eps: ready(w.g1, w.g2)},
		{name: "gtu", ip4: "198.19.0.21", port: 80, eps: ready(w.u1, w.u2)},
		{name: "long", ip4: "198.19.0.22", port: 80, eps: ready(w.h1)},
	} {
		w.services[s.name] = s
		w.writeService(t, s)
	}
	w.kp = w.startIPVSProxy(t, w.dir)
	// /healthz turns 200 after the first sync, which may have run before every
	// manifest was read: wait for the last Service's virtual server.
	h := ipvsHandle(t, w.nodes[0].ns)
	eventually(t, "every Service's virtual servers", 60*time.Second, func() (bool, string) {
		tab, err := readIPVSTable(h, false)
		if err != nil {
			return false, err.Error()
		}
		k := tab[vsKey("198.19.0.22", 80, "TCP")]
		return k != nil && len(k.rss) == 1, tableString(tab)
	})
	return w
}

// writeService writes one of TestIPVS's Services: the graceful termination and restart
// Services go to the hold servers (TCP only), the SCTP one is SCTP only.
func (w *ipvsWorld) writeService(t *testing.T, s svc) {
	t.Helper()
	objs := s.objects()
	switch s.name {
	case "gt", "long":
		objs = retarget(objs, holdPort, v1.ProtocolTCP)
	case "gtu":
		objs = retarget(objs, echoPort, v1.ProtocolUDP)
	case "sctp":
		objs = sctpService(s)
	}
	writeManifest(t, w.dir, "svc-"+s.name, objs...)
}

func podAddr(p *pod, port int) string { return hostPort(p.ip4, int32(port)) }

// TestIPVS runs ipvs mode against the kernel's own IPVS (in the QEMU guest of test/vm;
// hosts without ip_vs skip it) and checks what only a real IPVS can show: the virtual
// and real servers kube-proxy programs against its offline prediction and against real
// connections, graceful termination, the sysctls, adoption of the state across a
// restart, repair of state deleted by hand, and every scheduler.
func TestIPVS(t *testing.T) {
	requireRoot(t)
	// It is an ipvs-mode test: a run of other modes only (the QEMU guest runs one
	// mode per process) leaves it out.
	modes, err := selectedModes(os.Getenv(modesEnv))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(modes, modeIPVS) {
		t.Skipf("%s=%s does not select ipvs mode", modesEnv, os.Getenv(modesEnv))
	}
	if err := utilipvs.Available(); err != nil {
		t.Skipf("IPVS is absent in this kernel (test/vm runs this test in a guest that has it): %v", err)
	}
	requireMode(t, modeIPVS)
	start := time.Now()
	w := newIPVSWorld(t)
	figure(t, "mode=ipvs TestIPVS world and first sync ready in %v", time.Since(start).Round(time.Millisecond))

	// Graceful termination needs the draining real server to outlive one of the
	// manager's minute ticks while its connection is open; the cases that do not
	// restart kube-proxy run meanwhile.
	var gt *gracefulCase
	t.Run("GracefulTermination/drain", func(t *testing.T) { gt = w.gracefulDrain(t) })
	if gt != nil {
		// The connection outlives the subtest that opened it.
		t.Cleanup(gt.conn.reset)
	}
	t.Run("TableMatchesPredictionAndConnections", w.testTable)
	t.Run("Sysctls", w.testSysctls)
	t.Run("UDPRealServerRemovedAtOnce", w.testUDPRemoval)
	t.Run("Repair", w.testRepair)
	t.Run("GracefulTermination/remove-after-close", func(t *testing.T) {
		if gt == nil {
			t.Skip("the drain phase failed")
		}
		w.gracefulRemove(t, gt)
	})
	t.Run("RestartAdoption", w.testRestart)
	t.Run("Schedulers", w.testSchedulers)
	figure(t, "mode=ipvs TestIPVS took %v", time.Since(start).Round(time.Millisecond))
}

// expectedVS is a virtual server TestIPVS's manifests must produce, with its real servers.
type expectedVS struct {
	key string
	rss []string
}

func (w *ipvsWorld) expectedTable() []expectedVS {
	n1 := w.nodes[0]
	eps := func(port int, ps ...*pod) []string {
		var out []string
		for _, p := range ps {
			out = append(out, podAddr(p, port))
		}
		sort.Strings(out)
		return out
	}
	var out []expectedVS
	both := func(addr string, port int, rss []string) {
		out = append(out, expectedVS{vsKey(addr, port, "TCP"), rss}, expectedVS{vsKey(addr, port, "UDP"), rss})
	}
	both("198.19.0.10", 80, eps(echoPort, w.a1, w.a2, w.b1))
	ab := eps(echoPort, w.a1, w.b1)
	both("198.19.0.11", 80, ab)
	both(n1.lan4, 30080, ab)
	both("198.19.0.12", 80, ab)
	both("198.18.100.10", 80, ab)
	both("198.19.0.13", 80, ab)
	both("198.18.100.20", 80, ab)
	both(n1.lan4, 30081, ab)
	out = append(out,
		expectedVS{vsKey("198.19.0.14", 80, "SCTP"), eps(echoPort, w.s1)},
		expectedVS{vsKey("198.19.0.21", 80, "UDP"), eps(echoPort, w.u1, w.u2)},
		expectedVS{vsKey("198.19.0.22", 80, "TCP"), eps(holdPort, w.h1)},
	)
	return out
}

// checkTable compares the kernel's table with expectedTable: each virtual server with
// the scheduler, exactly its real servers, weight 1 and masquerading (NAT). It returns
// the problems.
func (w *ipvsWorld) checkTable(tab map[string]*kernelVS, sched string) []string {
	var problems []string
	for _, e := range w.expectedTable() {
		k := tab[e.key]
		if k == nil {
			problems = append(problems, "no virtual server "+e.key)
			continue
		}
		if k.svc.SchedName != sched {
			problems = append(problems, fmt.Sprintf("%s: scheduler %q, want %q", e.key, k.svc.SchedName, sched))
		}
		var got []string
		for a, d := range k.rss {
			got = append(got, a)
			if d.Weight != 1 || d.ConnectionFlags&libipvs.ConnFwdMask != libipvs.ConnFwdMasq {
				problems = append(problems, fmt.Sprintf("%s real server %s: weight %d forwarding %d, want weight 1 and masquerading",
					e.key, a, d.Weight, d.ConnectionFlags&libipvs.ConnFwdMask))
			}
		}
		sort.Strings(got)
		if !slices.Equal(got, e.rss) {
			problems = append(problems, fmt.Sprintf("%s: real servers %v, want %v", e.key, got, e.rss))
		}
	}
	return problems
}

// ipvsTraceReport is the part of `kube-proxy trace -o json` TestIPVS reads.
type ipvsTraceReport struct {
	Rules       string             `json:"rules"`
	Result      *trace.Result      `json:"result"`
	InSync      *bool              `json:"inSync"`
	Differences []trace.Difference `json:"differences"`
}

// trace runs kube-proxy trace on node-1's live state; with compare, it also computes
// the state kube-proxy's ipvs dry run plans for the same manifests and flags and
// compares the two (trace.CompareIPVS).
func (w *ipvsWorld) trace(t *testing.T, compare bool, src, iif, dst, proto string) ipvsTraceReport {
	t.Helper()
	args := []string{"trace", "--netns", w.nodes[0].ns, "--proxy-mode", "ipvs",
		"--from", src, "--to", dst + "/" + proto, "-o", "json"}
	if compare {
		args = append(args, "--live", "--max-differences", "0")
		// The same flags as the running kube-proxy, so the dry run plans
		// what it should have programmed.
		args = append(args, w.kp.flags()...)
	}
	if iif == "" {
		args = append(args, "--from-host")
	} else {
		args = append(args, "--in-interface", iif)
	}
	var rep ipvsTraceReport
	if out := runTraceJSON(t, w.kp.bin, args, &rep); rep.Result == nil {
		t.Fatalf("kube-proxy trace -o json: no result\n%s", out)
	}
	if len(rep.Result.Unknowns) > 0 {
		t.Errorf("the trace meets rules it does not model: %+v", rep.Result.Unknowns)
	}
	return rep
}

// predicted is the set of pods (by ip:port) a trace says can answer, or its verdict.
func predicted(t *testing.T, rep ipvsTraceReport) (kind string, dests []string) {
	t.Helper()
	kinds := map[string]bool{}
	for _, o := range rep.Result.Outcomes {
		switch o.Verdict {
		case trace.Accept:
			kinds["answer"] = true
			dests = append(dests, o.DNAT)
		case trace.Reject:
			kinds["refused"] = true
		case trace.Drop:
			kinds["no answer"] = true
		default:
			t.Fatalf("trace outcome %s: %s", o.Key(), o.Reason)
		}
	}
	var ks []string
	for k := range kinds {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	sort.Strings(dests)
	return strings.Join(ks, "+"), slices.Compact(dests)
}

func (w *ipvsWorld) podByAddr() map[string]*pod {
	m := map[string]*pod{}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range w.pods {
		m[p.ip4] = p
	}
	return m
}

// testTable: the kernel's table is what the manifests ask for, what kube-proxy's dry
// run predicts, and what real connections do.
func (w *ipvsWorld) testTable(t *testing.T) {
	w.kp.logOnFailure(t)
	n1 := w.nodes[0]
	h := ipvsHandle(t, n1.ns)
	tab, err := readIPVSTable(h, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range w.checkTable(tab, "rr") {
		t.Error(p)
	}
	if t.Failed() {
		t.Logf("kernel IPVS table (IPv4):\n%s", tableString(tab))
	}

	if _, err := exec.LookPath("nsenter"); err != nil {
		t.Skipf("kube-proxy trace --netns needs nsenter: %v", err)
	}
	// The live state against the dry run's plan, per family: virtual and real
	// servers, ip sets, kube-ipvs0's addresses, iptables rules.
	for _, fam := range []struct{ src, dst string }{{w.client.ip4, "198.19.0.10:80"}, {w.client.ip6, "[fd00:96::1]:80"}} {
		rep := w.trace(t, true, fam.src, "br0", fam.dst, "tcp")
		if rep.InSync == nil {
			t.Fatalf("trace --live with --manifests did not compare: %+v", rep)
		}
		var b strings.Builder
		// The real server GracefulTermination/drain may have left draining (weight
		// 0, live only) is no difference: trace.CompareIPVS accepts draining ones.
		for _, d := range rep.Differences {
			fmt.Fprintf(&b, "  %s\n", d)
		}
		if b.Len() > 0 {
			t.Errorf("live IPVS state of %s differs from kube-proxy's offline prediction:\n%s", fam.src, b.String())
		}
	}

	ext100 := lanPrefix4 + ".100"
	// Every probe checks real connections against the kernel's table; those with
	// traced also against the trace of the live state (each trace takes seconds
	// under TCG, so one per kind of address).
	type probe struct {
		name, ns, src, iif, dst, proto string
		traced                         bool
	}
	probes := []probe{
		{"ClusterIP TCP", w.client.ns, w.client.ip4, "br0", "198.19.0.10:80", "tcp", true},
		{"ClusterIP UDP", w.client.ns, w.client.ip4, "br0", "198.19.0.10:80", "udp", true},
		{"ClusterIP TCP from the node", n1.ns, n1.lan4, "", "198.19.0.10:80", "tcp", false},
		{"NodePort TCP", w.ext, ext100, "eth0", hostPort(n1.lan4, 30080), "tcp", true},
		{"NodePort UDP", w.ext, ext100, "eth0", hostPort(n1.lan4, 30080), "udp", false},
		{"externalIP TCP", w.ext, ext100, "eth0", "198.18.100.10:80", "tcp", true},
		{"externalIP UDP", w.ext, ext100, "eth0", "198.18.100.10:80", "udp", false},
		{"LoadBalancer TCP", w.ext, ext100, "eth0", "198.18.100.20:80", "tcp", true},
		{"LoadBalancer NodePort TCP", w.ext, ext100, "eth0", hostPort(n1.lan4, 30081), "tcp", false},
		{"ClusterIP SCTP", w.client.ns, w.client.ip4, "br0", "198.19.0.14:80", "sctp", true},
		{"hold ClusterIP TCP", w.client.ns, w.client.ip4, "br0", "198.19.0.22:80", "tcp", false},
	}
	byAddr := w.podByAddr()
	for _, pr := range probes {
		t.Run(strings.ReplaceAll(pr.name, " ", "_"), func(t *testing.T) {
			host, portStr, _ := net.SplitHostPort(pr.dst)
			port, _ := strconv.Atoi(portStr)
			k := tab[vsKey(host, port, strings.ToUpper(pr.proto))]
			if k == nil {
				t.Fatalf("no virtual server for %s/%s", pr.dst, pr.proto)
			}
			var kernel []string
			for a := range k.rss {
				kernel = append(kernel, a)
			}
			sort.Strings(kernel)
			if len(kernel) == 0 {
				// Every probed Service has endpoints: nothing to connect to is a failure,
				// not a vacuous pass.
				t.Fatalf("virtual server %s/%s has no real servers", pr.dst, pr.proto)
			}
			// The trace of the live state names the kernel's real servers.
			if pr.traced {
				kind, dests := predicted(t, w.trace(t, false, pr.src, pr.iif, pr.dst, pr.proto))
				if kind != "answer" || !slices.Equal(dests, kernel) {
					t.Errorf("trace predicts %s %v; the kernel's virtual server has real servers %v", kind, dests, kernel)
				}
			}
			if pr.proto == "sctp" && w.sctpErr != nil {
				t.Skipf("table and trace checked; no SCTP connection: %v", w.sctpErr)
			}
			// Real connections go only to predicted real servers, and round
			// robin over new connections reaches every one of them.
			seen := map[string]int{}
			for range 2 * len(kernel) {
				var r reply
				var err error
				switch pr.proto {
				case "udp":
					r, err = askUDP(pr.ns, pr.dst, replyTimeout(t))
				case "sctp":
					r, err = askSCTP(pr.ns, pr.dst, replyTimeout(t))
				default:
					o := dialOpts{}
					if pr.iif == "eth0" {
						o.src = pr.src
					}
					r, err = askTCP(pr.ns, pr.dst, o)
				}
				if err != nil {
					t.Fatalf("%s to %s: %v", pr.proto, pr.dst, err)
				}
				seen[r.pod]++
			}
			for name := range seen {
				p := w.pods[name]
				if p == nil || !slices.ContainsFunc(kernel, func(a string) bool { h, _, _ := net.SplitHostPort(a); return h == p.ip4 }) {
					t.Errorf("answered by %s, not one of the predicted real servers %v", name, kernel)
				}
			}
			for _, a := range kernel {
				h, _, _ := net.SplitHostPort(a)
				if p := byAddr[h]; p == nil || seen[p.name] == 0 {
					t.Errorf("real server %s got none of %d connections (rr): %v", a, 2*len(kernel), seen)
				}
			}
		})
	}
}

// procSys reads a sysctl of namespace ns from /proc/sys.
func procSys(ns, name string) (string, error) {
	out, err := nsExec(ns, "cat", "/proc/sys/"+name)
	return strings.TrimSpace(out), err
}

// kernelAtLeast reports whether the running kernel is at least major.minor.
func kernelAtLeast(major, minor int) (bool, string) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return false, err.Error()
	}
	rel := unix.ByteSliceToString(u.Release[:])
	var ma, mi int
	_, _ = fmt.Sscanf(rel, "%d.%d", &ma, &mi)
	return ma > major || ma == major && mi >= minor, rel
}

// testSysctls reads back the sysctls ipvs mode sets (strict ARP is configured).
func (w *ipvsWorld) testSysctls(t *testing.T) {
	w.kp.logOnFailure(t)
	ns := w.nodes[0].ns
	// conn_reuse_mode: set to 0 on kernels from 4.1 (where it appeared) up to
	// 5.9; from 5.9 on it no longer stalls port reuse and is left as the
	// kernel has it (1 in a fresh namespace).
	reuse := "1"
	fixed, rel := kernelAtLeast(5, 9)
	if from, _ := kernelAtLeast(4, 1); from && !fixed {
		reuse = "0"
	}
	for _, c := range []struct{ name, want string }{
		{"net/ipv4/vs/conntrack", "1"},
		{"net/ipv4/vs/conn_reuse_mode", reuse},
		{"net/ipv4/vs/expire_nodest_conn", "1"},
		{"net/ipv4/vs/expire_quiescent_template", "1"},
		{"net/ipv4/ip_forward", "1"},
		{"net/ipv4/conf/all/arp_ignore", "1"},
		{"net/ipv4/conf/all/arp_announce", "2"},
	} {
		got, err := procSys(ns, c.name)
		if err != nil || got != c.want {
			t.Errorf("kernel %s: /proc/sys/%s = %q (%v), want %q", rel, c.name, got, err, c.want)
		}
	}
}

// testUDPRemoval: a UDP real server is deleted at once when its endpoint goes, even
// with a flow to it (there is no connection teardown to wait for), and the flow's next
// datagrams reach the remaining endpoint.
func (w *ipvsWorld) testUDPRemoval(t *testing.T) {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	addr := "198.19.0.21:80"
	u, err := newUDPClient(w.client.ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer u.close()
	first, err := u.ask(2 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	gone, stays := w.u1, w.u2
	if first.pod == w.u2.name {
		gone, stays = w.u2, w.u1
	}
	key := vsKey("198.19.0.21", 80, "UDP")
	tab, err := readIPVSTable(h, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := tab[key].rss[podAddr(gone, echoPort)]; d == nil || d.ActiveConnections+d.InactiveConnections == 0 {
		t.Logf("the kernel shows no connection on %s's real server: %v", gone.name, tab[key])
	}
	s := w.services["gtu"]
	s.eps = ready(stays)
	w.writeService(t, s)
	t.Cleanup(func() {
		s.eps = ready(w.u1, w.u2)
		w.writeService(t, s)
	})
	took := eventually(t, "the UDP real server to be deleted", ipvsApplyTimeout, func() (bool, string) {
		tab, err := readIPVSTable(h, false)
		if err != nil {
			return false, err.Error()
		}
		k := tab[key]
		if k == nil {
			return false, "no virtual server " + key
		}
		_, there := k.rss[podAddr(gone, echoPort)]
		return !there && k.rss[podAddr(stays, echoPort)] != nil, k.String()
	})
	t.Logf("UDP real server of %s deleted %v after the manifest edit (not drained)", gone.name, took.Round(time.Millisecond))
	eventually(t, "the same UDP socket to reach "+stays.name, ipvsApplyTimeout, func() (bool, string) {
		r, err := u.ask(300 * time.Millisecond)
		return err == nil && r.pod == stays.name, fmt.Sprint(r, err)
	})
}

// testRepair changes kube-proxy's state behind its back, one thing at a time (issue 35's
// outside changes): a virtual server deleted, a real server deleted (ipvsadm -d), the
// Service's entry deleted from KUBE-CLUSTER-IP, its address unbound from kube-ipvs0 and
// KUBE-SERVICES flushed with the chain kept. Each must be back within one sync period
// (plus slack), with no change to the manifests, and the Service must answer again.
func (w *ipvsWorld) testRepair(t *testing.T) {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	ns := w.nodes[0].ns
	const vip = "198.19.0.10"
	key := vsKey(vip, 80, "TCP")
	want := []string{podAddr(w.a1, echoPort), podAddr(w.a2, echoPort), podAddr(w.b1, echoPort)}
	sort.Strings(want)
	table := func() (bool, string) {
		tab, err := readIPVSTable(h, false)
		if err != nil {
			return false, err.Error()
		}
		k := tab[key]
		if k == nil {
			return false, "no virtual server " + key
		}
		var got []string
		for a, d := range k.rss {
			if d.Weight == 1 {
				got = append(got, a)
			}
		}
		sort.Strings(got)
		return slices.Equal(got, want), k.String()
	}
	// intact: the virtual server with its real servers, the set entry, the bound
	// address and the rules of KUBE-SERVICES that lead to it.
	intact := func() (bool, string) {
		if ok, detail := table(); !ok {
			return false, detail
		}
		if out, err := nsExec(ns, "ipset", "test", "KUBE-CLUSTER-IP", vip+",tcp:80"); err != nil {
			return false, "KUBE-CLUSTER-IP lacks " + vip + ",tcp:80: " + strings.TrimSpace(out)
		}
		out, err := nsExec(ns, "ip", "-o", "addr", "show", "dev", "kube-ipvs0")
		if err != nil || !strings.Contains(out, " "+vip+"/32 ") {
			return false, "kube-ipvs0 lacks " + vip + ": " + strings.TrimSpace(out)
		}
		out, err = nsExec(ns, iptablesCmd(modeIPVS, "iptables"), "-t", "nat", "-S", "KUBE-SERVICES")
		if err != nil || !strings.Contains(out, "--match-set KUBE-CLUSTER-IP") {
			return false, "KUBE-SERVICES lacks its KUBE-CLUSTER-IP rules: " + strings.TrimSpace(out)
		}
		return true, ""
	}
	run := func(name string, args ...string) func(*kernelVS) error {
		return func(*kernelVS) error {
			if out, err := nsExec(ns, name, args...); err != nil {
				return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
			}
			return nil
		}
	}
	eventually(t, key+" intact before the test", 10*time.Second, intact)
	// The earlier subtests ran for several sync periods, each with a drift check,
	// without touching kube-proxy's state: none may have found anything to repair
	// (a false drift would make every check a full sync).
	for _, l := range strings.Split(w.kp.out.String(), "\n") {
		if strings.Contains(l, "Repairing rules changed behind kube-proxy's back") {
			t.Errorf("drift repaired before anything was changed by hand: %s", l)
		}
	}
	for _, c := range []struct {
		name string
		del  func(k *kernelVS) error
	}{
		{"virtual server deleted", func(k *kernelVS) error { return h.DelService(k.svc) }},
		{"real server deleted", func(k *kernelVS) error { return h.DelDestination(k.svc, k.rss[podAddr(w.a1, echoPort)]) }},
		{"KUBE-CLUSTER-IP entry deleted", run("ipset", "del", "KUBE-CLUSTER-IP", vip+",tcp:80")},
		{"kube-ipvs0 address unbound", run("ip", "addr", "del", vip+"/32", "dev", "kube-ipvs0")},
		{"KUBE-SERVICES flushed", run(iptablesCmd(modeIPVS, "iptables"), "-t", "nat", "-F", "KUBE-SERVICES")},
	} {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			eventually(t, key+" intact", 10*time.Second, intact)
			tab, err := readIPVSTable(h, false)
			if err != nil {
				t.Fatal(err)
			}
			w.kp.waitIdle(t)
			start := time.Now()
			if err := c.del(tab[key]); err != nil {
				t.Fatalf("%s by hand: %v", c.name, err)
			}
			if ok, detail := intact(); ok {
				t.Fatalf("%s by hand, yet the state is intact: %s", c.name, detail)
			}
			// Real traffic right after the change, to say whether it broke it.
			_, probe := askTCP(w.client.ns, vip+":80", dialOpts{timeout: 500 * time.Millisecond})
			// One sync period until the check notices, the check itself and one
			// full sync; on a slow machine (TCG) the last two take seconds, and
			// a full sync is the measure of both.
			fullSync := w.kp.maxFullSync()
			limit := ipvsSyncPeriod + 2*fullSync + ipvsRepairSlack
			eventually(t, "repair after "+c.name, limit-time.Since(start), intact)
			took := time.Since(start)
			figure(t, "mode=ipvs %s by hand: repaired after %v (limit %v: sync period %v + 2 x longest full sync so far %v + %v); a connection right after the change: %v",
				c.name, took.Round(time.Millisecond), limit.Round(time.Millisecond), ipvsSyncPeriod, fullSync.Round(time.Millisecond), ipvsRepairSlack, errOrOK(probe))
			if _, err := askTCP(w.client.ns, vip+":80", dialOpts{}); err != nil {
				t.Errorf("the repaired Service does not answer: %v", err)
			}
		})
	}
}

func errOrOK(err error) string {
	if err == nil {
		return "answered"
	}
	return "failed (" + err.Error() + ")"
}

// gracefulCase is the open connection whose endpoint was removed.
type gracefulCase struct {
	conn      *longConn
	gone      *pod
	stays     *pod
	drainedAt time.Time
}

// gracefulDrain opens a connection through the gt Service, removes its endpoint and
// requires the real server to get weight 0 and stay, with the connection working and
// new connections going elsewhere.
func (w *ipvsWorld) gracefulDrain(t *testing.T) *gracefulCase {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	addr := "198.19.0.20:80"
	key := vsKey("198.19.0.20", 80, "TCP")
	lc, err := openLong(w.client.ns, addr)
	if err != nil {
		t.Fatal(err)
	}
	if err := lc.roundTrip("before"); err != nil {
		lc.reset()
		t.Fatal(err)
	}
	gc := &gracefulCase{conn: lc, gone: w.g1, stays: w.g2}
	if lc.reply.pod == w.g2.name {
		gc.gone, gc.stays = w.g2, w.g1
	}
	s := w.services["gt"]
	s.eps = ready(gc.stays)
	w.writeService(t, s)
	rs := podAddr(gc.gone, holdPort)
	took := eventually(t, "the removed endpoint's real server to get weight 0", ipvsApplyTimeout, func() (bool, string) {
		tab, err := readIPVSTable(h, false)
		if err != nil {
			return false, err.Error()
		}
		k := tab[key]
		if k == nil {
			return false, "no virtual server " + key
		}
		d := k.rss[rs]
		if d == nil {
			// Deleted with a connection open: that is the failure, no point waiting.
			t.Fatalf("real server %s deleted while a connection through it is open: %s", rs, k)
		}
		return d.Weight == 0, k.String()
	})
	gc.drainedAt = time.Now()
	t.Logf("real server %s drained (weight 0) %v after the manifest edit", rs, took.Round(time.Millisecond))
	tab, err := readIPVSTable(h, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := tab[key].rss[rs]; d == nil || d.ActiveConnections < 1 {
		t.Errorf("draining real server %s: want it present with the open connection active: %v", rs, tab[key])
	}
	if err := lc.roundTrip("draining"); err != nil {
		t.Errorf("the open connection broke when its endpoint was removed: %v", err)
	}
	for range 4 {
		r, err := askTCP(w.client.ns, addr, dialOpts{})
		if err != nil {
			t.Fatal(err)
		}
		if r.pod != gc.stays.name {
			t.Errorf("a new connection went to the draining %s", r.pod)
		}
	}
	return gc
}

// gracefulRemove waits until the manager has looked at the draining real server at
// least once with the connection open (it must stay), closes the connection and
// requires the real server to be deleted once IPVS has forgotten the connection: 10 s
// in the CLOSE state after a RST, then the manager's next tick.
func (w *ipvsWorld) gracefulRemove(t *testing.T, gc *gracefulCase) {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	key := vsKey("198.19.0.20", 80, "TCP")
	rs := podAddr(gc.gone, holdPort)
	// The manager ticks every minute from when the proxier was built, which is
	// between kube-proxy's start and its first sync: wait past the first tick
	// after the drain began.
	ticks := gc.drainedAt.Sub(w.kp.started)/ipvsGTPeriod + 1
	tick := w.kp.synced.Add(ticks*ipvsGTPeriod + time.Second)
	if d := time.Until(tick); d > 0 {
		t.Logf("waiting %v for the graceful termination manager's next check with the connection open", d.Round(time.Second))
		time.Sleep(d)
	}
	tab, err := readIPVSTable(h, false)
	if err != nil {
		t.Fatal(err)
	}
	if d := tab[key].rss[rs]; d == nil || d.Weight != 0 {
		t.Fatalf("after a check of the manager with the connection open: real server %s should be there with weight 0: %v", rs, tab[key])
	}
	if err := gc.conn.roundTrip("after-a-check"); err != nil {
		t.Errorf("the draining connection: %v", err)
	}
	gc.conn.reset()
	took := eventually(t, "the drained real server to be deleted after its connection closed", 10*time.Second+ipvsGTPeriod+ipvsApplyTimeout, func() (bool, string) {
		tab, err := readIPVSTable(h, false)
		if err != nil {
			return false, err.Error()
		}
		k := tab[key]
		if k == nil {
			return false, "no virtual server " + key
		}
		_, there := k.rss[rs]
		return !there && k.rss[podAddr(gc.stays, holdPort)] != nil, k.String()
	})
	figure(t, "mode=ipvs graceful termination: drained real server kept through a check with its connection open, deleted %v after the connection closed (RST)",
		took.Round(time.Second))
}

// testRestart: kube-proxy is killed and started again while a TCP connection through a
// ClusterIP is open; the connection keeps working, and the virtual servers are adopted,
// never deleted or recreated (their connection counters would start again from 0, and
// a watcher polling the table would see them missing).
func (w *ipvsWorld) testRestart(t *testing.T) {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	longKey := vsKey("198.19.0.22", 80, "TCP")
	webKey := vsKey("198.19.0.10", 80, "TCP")
	lc, err := openLong(w.client.ns, "198.19.0.22:80")
	if err != nil {
		t.Fatal(err)
	}
	defer lc.reset()
	for range 6 {
		if _, err := askTCP(w.client.ns, "198.19.0.10:80", dialOpts{}); err != nil {
			t.Fatal(err)
		}
	}
	// The kernel folds its per-CPU counters into the ones it reports every 2 s
	// (the rate estimator's timer): wait for the connections just made.
	var before map[string]*kernelVS
	eventually(t, "the connection counters to count the connections made", 10*time.Second, func() (bool, string) {
		var err error
		if before, err = readIPVSTable(h, false); err != nil {
			return false, err.Error()
		}
		l, web := before[longKey], before[webKey]
		return l != nil && web != nil && l.svc.Stats.Connections >= 1 && web.svc.Stats.Connections >= 6,
			fmt.Sprintf("%s %v; %s %v", longKey, l, webKey, web)
	})

	// Poll the table while kube-proxy is away and comes back: a virtual server
	// deleted and recreated shows as missing in some poll, or restarts its counter.
	stop, done := make(chan struct{}), make(chan string)
	go func() {
		var problems []string
		polls := 0
		hp, err := libipvs.New("/run/netns/" + w.nodes[0].ns)
		if err != nil {
			done <- err.Error()
			return
		}
		defer hp.Close()
		for {
			select {
			case <-stop:
				done <- fmt.Sprintf("%d polls; %s", polls, strings.Join(problems, "; "))
				return
			default:
			}
			polls++
			tab, err := readIPVSTable(hp, false)
			if err == nil {
				for _, k := range []string{longKey, webKey} {
					if tab[k] == nil {
						problems = append(problems, "missing "+k)
					} else if tab[k].svc.Stats.Connections < before[k].svc.Stats.Connections {
						problems = append(problems, fmt.Sprintf("%s counter went back from %d to %d", k, before[k].svc.Stats.Connections, tab[k].svc.Stats.Connections))
					}
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	start := time.Now()
	w.kp.kill()
	w.kp.start()
	// start waited for the first (full) sync; one more sync period for anything
	// done late.
	time.Sleep(ipvsSyncPeriod + 500*time.Millisecond)
	close(stop)
	watch := <-done
	t.Logf("restart took %v; table watch: %s", time.Since(start).Round(time.Millisecond), watch)
	if strings.Contains(watch, "missing") || strings.Contains(watch, "went back") {
		t.Errorf("the restart deleted or recreated virtual servers: %s", watch)
	}
	after, err := readIPVSTable(h, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{longKey, webKey} {
		if after[k] == nil || after[k].svc.Stats.Connections < before[k].svc.Stats.Connections {
			t.Errorf("%s after the restart: %v; before: %v (a recreated virtual server counts from 0)", k, after[k], before[k])
		}
	}
	if err := lc.roundTrip("after-restart"); err != nil {
		t.Errorf("the connection open across the restart broke: %v", err)
	}
	for _, p := range w.checkTable(after, "rr") {
		t.Errorf("after the restart: %s", p)
	}
}

// ipvsSchedulers are the schedulers upstream kube-proxy passes to the kernel (it
// accepts any name and lets the kernel refuse it): every IPVS scheduler Linux has.
var ipvsSchedulers = []string{"rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "mh", "fo", "ovf", "twos"}

// kernelHasScheduler creates and deletes a throwaway virtual server with sched.
func kernelHasScheduler(h *libipvs.Handle, sched string) error {
	s := &libipvs.Service{Address: net.ParseIP("198.51.100.7"), Protocol: unix.IPPROTO_TCP, Port: 9, SchedName: sched,
		AddressFamily: unix.AF_INET, Netmask: 0xffffffff}
	if err := h.NewService(s); err != nil {
		return err
	}
	return h.DelService(s)
}

// testSchedulers restarts kube-proxy with each scheduler the kernel has: every virtual
// server takes it (mh with the sh-port flag upstream sets) and connections still work.
func (w *ipvsWorld) testSchedulers(t *testing.T) {
	w.kp.logOnFailure(t)
	h := ipvsHandle(t, w.nodes[0].ns)
	t.Cleanup(func() {
		if w.kp.cmd != nil && len(w.kp.extra) > 0 {
			w.kp.kill()
			w.kp.start()
		}
	})
	var missing []string
	for _, sched := range ipvsSchedulers {
		if err := kernelHasScheduler(h, sched); err != nil {
			missing = append(missing, fmt.Sprintf("%s (%v)", sched, err))
			continue
		}
		t.Run(sched, func(t *testing.T) {
			w.kp.kill()
			w.kp.start("--ipvs-scheduler=" + sched)
			var tab map[string]*kernelVS
			// start waited for the first sync, which programs the scheduler.
			eventually(t, "every virtual server to use "+sched, ipvsSyncPeriod+ipvsRepairSlack, func() (bool, string) {
				var err error
				tab, err = readIPVSTable(h, false)
				if err != nil {
					return false, err.Error()
				}
				p := w.checkTable(tab, sched)
				return len(p) == 0, strings.Join(p, "; ")
			})
			k := tab[vsKey("198.19.0.10", 80, "TCP")]
			if sched == "mh" && k.svc.Flags&utilipvs.FlagSourceHash == 0 {
				t.Errorf("mh virtual server without the sh-port flag: flags %#x", k.svc.Flags)
			}
			seen := map[string]int{}
			for range 6 {
				r, err := askTCP(w.client.ns, "198.19.0.10:80", dialOpts{})
				if err != nil {
					t.Fatalf("ClusterIP with scheduler %s: %v", sched, err)
				}
				seen[r.pod]++
			}
			for name := range seen {
				if name != w.a1.name && name != w.a2.name && name != w.b1.name {
					t.Errorf("answered by %s, not an endpoint", name)
				}
			}
			if r, err := askUDP(w.client.ns, "198.19.0.10:80", replyTimeout(t)); err != nil {
				t.Errorf("UDP ClusterIP with scheduler %s: %v (%v)", sched, err, r)
			}
			t.Logf("scheduler %s: 6 TCP connections spread as %v", sched, seen)
		})
	}
	if len(missing) > 0 {
		t.Logf("schedulers this kernel lacks, not tested: %s", strings.Join(missing, ", "))
	}
	if _, err := os.Stat("/proc/net/ip_vs"); err != nil {
		t.Logf("no /proc/net/ip_vs: %v", err)
	}
}
