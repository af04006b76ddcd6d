//go:build linux

// Command bench measures kube-proxy's iptables and nftables proxiers against the
// real kernel: a full sync and a one-change sync at 1k and 10k Services with 10
// endpoints each, with the rule count and the proxier's peak RSS.
//
// Each configuration runs in a child process of its own, born into a fresh
// network namespace (CLONE_NEWNET), so the rules never touch the host and the
// child's peak RSS is that configuration's alone. The children build the
// proxiers with the same public constructors the kube-proxy binary uses and run
// the real iptables-restore and nft.
//
// Usage (as root):
//
//	go run ./test/bench [-modes iptables,nftables] [-services 1000,10000] [-endpoints 10] [-changes 5]
//
// With -upstream (a build of this same command against k8s.io/kubernetes, made by
// test/bench/side-by-side.sh), each configuration runs -rounds times with ours and
// upstream's worker interleaved, and one table shows the medians side by side.
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"sort"
	"syscall"
	"text/tabwriter"
	"time"
)

// result is what a child reports on its stdout as one JSON line.
type result struct {
	Mode       string    `json:"mode"`
	Services   int       `json:"services"`
	Endpoints  int       `json:"endpoints"`
	FullSyncMs float64   `json:"fullSyncMs"`
	ChangeMs   []float64 `json:"changeMs"`
	AddMs      []float64 `json:"addMs"`  // a Service added
	NoopMs     []float64 `json:"noopMs"` // a sync with nothing changed
	// PeriodicMs is the periodic sync (syncPeriod) with nothing changed,
	// its drift check due (ours); OtherTableMs the same after another
	// program changed another nftables table. *CPUMs are the process's
	// CPU time over each.
	PeriodicMs      []float64 `json:"periodicMs"`
	PeriodicCPUMs   []float64 `json:"periodicCpuMs"`
	OtherTableMs    []float64 `json:"otherTableMs"`
	OtherTableCPUMs []float64 `json:"otherTableCpuMs"`
	Rules           int       `json:"rules"`
	Elements        int       `json:"elements"` // nftables set/map elements; 0 for iptables
	PeakRSSKiB      int64     `json:"peakRSSKiB"`
	// LiveHeapMiB is the Go heap a collection leaves after the steps: what
	// the proxier (and the worker's own copy of the EndpointSlices) keeps.
	// With Go's default pacing a long-running process's heap grows to about
	// twice this between collections, so it predicts the steady RSS better
	// than a peak read after a few syncs.
	LiveHeapMiB float64 `json:"liveHeapMiB"`
	// KernelLoadMs is how long loading the final ruleset in one go takes in
	// an empty namespace (kernelLoad); KernelLoadTimedOut is set instead when
	// that took longer than it.
	KernelLoadMs float64 `json:"kernelLoadMs"`
	// KernelOneRuleMs is how long appending one jump rule to that loaded
	// ruleset takes (iptables only; 0 for nftables): the floor of a change.
	KernelOneRuleMs    float64       `json:"kernelOneRuleMs"`
	KernelLoadTimedOut time.Duration `json:"kernelLoadTimedOut"`
	// TimedOut is set (by the parent) when the configuration did not finish.
	TimedOut time.Duration `json:"-"`
}

const workerEnv = "KUBE_PROXY_BENCH_WORKER"

var errTimeout = errors.New("timed out")

func main() {
	if mode := os.Getenv(loadEnv); mode != "" {
		if err := loader(mode); err != nil {
			fmt.Fprintf(os.Stderr, "bench loader %s: %v\n", mode, err)
			os.Exit(1)
		}
		return
	}
	if spec := os.Getenv(workerEnv); spec != "" {
		if err := worker(spec); err != nil {
			fmt.Fprintf(os.Stderr, "bench worker %s: %v\n", spec, err)
			os.Exit(1)
		}
		return
	}
	modes := flag.String("modes", "iptables,nftables", "proxy modes to measure")
	sizes := flag.String("services", "1000,10000", "Service counts to measure")
	eps := flag.Int("endpoints", 10, "endpoints per Service")
	changes := flag.Int("changes", 5, "one-change syncs to time per configuration (the median is shown)")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up on a configuration after this long")
	upstream := flag.String("upstream", "", "path to this command built against upstream Kubernetes (see side-by-side.sh); runs both, interleaved")
	rounds := flag.Int("rounds", 3, "with -upstream: rounds of every configuration (medians are shown)")
	only := flag.String("configs", "", "mode:services pairs (nftables:10000,iptables-legacy:1000) instead of -modes × -services")
	flag.Parse()
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench needs root: it creates network namespaces and programs real kernel rules in them")
		os.Exit(2)
	}
	cfgs, err := parseConfigs(*modes, *sizes, *only)
	if err != nil || *rounds < 1 {
		fmt.Fprintf(os.Stderr, "bad flags: -modes %q -services %q -configs %q -rounds %d: %v\n", *modes, *sizes, *only, *rounds, err)
		os.Exit(2)
	}
	if *upstream != "" {
		self, err := os.Executable()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		if err := sideBySide(os.Stdout, self, *upstream, cfgs, *rounds, *eps, *changes, *timeout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	var results []result
	failed := false
	for _, c := range cfgs {
		r, err := runChild("", c.mode, c.services, *eps, *changes, *timeout)
		if errors.Is(err, errTimeout) {
			fmt.Fprintf(os.Stderr, "%s with %d Services: %v\n", c.mode, c.services, err)
			results = append(results, result{Mode: c.mode, Services: c.services, Endpoints: *eps, TimedOut: *timeout})
			continue
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s with %d Services: %v\n", c.mode, c.services, err)
			failed = true
			continue
		}
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "done: %s %d Services\n", c.mode, c.services)
	}
	if len(results) > 0 {
		printTable(os.Stdout, results)
	}
	if failed {
		os.Exit(1)
	}
}

// runChild re-executes this binary in a new network namespace as the worker for
// one configuration; exe, when set, is another build of this command to run
// instead (upstream's, for -upstream).
func runChild(exe, mode string, services, eps, changes int, timeout time.Duration) (result, error) {
	self := exe
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return result{}, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self)
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%d,%d,%d", workerEnv, mode, services, eps, changes))
	// Its own process group, so a timeout also ends the iptables-restore or nft
	// it is waiting for.
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET, Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("%w after %v", errTimeout, timeout)
		}
		return result{}, fmt.Errorf("worker: %w\n%s", err, tailOf(stderr.String(), 4096))
	}
	var r result
	sc := bufio.NewScanner(&stdout)
	found := false
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &r); err == nil && r.Mode != "" {
			found = true
		}
	}
	if !found {
		return result{}, fmt.Errorf("worker printed no result\nstdout:\n%s\nstderr:\n%s", stdout.String(), tailOf(stderr.String(), 4096))
	}
	// The worker reports its own peak; fall back to what the kernel says about the
	// child, which also counts the largest process the child waited for.
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && r.PeakRSSKiB == 0 {
		r.PeakRSSKiB = ru.Maxrss // KiB on Linux
	}
	return r, nil
}

func tailOf(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func printTable(f *os.File, rs []result) {
	tw := tabwriter.NewWriter(f, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\tservices\tendpoints\tfull sync ms\tone-change ms (median)\tadd-service ms\tno-op ms\tperiodic ms\tperiodic CPU ms\trules\tset/map elements\tpeak RSS MiB\tlive heap MiB\tkernel-only load ms\tkernel-only one rule ms\t")
	for _, r := range rs {
		if r.TimedOut > 0 {
			fmt.Fprintf(tw, "%s\t%d\t%d\t> %v\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t-\t\n", r.Mode, r.Services, r.Services*r.Endpoints, r.TimedOut)
			continue
		}
		load := fmt.Sprintf("%.0f", r.KernelLoadMs)
		if r.KernelLoadTimedOut > 0 {
			load = "> " + r.KernelLoadTimedOut.String()
		}
		oneRule := "-"
		if r.KernelOneRuleMs > 0 {
			oneRule = fmt.Sprintf("%.1f", r.KernelOneRuleMs)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%d\t%d\t%.1f\t%.1f\t%s\t%s\t\n",
			r.Mode, r.Services, r.Services*r.Endpoints, r.FullSyncMs, median(r.ChangeMs), median(r.AddMs), median(r.NoopMs),
			median(r.PeriodicMs), median(r.PeriodicCPUMs), r.Rules, r.Elements,
			float64(r.PeakRSSKiB)/1024, r.LiveHeapMiB, load, oneRule)
	}
	_ = tw.Flush()
}
