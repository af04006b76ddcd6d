//go:build linux

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/kube-proxy/test/kubeproxybin"
)

func TestMain(m *testing.M) {
	if os.Getenv(clientAgentEnv) != "" {
		// This process is socketlb_test.go's client agent, not a test run.
		os.Exit(clientAgent())
	}
	code := m.Run()
	printFigures()
	kubeproxybin.Remove()
	os.Exit(code)
}

// binaryEnv names a prebuilt kube-proxy binary to run instead of building one: the
// QEMU guest of test/vm has no Go toolchain, and its binary must be static.
const binaryEnv = "KUBE_PROXY_E2E_BINARY"

// dumpRulesEnv, when set, makes a failed test log the node's kube-proxy rules.
const dumpRulesEnv = "KUBE_PROXY_E2E_DUMP_RULES"

// kubeProxyBinary returns $KUBE_PROXY_E2E_BINARY, or builds cmd/kube-proxy once per
// test binary run.
func kubeProxyBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(binaryEnv); p != "" {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("%s: %v", binaryEnv, err)
		}
		return p
	}
	return kubeproxybin.Path(t)
}

// syncBuffer collects a process's output for a test to read concurrently.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// The sync period bounds how long repairs take ("within one sync").
const syncPeriod = 2 * time.Second

// kubeProxy is the binary running in node-1.
type kubeProxy struct {
	t      *testing.T
	w      *world
	mode   string
	bin    string
	dir    string
	out    *syncBuffer
	cmd    *exec.Cmd
	exited chan error
	// socketLBCgroup, when set, runs kube-proxy with --socket-lb attached to this
	// cgroup v2 directory, in a mount namespace of its own with a private bpf
	// filesystem on /sys/fs/bpf (see start).
	socketLBCgroup string
}

func (w *world) startKubeProxy(t *testing.T, mode, dir string) *kubeProxy {
	t.Helper()
	return w.startKubeProxyOn(t, &kubeProxy{mode: mode, dir: dir})
}

// startKubeProxyOn starts kp (mode, dir and options set by the caller) in node-1.
func (w *world) startKubeProxyOn(t *testing.T, kp *kubeProxy) *kubeProxy {
	t.Helper()
	mode := kp.mode
	kp.t, kp.w, kp.bin, kp.out = t, w, kubeProxyBinary(t), &syncBuffer{}
	if mode == modeIPTablesLegacy {
		// kube-proxy detects the backend from the node's rules, as upstream's image
		// does with iptables-wrappers: kubelet's KUBE-IPTABLES-HINT chain in the
		// legacy mangle table (and none in iptables-nft) says the node is legacy.
		for _, c := range []string{"iptables-legacy", "ip6tables-legacy"} {
			if out, err := nsExec(w.nodes[0].ns, c, "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"); err != nil {
				t.Fatalf("%s -t mangle -N KUBE-IPTABLES-HINT: %v\n%s", c, err, out)
			}
		}
	}
	kp.start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-proxy output (last 8kB):\n%s", tail(kp.out.String(), 8192))
			// Where the datapath cannot be inspected by hand (the QEMU guest of
			// test/vm), the rules are the first thing a failure needs.
			if os.Getenv(dumpRulesEnv) != "" {
				t.Logf("kube-proxy's rules at the failure:\n%s", kp.rules())
				t.Logf("kernel state at the failure:\n%s", kp.debugState())
			}
		}
		kp.kill()
	})
	kp.waitHealthy(60 * time.Second)
	kp.waitSynced(time.Duration(float64(60*time.Second) * slackScale(t)))
	if mode == modeIPTablesLegacy {
		kp.requireLegacyBackend()
	}
	return kp
}

// requireLegacyBackend fails the test unless kube-proxy's rules show up in the legacy
// backend and not in iptables-nft: otherwise an iptables-legacy run would silently test
// the nft backend a second time. It waits for the first sync: /healthz can answer 200
// before it.
func (kp *kubeProxy) requireLegacyBackend() {
	kp.t.Helper()
	ns := kp.w.nodes[0].ns
	eventually(kp.t, "kube-proxy's chains in iptables-legacy and not in iptables-nft", 30*time.Second, func() (bool, string) {
		legacy, err := nsExec(ns, "iptables-legacy-save", "-t", "nat")
		if err != nil {
			return false, fmt.Sprintf("iptables-legacy-save: %v: %s", err, legacy)
		}
		nft, _ := nsExec(ns, "iptables-nft-save", "-t", "nat")
		inLegacy, inNFT := strings.Contains(legacy, ":KUBE-SERVICES"), strings.Contains(nft, ":KUBE-SERVICES")
		return inLegacy && !inNFT, fmt.Sprintf("KUBE-SERVICES in iptables-legacy-save: %v, in iptables-nft-save: %v", inLegacy, inNFT)
	})
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func (kp *kubeProxy) start() {
	kp.t.Helper()
	n1 := kp.w.nodes[0]
	args := []string{
		"--manifests=" + kp.dir, "--manifests-rescan-period=1s",
		"--hostname-override=" + n1.name,
		"--proxy-mode=" + proxyMode(kp.mode),
		"--cluster-cidr=" + clusterCIDRs,
		"--iptables-sync-period=" + syncPeriod.String(),
		"--iptables-min-sync-period=100ms",
		// ipvs mode has its own (default 30s and 1s).
		"--ipvs-sync-period=" + syncPeriod.String(),
		"--ipvs-min-sync-period=100ms",
		// conntrack limits are host-wide, not per namespace: leave them alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"-v=2",
	}
	if kp.socketLBCgroup == "" {
		kp.cmd = exec.Command("ip", append([]string{"netns", "exec", n1.ns, kp.bin}, args...)...)
	} else {
		kp.cmd = socketLBCommand(n1.ns, kp.socketLBCgroup, kp.bin, args)
	}
	kp.cmd.Stdout, kp.cmd.Stderr = kp.out, kp.out
	if err := kp.cmd.Start(); err != nil {
		kp.t.Fatal(err)
	}
	exited := make(chan error, 1)
	kp.exited = exited
	go func() { exited <- kp.cmd.Wait() }()
}

// kill ends kube-proxy the hard way (SIGKILL: no chance to clean anything up).
func (kp *kubeProxy) kill() {
	if kp.cmd == nil {
		return
	}
	_ = kp.cmd.Process.Signal(syscall.SIGKILL)
	<-kp.exited
	kp.cmd = nil
}

func (kp *kubeProxy) running() error {
	select {
	case err := <-kp.exited:
		kp.cmd = nil
		return fmt.Errorf("kube-proxy exited: %v", err)
	default:
		return nil
	}
}

// waitHealthy waits for /healthz to turn 200, which it does after the first sync.
func (kp *kubeProxy) waitHealthy(timeout time.Duration) {
	kp.t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if err := kp.running(); err != nil {
			kp.t.Fatalf("%v\n%s", err, tail(kp.out.String(), 8192))
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

// lastSyncMetric is the gauge kube-proxy sets, per IP family, when a sync succeeded.
const lastSyncMetric = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"

// waitSynced waits until both families have completed a sync (their lastSyncMetric is
// set). /healthz can answer 200 before the first sync, and a Service can answer before a
// sync has finished: ipvs mode programs virtual servers first and its iptables rules
// (masquerading, source ranges) last, which took 10 s per family in an emulated guest.
func (kp *kubeProxy) waitSynced(timeout time.Duration) {
	kp.t.Helper()
	eventually(kp.t, "a completed sync of both IP families ("+lastSyncMetric+")", timeout, func() (bool, string) {
		if err := kp.running(); err != nil {
			kp.t.Fatalf("%v\n%s", err, tail(kp.out.String(), 8192))
		}
		code, body, err := httpGet(kp.w.nodes[0].ns, "http://127.0.0.1:10249/metrics")
		if err != nil || code != http.StatusOK {
			return false, fmt.Sprintf("metrics: %d %v", code, err)
		}
		synced := syncedFamilies(body)
		return synced["IPv4"] && synced["IPv6"], fmt.Sprintf("synced families %v", synced)
	})
}

// syncedFamilies reads which ip_family values of lastSyncMetric are set (non-zero) in a
// Prometheus text exposition.
func syncedFamilies(metrics string) map[string]bool {
	out := map[string]bool{}
	for fam, v := range metricByFamily(metrics, lastSyncMetric) {
		if v > 0 {
			out[fam] = true
		}
	}
	return out
}

// metricByFamily returns the values of the samples of metric (exactly that name) by
// their ip_family label, from a Prometheus text exposition.
func metricByFamily(metrics, metric string) map[string]float64 {
	out := map[string]float64{}
	for _, line := range strings.Split(metrics, "\n") {
		rest, ok := strings.CutPrefix(line, metric+"{")
		if !ok {
			continue
		}
		labels, value, ok := strings.Cut(rest, "} ")
		if !ok {
			continue
		}
		_, fam, ok := strings.Cut(labels, `ip_family="`)
		if !ok {
			continue
		}
		fam, _, _ = strings.Cut(fam, `"`)
		if v, err := strconv.ParseFloat(strings.TrimSpace(value), 64); err == nil {
			out[fam] = v
		}
	}
	return out
}

// fullSyncMetric and syncMetric are the histograms of kube-proxy's full syncs and of
// all its syncs, per IP family.
const (
	fullSyncMetric = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	syncMetric     = "kubeproxy_sync_proxy_rules_duration_seconds"
)

// fullSyncTime is how long kube-proxy's full syncs have taken on this machine: the
// largest mean over the IP families (0 when none is known). A repair is a full sync, so
// this is what a repair costs beyond noticing that one is needed: milliseconds on a real
// machine, ten seconds and more in an emulated guest.
func (kp *kubeProxy) fullSyncTime() time.Duration {
	_, body, err := httpGet(kp.w.nodes[0].ns, "http://127.0.0.1:10249/metrics")
	if err != nil {
		return 0
	}
	var longest float64
	// ipvs mode, as upstream's, fills only the histogram of all syncs, whose mean
	// understates a full one there; it is the best figure that mode gives.
	for _, metric := range []string{fullSyncMetric, syncMetric} {
		sums, counts := metricByFamily(body, metric+"_sum"), metricByFamily(body, metric+"_count")
		for fam, n := range counts {
			if n > 0 && sums[fam]/n > longest {
				longest = sums[fam] / n
			}
		}
	}
	return time.Duration(longest * float64(time.Second))
}

// httpGet fetches url from inside namespace ns.
func httpGet(ns, url string) (int, string, error) {
	tr := &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			var c net.Conn
			err := inNetns(ns, func() error {
				var err error
				c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
				return err
			})
			return c, err
		},
	}
	cl := &http.Client{Transport: tr, Timeout: 2 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// rules dumps the node's kube-proxy rules of the mode: in ipvs mode the IPVS table
// too, since real servers are where its endpoints are.
func (kp *kubeProxy) rules() string {
	ns := kp.w.nodes[0].ns
	var b strings.Builder
	if usesIPTables(kp.mode) {
		for _, c := range []string{"iptables-save", "ip6tables-save"} {
			out, _ := nsExec(ns, iptablesCmd(kp.mode, c))
			b.WriteString(out)
		}
		if kp.mode == modeIPVS {
			out, _ := nsExec(ns, "ipvsadm", "-Ln")
			b.WriteString(out)
		}
		return b.String()
	}
	out, _ := nsExec(ns, "nft", "list", "ruleset")
	return out
}

// debugState is what explains a datapath failure beyond the rules: rule counters,
// conntrack entries and, in ipvs mode, ip sets and IPVS connections.
func (kp *kubeProxy) debugState() string {
	ns := kp.w.nodes[0].ns
	cmds := [][]string{{"conntrack", "-L"}, {"ip", "-4", "addr"}}
	if usesIPTables(kp.mode) {
		cmds = append(cmds, []string{iptablesCmd(kp.mode, "iptables-save"), "-c"})
	} else {
		cmds = append(cmds, []string{"nft", "list", "counters"})
	}
	if kp.mode == modeIPVS {
		cmds = append(cmds, []string{"ipvsadm", "-Lnc"}, []string{"ipvsadm", "-Ln", "--stats"}, []string{"ipset", "list"}, []string{"sysctl", "net.ipv4.vs"})
	}
	var b strings.Builder
	for _, c := range cmds {
		out, err := nsExec(ns, c[0], c[1:]...)
		fmt.Fprintf(&b, "# %s (%v)\n%s\n", strings.Join(c, " "), err, out)
	}
	return b.String()
}

// eventually polls cond until it holds or timeout passes, then fails with detail.
func eventually(t testing.TB, what string, timeout time.Duration, cond func() (bool, string)) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		ok, detail := cond()
		if ok {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("after %v still waiting for %s: %s", timeout, what, detail)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
