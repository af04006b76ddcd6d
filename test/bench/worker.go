//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	utiliptables "k8s.io/net-utils/iptables"
	utilsysctl "k8s.io/net-utils/sysctl"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/iptables"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
)

// The world of one worker, all inside its private namespace.
const (
	nodeName    = "node-1"
	nodeIP      = "198.18.0.1"
	nodeCIDR    = "198.18.0.0/24"
	clusterCIDR = "198.18.128.0/17"
	serviceCIDR = "198.19.0.0/16"
	family      = v1.IPv4Protocol
)

func worker(spec string) error {
	parts := strings.Split(spec, ",")
	if len(parts) != 4 {
		return fmt.Errorf("bad worker spec %q", spec)
	}
	mode := parts[0]
	var nums [3]int
	for i, s := range parts[1:] {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return fmt.Errorf("bad worker spec %q: %q", spec, s)
		}
		nums[i] = n
	}
	services, eps, changes := nums[0], nums[1], nums[2]
	if services > 60000 || eps > 200 || eps < 1 {
		return fmt.Errorf("sizes out of range: %d Services × %d endpoints", services, eps)
	}
	if err := setupNetwork(); err != nil {
		return err
	}
	// kube-proxy's mode; iptables-legacy is the iptables mode on other binaries.
	proxyMode := mode
	if mode == "iptables-legacy" {
		proxyMode = "iptables"
		if err := useLegacyIPTables(); err != nil {
			return err
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	metrics.RegisterMetrics(kubeproxyconfig.ProxyMode(proxyMode))
	healthz := healthcheck.NewProxyHealthServer("127.0.0.1:0", time.Minute, nil)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.SyncPeriod.Duration = time.Hour // only our changes trigger syncs
	cfg.MinSyncPeriod.Duration = 0
	cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
	cfg.IPTables.LocalhostNodePorts = ptr.To(false)
	cfg.NFTables.MasqueradeBit = ptr.To[int32](14)
	cfg.NodePortAddresses = []string{nodeCIDR}
	detector := proxyutil.NewDetectLocalByCIDR(clusterCIDR)

	var p proxy.Provider
	switch proxyMode {
	case "iptables":
		ipt := utiliptables.New(utiliptables.ProtocolIPv4)
		ip, err := iptables.NewProxierWithOptions(ctx, cfg, family, ipt, utilsysctl.New(), detector,
			nodeName, net.ParseIP(nodeIP), nil, healthz, false, iptables.WithoutMonitor())
		if err != nil {
			return fmt.Errorf("iptables proxier: %w", err)
		}
		p = ip
	case "nftables":
		np, err := nftables.NewProxier(ctx, cfg, family, detector, nodeName, net.ParseIP(nodeIP), nil, healthz, false)
		if err != nil {
			return fmt.Errorf("nftables proxier: %w", err)
		}
		p = np
	default:
		return fmt.Errorf("unsupported mode %q (want iptables, iptables-legacy or nftables)", mode)
	}
	go p.SyncLoop()

	p.OnServiceCIDRsChanged([]string{serviceCIDR})
	slices := make([]*discovery.EndpointSlice, services)
	for i := range services {
		p.OnServiceAdd(makeService(i))
		slices[i] = makeSlice(i, eps, 0)
		p.OnEndpointSliceAdd(slices[i])
	}
	full := watch(metrics.SyncFullProxyRulesLatency)
	stopCPUProfile, err := startCPUProfile(os.Getenv(cpuProfileEnv))
	if err != nil {
		return err
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	fullMs, err := full.wait(10 * time.Minute)
	stopCPUProfile()
	if err != nil {
		return fmt.Errorf("first (full) sync: %w", err)
	}
	klog.Background().Info("Full sync done", "mode", mode, "services", services, "ms", fullMs)
	if err := writeHeapProfile(os.Getenv(heapProfileEnv)); err != nil {
		return err
	}

	r := result{Mode: mode, Services: services, Endpoints: eps, FullSyncMs: fullMs}
	// The floor the full sync is divided by is taken now, from the ruleset
	// that sync wrote: this machine's speed drifts over the minute the
	// steps below take (the same 5k legacy ruleset loaded in 1.6 s in one
	// run and in 2.9 s an hour later), and a ratio of two figures taken that
	// far apart drifted with it (1.13-1.78x for one configuration in one
	// run). The wait is the one every step makes, so the proxier's
	// follow-up work does not overlap the load.
	time.Sleep(1500 * time.Millisecond)
	if r.KernelLoadMs, r.KernelOneRuleMs, err = kernelLoads(mode, kernelLoadTimeout); errors.Is(err, errTimeout) {
		r.KernelLoadTimedOut = kernelLoadTimeout
	} else if err != nil {
		return err
	}
	for c := range changes {
		// Let follow-up work (stale chain deletion a second after a change)
		// finish, so each measurement is one change's sync alone.
		time.Sleep(1500 * time.Millisecond)
		i := (c * 7919) % services
		next := makeSlice(i, eps, c+1)
		partial := watch(metrics.SyncPartialProxyRulesLatency)
		p.OnEndpointSliceUpdate(slices[i], next)
		slices[i] = next
		ms, err := partial.wait(time.Minute)
		if err != nil {
			return fmt.Errorf("one-change sync %d: %w", c+1, err)
		}
		r.ChangeMs = append(r.ChangeMs, ms)
	}
	// Adding a Service: its chains or elements and its dispatch entry.
	for c := range changes {
		time.Sleep(1500 * time.Millisecond)
		i := services + c
		partial := watch(metrics.SyncPartialProxyRulesLatency)
		p.OnServiceAdd(makeService(i))
		p.OnEndpointSliceAdd(makeSlice(i, eps, 0))
		ms, err := partial.wait(time.Minute)
		if err != nil {
			return fmt.Errorf("add-service sync %d: %w", c+1, err)
		}
		r.AddMs = append(r.AddMs, ms)
	}
	// A sync with nothing changed, as the periodic resync timer causes.
	for c := range changes {
		time.Sleep(1500 * time.Millisecond)
		partial := watch(metrics.SyncPartialProxyRulesLatency)
		p.Sync()
		ms, err := partial.wait(time.Minute) // 10 s was too short for upstream at 10k under load
		if err != nil {
			return fmt.Errorf("no-op sync %d: %w", c+1, err)
		}
		r.NoopMs = append(r.NoopMs, ms)
	}
	// The periodic sync with nothing changed, as the syncPeriod timer
	// causes it: for a proxier with a drift check (ours) the check is due
	// at every such sync, so it is asked for here; upstream's has none and
	// runs its periodic sync. First with nothing written anywhere since
	// the last check (one warm-up check first: the first check after a
	// write learns what was written), then after another program changed
	// another table, which moves the kernel's ruleset generation. CPU time
	// is the process's, over the wait for the sync.
	if err := periodicSync(p); err != nil {
		return fmt.Errorf("warm-up periodic sync: %w", err)
	}
	for c := range changes {
		time.Sleep(1500 * time.Millisecond)
		ms, cpu, err := measurePeriodic(p)
		if err != nil {
			return fmt.Errorf("periodic sync %d: %w", c+1, err)
		}
		r.PeriodicMs, r.PeriodicCPUMs = append(r.PeriodicMs, ms), append(r.PeriodicCPUMs, cpu)
	}
	for c := range changes {
		time.Sleep(1500 * time.Millisecond)
		if out, err := exec.Command("nft", "add", "table", "ip", fmt.Sprintf("bench-other-%d", c)).CombinedOutput(); err != nil {
			return fmt.Errorf("another program's table: %w: %s", err, out)
		}
		ms, cpu, err := measurePeriodic(p)
		if err != nil {
			return fmt.Errorf("periodic sync %d after another table changed: %w", c+1, err)
		}
		r.OtherTableMs, r.OtherTableCPUMs = append(r.OtherTableMs, ms), append(r.OtherTableCPUMs, cpu)
	}
	// The proxier's own peak, read before countRules: the `nft -j list` it runs can
	// use several times the proxier's memory, and a child's usage reported to its
	// parent (Maxrss of RUSAGE_CHILDREN) includes the largest child it waited for.
	var self syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &self); err == nil {
		r.PeakRSSKiB = self.Maxrss // KiB on Linux
	}
	// After the peak is read: a collection here cannot lower it.
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	r.LiveHeapMiB = float64(ms.HeapAlloc) / (1 << 20)
	r.Rules, r.Elements, err = countRules(mode)
	if err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// periodicSync asks for the sync the syncPeriod timer causes, with the
// drift check due on a proxier that has one (RequestRulesCheck; the shell
// otherwise asks once per syncPeriod, an hour here).
func periodicSync(p proxy.Provider) error {
	partial := watch(metrics.SyncPartialProxyRulesLatency)
	if c, ok := p.(interface{ RequestRulesCheck() }); ok {
		c.RequestRulesCheck()
	}
	p.Sync()
	// The check reads the whole ruleset: iptables-nft-save of 10k
	// Services takes tens of seconds of wall time on a loaded machine.
	_, err := partial.wait(5 * time.Minute)
	return err
}

// measurePeriodic runs the periodic sync and returns its wall time (the
// sync's own latency metric) and the CPU time of the process and its
// children (iptables-save, nft) over it, in ms: on a loaded machine wall
// time measures the run queue.
func measurePeriodic(p proxy.Provider) (wallMs, cpu float64, err error) {
	cpu0 := cpuMs()
	partial := watch(metrics.SyncPartialProxyRulesLatency)
	if c, ok := p.(interface{ RequestRulesCheck() }); ok {
		c.RequestRulesCheck()
	}
	p.Sync()
	wallMs, err = partial.wait(5 * time.Minute)
	return wallMs, cpuMs() - cpu0, err
}

// cpuMs is the CPU time (user and system) this process and its waited-for
// children (iptables-save, iptables-restore, nft) have used, in ms.
func cpuMs() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	ms := func(tv syscall.Timeval) float64 { return float64(tv.Sec)*1e3 + float64(tv.Usec)/1e3 }
	return ms(self.Utime) + ms(self.Stime) + ms(children.Utime) + ms(children.Stime)
}

// cpuProfileEnv names a file for the worker to write a CPU profile of the
// first full sync to: the proxier's own share of that sync, as against the
// time it waits for iptables-restore or nft.
const cpuProfileEnv = "KUBE_PROXY_BENCH_CPU_PROFILE"

// startCPUProfile starts a CPU profile into path, if set, and returns what
// stops it.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

// heapProfileEnv names a file for the worker to write a heap profile to after
// the first full sync: its alloc_space sample shows where that sync allocated,
// which is what drives the peak RSS the table reports.
const heapProfileEnv = "KUBE_PROXY_BENCH_HEAP_PROFILE"

func writeHeapProfile(path string) error {
	if path == "" {
		return nil
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("heap profile: %w", err)
	}
	defer f.Close()
	// A heap profile shows the heap as of the last collection.
	runtime.GC()
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		return fmt.Errorf("heap profile %s: %w", path, err)
	}
	return f.Close()
}

// useLegacyIPTables makes "iptables", "iptables-save" and "iptables-restore"
// (and the ip6tables ones) the legacy (xtables) binaries for this process and
// its children, by putting links to them first on PATH: both proxiers find
// their binaries on PATH, so ours and upstream's run the legacy backend
// unchanged, as on a node whose alternatives point there.
func useLegacyIPTables() error {
	dir, err := os.MkdirTemp("", "bench-iptables-legacy")
	if err != nil {
		return err
	}
	for _, v := range []string{"iptables", "ip6tables"} {
		for _, suffix := range []string{"", "-save", "-restore"} {
			target, err := exec.LookPath(v + "-legacy" + suffix)
			if err != nil {
				return fmt.Errorf("iptables-legacy mode needs %s-legacy%s: %w", v, suffix, err)
			}
			if err := os.Symlink(target, filepath.Join(dir, v+suffix)); err != nil {
				return err
			}
		}
	}
	return os.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}

// kernelLoadTimeout bounds kernelLoad: loading a large ruleset in one
// iptables-restore on the nf_tables backend takes many minutes (its own
// chain cache is quadratic: over 8 minutes at 5k Services), and the figure
// is only "slower than this" then, which a minute already shows against
// full syncs of seconds.
const kernelLoadTimeout = time.Minute

// loadEnv makes this command the loader child of kernelLoad, for the mode it
// names.
const loadEnv = "KUBE_PROXY_BENCH_LOAD"

// kernelLoadRepeats and kernelLoadBudget bound kernelLoads: the load is
// repeated for a median while the loads so far took less than the budget.
// One load of the same 1k-Service legacy ruleset took 199 to 316 ms in
// successive runs, and a ratio to a single such figure moved with it.
const (
	kernelLoadRepeats = 3
	kernelLoadBudget  = 30 * time.Second
)

// kernelLoads is kernelLoad repeated, each time into a new empty namespace,
// and returns the medians.
func kernelLoads(mode string, timeout time.Duration) (loadMs, oneRuleMs float64, err error) {
	var loads, oneRules []float64
	start := time.Now()
	for len(loads) < kernelLoadRepeats && time.Since(start) < kernelLoadBudget {
		load, oneRule, err := kernelLoad(mode, timeout)
		if err != nil {
			return 0, 0, err
		}
		loads, oneRules = append(loads, load), append(oneRules, oneRule)
	}
	return median(loads), median(oneRules), nil
}

// kernelLoad saves the ruleset kube-proxy programmed in this namespace and
// returns how long loading it in one go into a fresh, empty network namespace
// takes (`nft -f` or `iptables-restore`, process start included): what the
// kernel and the loader need for this ruleset at the least, against which a
// full sync's time is a multiple. For iptables it also returns oneRuleMs, the
// floor of any change (see loader). The loading runs in a child of this
// command (loader), born into the new namespace. The ruleset goes through a
// file, not this process's memory, whose peak is measured after this runs.
func kernelLoad(mode string, timeout time.Duration) (loadMs, oneRuleMs float64, err error) {
	save := []string{"iptables-save"}
	if mode == "nftables" {
		save = []string{"nft", "list", "table", "ip", "kube-proxy"}
	}
	rules, err := os.CreateTemp("", "bench-ruleset")
	if err != nil {
		return 0, 0, err
	}
	defer os.Remove(rules.Name())
	defer rules.Close()
	saveCmd := exec.Command(save[0], save[1:]...)
	saveCmd.Stdout = rules
	if err := saveCmd.Run(); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", strings.Join(save, " "), err)
	}
	size, err := rules.Seek(0, io.SeekCurrent)
	if err != nil {
		return 0, 0, err
	}
	if _, err := rules.Seek(0, io.SeekStart); err != nil {
		return 0, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), loadEnv+"="+mode)
	cmd.Stdin = rules
	// Its own process group, so a timeout also ends the loader's child.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ctx.Err() != nil {
			return 0, 0, fmt.Errorf("loading the saved ruleset: %w after %v", errTimeout, timeout)
		}
		return 0, 0, fmt.Errorf("loading the saved ruleset (%d bytes) into an empty namespace: %w: %s", size, err, tailOf(stderr.String(), 2048))
	}
	fields := strings.Fields(string(out))
	if len(fields) != 2 {
		return 0, 0, fmt.Errorf("loader printed %q, want two figures", out)
	}
	if loadMs, err = strconv.ParseFloat(fields[0], 64); err == nil {
		oneRuleMs, err = strconv.ParseFloat(fields[1], 64)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("loader printed %q: %w", out, err)
	}
	return loadMs, oneRuleMs, nil
}

// nfacctName finds the nfacct counters an iptables ruleset matches on.
var nfacctName = regexp.MustCompile(`--nfacct-name\s+(\S+)`)

// loader loads the ruleset on stdin into this (new, empty) namespace with the
// mode's loader binary and prints how long that took in ms. For iptables it
// then appends one jump rule (to an endpoint chain, in a service chain) with
// one more iptables-restore and prints how long that took too (0 for
// nftables, whose endpoint changes do not go through nft): no change that
// rewrites a service chain can be faster, whoever computes it. An iptables
// ruleset can refer to nfacct counters, which are not part of it (kube-proxy
// creates them over netlink first), so they are created before the clock
// starts.
func loader(mode string) error {
	rules, err := io.ReadAll(os.Stdin)
	if err != nil {
		return err
	}
	argv := []string{"iptables-restore"}
	if mode == "nftables" {
		argv = []string{"nft", "-f", "-"}
	} else if names := nfacctName.FindAllSubmatch(rules, -1); len(names) > 0 {
		acct, err := nfacct.New()
		if err != nil {
			return fmt.Errorf("nfacct: %w", err)
		}
		for _, n := range names {
			if err := acct.Ensure(string(n[1])); err != nil {
				return fmt.Errorf("nfacct counter %s: %w", n[1], err)
			}
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = bytes.NewReader(rules)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		// Both loaders name the line they refused; show it.
		var line string
		if m := regexp.MustCompile(`line (\d+):`).FindStringSubmatch(stderr.String()); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > 0 && n <= bytes.Count(rules, []byte("\n")) {
				line = "\nline " + m[1] + ": " + string(bytes.Split(rules, []byte("\n"))[n-1])
			}
		}
		return fmt.Errorf("%s: %w: %s%s", strings.Join(argv, " "), err, tailOf(stderr.String(), 2048), line)
	}
	loadMs := float64(time.Since(start).Microseconds()) / 1000
	oneRuleMs := 0.0
	if mode != "nftables" {
		if oneRuleMs, err = addOneJump(rules); err != nil {
			return err
		}
	}
	fmt.Println(loadMs, oneRuleMs)
	return nil
}

// svcChainRE and sepChainRE find the service and endpoint chains declared in
// a saved nat table.
var (
	svcChainRE = regexp.MustCompile(`(?m)^:(KUBE-SVC-\S+) `)
	sepChainRE = regexp.MustCompile(`(?m)^:(KUBE-SEP-\S+) `)
)

// addOneJump appends a jump from the first service chain declared in rules to
// the first endpoint chain declared there, with iptables-restore --noflush, and returns how long
// that took in ms.
func addOneJump(rules []byte) (float64, error) {
	svc, sep := svcChainRE.FindSubmatch(rules), sepChainRE.FindSubmatch(rules)
	if svc == nil || sep == nil {
		return 0, fmt.Errorf("the saved ruleset has no service or endpoint chain to add a jump between")
	}
	input := fmt.Sprintf("*nat\n-A %s -m comment --comment one-rule -j %s\nCOMMIT\n", svc[1], sep[1])
	cmd := exec.Command("iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, fmt.Errorf("iptables-restore --noflush of %q: %w: %s", input, err, stderr.String())
	}
	return float64(time.Since(start).Microseconds()) / 1000, nil
}

// setupNetwork gives the namespace a loopback and a node interface.
func setupNetwork() error {
	lo, err := netlink.LinkByName("lo")
	if err != nil {
		return fmt.Errorf("finding lo: %w", err)
	}
	if err := netlink.LinkSetUp(lo); err != nil {
		return fmt.Errorf("setting lo up: %w", err)
	}
	// A veth pair rather than a dummy: the dummy module is not everywhere.
	dummy := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "eth0"}, PeerName: "eth0-peer"}
	if err := netlink.LinkAdd(dummy); err != nil {
		return fmt.Errorf("adding eth0: %w", err)
	}
	addr, err := netlink.ParseAddr(nodeIP + "/24")
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(dummy, addr); err != nil {
		return fmt.Errorf("adding %s to eth0: %w", nodeIP, err)
	}
	return netlink.LinkSetUp(dummy)
}

// syncWatch waits for the next observation of a sync-duration histogram.
type syncWatch struct {
	h     basemetrics.ObserverMetric
	count uint64
	sum   float64
}

func watch(vec *basemetrics.HistogramVec) *syncWatch {
	w := &syncWatch{h: vec.WithLabelValues(string(family))}
	w.count, _ = testutil.GetHistogramMetricCount(w.h)
	w.sum, _ = testutil.GetHistogramMetricValue(w.h)
	return w
}

// wait returns the duration in ms of the first sync observed after watch.
func (w *syncWatch) wait(timeout time.Duration) (float64, error) {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		n, err := testutil.GetHistogramMetricCount(w.h)
		if err != nil {
			return 0, err
		}
		if n > w.count {
			sum, err := testutil.GetHistogramMetricValue(w.h)
			if err != nil {
				return 0, err
			}
			// Several syncs in the window would blur the figure; average them.
			return (sum - w.sum) * 1000 / float64(n-w.count), nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return 0, fmt.Errorf("no sync within %v", timeout)
}

func makeService(i int) *v1.Service {
	name := fmt.Sprintf("svc-%05d", i)
	ip := fmt.Sprintf("198.19.%d.%d", (i+1)/256, (i+1)%256)
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "bench", Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  ip,
			ClusterIPs: []string{ip},
			IPFamilies: []v1.IPFamily{family},
			Ports: []v1.ServicePort{{
				Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	// A tenth are NodePorts (unique ports), as in a typical cluster mix.
	if i%10 == 0 && i/10 < 2767 {
		s.Spec.Type = v1.ServiceTypeNodePort
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
		s.Spec.Ports[0].NodePort = int32(30000 + i/10)
	}
	return s
}

// makeSlice gives Service i eps endpoints; gen shifts the first endpoint's
// address, which is what a one-change sync changes.
func makeSlice(i, eps, gen int) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "bench", Name: fmt.Sprintf("svc-%05d-abc", i),
			Labels: map[string]string{discovery.LabelServiceName: fmt.Sprintf("svc-%05d", i)},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for j := range eps {
		// Pod addresses from 198.18.128.0/17, reused across Services as pods
		// backing several Services are.
		k := (i*eps + j) % 32000
		if j == 0 && gen > 0 {
			k = (k + 16000 + gen) % 32000
		}
		node := "node-2"
		if j == 0 {
			node = nodeName
		}
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("198.18.%d.%d", 128+k/250, 1+k%250)},
			NodeName:   ptr.To(node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true), Serving: ptr.To(true), Terminating: ptr.To(false)},
		})
	}
	return s
}

// countRules counts the rules kube-proxy programmed in this namespace (and, for
// nftables, the elements of its sets and maps).
func countRules(mode string) (rules, elements int, err error) {
	if mode != "nftables" {
		out, err := exec.Command("iptables-save").Output()
		if err != nil {
			return 0, 0, fmt.Errorf("iptables-save: %w", err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "-A ") {
				rules++
			}
		}
		return rules, 0, nil
	}
	out, err := exec.Command("nft", "-j", "list", "table", "ip", "kube-proxy").Output()
	if err != nil {
		return 0, 0, fmt.Errorf("nft -j list table ip kube-proxy: %w", err)
	}
	return parseNFTJSON(out)
}

// parseNFTJSON counts rules and set/map elements in `nft -j list` output.
func parseNFTJSON(out []byte) (rules, elements int, err error) {
	var doc struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		return 0, 0, fmt.Errorf("parsing nft JSON: %w", err)
	}
	for _, obj := range doc.Nftables {
		if _, ok := obj["rule"]; ok {
			rules++
		}
		for _, k := range []string{"set", "map"} {
			raw, ok := obj[k]
			if !ok {
				continue
			}
			var s struct {
				Elem []json.RawMessage `json:"elem"`
			}
			if err := json.Unmarshal(raw, &s); err != nil {
				return 0, 0, fmt.Errorf("parsing nft %s: %w", k, err)
			}
			elements += len(s.Elem)
		}
	}
	return rules, elements, nil
}
