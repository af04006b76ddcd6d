package vm

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// guestModes are the modes TestDatapathInVM runs test/e2e in, one e2e process each, in
// this order: ipvs first because only the guest can run it.
var guestModes = []string{"ipvs", "iptables", "iptables-legacy", "nftables"}

// guestTestRun is the -test.run pattern of every e2e run in the guest: every test of the
// e2e binary it matches runs in every mode of guestModes (tests built on forEachMode run
// once per mode; KUBE_PROXY_E2E_MODES selects the one). TestIPVS matches the ipvs-only
// tests of test/e2e/ipvs_test.go. TestReliability and TestTracePredictsDatapath are
// left out for time (see README.md). KUBE_PROXY_VM_E2E_RUN overrides it.
var guestTestRun = `^(TestDatapath|TestFlushRepair|TestIPVS.*)$`

// requiredTests must each report PASS (not SKIP) in every mode of the guest: the guest
// is built to run every mode, so a skip there means something it needs is missing.
var requiredTests = []string{"TestDatapath", "TestFlushRepair"}

// guestRunTimeout bounds one mode's e2e run inside the guest (its -test.timeout). ipvs
// mode is the longest: 5.5 min on a quiet host, and its run hit 12 min once at load 20
// (the drift repair cases and 13 scheduler restarts, each a full first sync under TCG).
const guestRunTimeout = 16 * time.Minute

// kernelsEnv names the kernels TestDatapathInVM boots, as KernelSpecs names them
// (comma-separated, or "all"); unset, FetchKernel's one (Debian 12's). Every kernel
// costs a full run of every mode (README.md has the times), so CI runs the one.
const kernelsEnv = "KUBE_PROXY_VM_E2E_KERNELS"

// kernelsForTest returns the kernels to boot. It is the one place the kernel comes from.
func kernelsForTest(t *testing.T) []*Kernel {
	t.Helper()
	start := time.Now()
	sel := os.Getenv(kernelsEnv)
	if sel == "" {
		k, err := FetchKernel(t.Context())
		if errors.Is(err, ErrUnavailable) {
			t.Skipf("no kernel for the guest: %v", err)
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("TIMING kernel %s ready in %.1fs (cache %s)", k.Release, time.Since(start).Seconds(), CacheDir())
		return []*Kernel{k}
	}
	specs, err := selectSpecs(sel)
	if err != nil {
		t.Fatalf("%s: %v", kernelsEnv, err)
	}
	var out []*Kernel
	for _, spec := range specs {
		k, err := FetchKernelSpec(t.Context(), spec)
		if errors.Is(err, ErrUnavailable) {
			t.Logf("kernel %s left out: %v", spec.Name, err)
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, k)
	}
	if len(out) == 0 {
		t.Skipf("no kernel of %s=%s could be had", kernelsEnv, sel)
	}
	t.Logf("TIMING %d kernels ready in %.1fs (cache %s)", len(out), time.Since(start).Seconds(), CacheDir())
	return out
}

// TestDatapathInVM runs test/e2e, the datapath suite the host runs in network
// namespaces, inside a QEMU guest on a real Debian kernel for every mode: ipvs (which
// the host kernel cannot run), iptables on the nft and on the legacy backend, and
// nftables. Each (sub)test the guest reports as failed fails this test under
// <kernel>/<mode>, with its output.
func TestDatapathInVM(t *testing.T) {
	Require(t)
	busybox, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("busybox not installed (apt-get install busybox-static)")
	}
	tools := map[string]string{}
	for _, tool := range []string{"xtables-nft-multi", "xtables-legacy-multi", "ipset", "ipvsadm", "ip", "nft", "conntrack", "sysctl", "ldd"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skipf("%s not installed (the guest needs it; apt-get install iptables ipset ipvsadm iproute2 nftables conntrack procps)", tool)
		}
		tools[tool] = p
	}
	// Optional: util-linux's nsenter, for `kube-proxy trace --netns` in
	// TestTracePredictsDatapath; busybox's applet runs its own `ip` applet instead of
	// iproute2's, which has no -j.
	if p, err := exec.LookPath("nsenter"); err == nil {
		tools["nsenter"] = p
	}
	modes := guestModes
	if m := os.Getenv("KUBE_PROXY_VM_E2E_MODES"); m != "" {
		modes = strings.Fields(strings.ReplaceAll(m, ",", " "))
	}
	run := guestTestRun
	if r := os.Getenv("KUBE_PROXY_VM_E2E_RUN"); r != "" {
		run = r
	}
	kernels := kernelsForTest(t)

	dir := t.TempDir()
	start := time.Now()
	kubeProxy, e2e := filepath.Join(dir, "kube-proxy"), filepath.Join(dir, "e2e.test")
	buildStatic(t, []string{"build"}, kubeProxy, "k8s.io/kube-proxy/cmd/kube-proxy")
	buildStatic(t, []string{"test", "-c"}, e2e, "k8s.io/kube-proxy/test/e2e")
	t.Logf("TIMING kube-proxy and the e2e test binary built in %.1fs", time.Since(start).Seconds())

	for _, k := range kernels {
		t.Run(k.Release, func(t *testing.T) {
			start := time.Now()
			initrd := filepath.Join(dir, "initramfs-"+k.Release+".cpio")
			env := fmt.Sprintf("E2E_MODES=%q\nE2E_RUN='%s'\nE2E_TIMEOUT=%s\n", strings.Join(modes, " "), run, guestRunTimeout)
			if err := buildDatapathInitramfs(k, busybox, kubeProxy, e2e, tools, env, initrd); err != nil {
				if errors.Is(err, ErrUnavailable) {
					t.Skip(err)
				}
				t.Fatal(err)
			}
			fi, _ := os.Stat(initrd)
			t.Logf("TIMING initramfs (%d MiB) built in %.1fs", fi.Size()>>20, time.Since(start).Seconds())

			log := newGoTestLog()
			start = time.Now()
			results, err := Boot(t.Context(), t, k.Vmlinuz, initrd, BootOptions{
				Timeout:  guestTimeout(t, len(modes)),
				MemoryMB: 2048,
				Cmdline:  "loglevel=4",
				OnLine:   log.line,
			})
			t.Logf("TIMING guest booted, ran %d modes and powered off in %.1fs", len(modes), time.Since(start).Seconds())
			if err != nil {
				t.Error(err)
			}
			runs := map[string]Result{}
			for _, r := range results {
				if mode, ok := strings.CutPrefix(r.Name, "e2e/"); ok {
					runs[mode] = r
				}
			}
			// With KUBE_PROXY_VM_E2E_RUN narrowing the run, the required tests may be
			// left out on purpose.
			required := requiredTests
			if run != guestTestRun {
				required = nil
			}
			for _, mode := range modes {
				t.Run(mode, func(t *testing.T) {
					checkMode(t, mode, runs[mode], log.results(mode), required)
				})
			}
		})
	}
}

// checkMode fails t for every e2e (sub)test of mode the guest reported as failed, with
// its output, and for a required test that did not pass; it logs skips with their
// reasons and the mode's figures.
func checkMode(t *testing.T, mode string, run Result, results []goTestResult, required []string) {
	t.Helper()
	if run.Name == "" {
		t.Errorf("mode %s: the guest reported no e2e run (it crashed, hung or was killed before)", mode)
	} else {
		t.Logf("mode %s: e2e run %s", mode, run)
	}
	counts := map[string]int{}
	status := map[string]string{}
	for _, r := range results {
		counts[r.Status]++
		status[r.Name] = r.Status
	}
	for _, r := range results {
		switch r.Status {
		case "FAIL":
			if r.hasFailedChild(results) {
				continue // the child's failure names the case; its parent adds nothing
			}
			t.Errorf("mode %s: %s FAILED in the guest (%s):\n%s", mode, r.Name, r.Elapsed, strings.Join(r.Output, "\n"))
		case "SKIP":
			t.Logf("mode %s: %s SKIPPED in the guest: %s", mode, r.Name, strings.Join(r.Output, " | "))
		}
	}
	for _, name := range required {
		full := name + "/" + mode
		if s := status[full]; s != "PASS" && s != "FAIL" {
			t.Errorf("mode %s: %s did not run to completion in the guest (status %q; a skip here means the guest lacks something the mode needs)", mode, full, s)
		}
	}
	t.Logf("mode %s: %d passed, %d failed, %d skipped (tests and subtests)", mode, counts["PASS"], counts["FAIL"], counts["SKIP"])
	if run.Name != "" && !run.Pass && counts["FAIL"] == 0 {
		t.Errorf("mode %s: the e2e binary failed (%s) without a failed test: a panic, a timeout or a TestMain failure; see the console log", mode, run.Detail)
	}
}

// guestTimeout bounds the guest: a generous per-mode allowance, but never past the
// test's own deadline, so a hung guest is killed and reported rather than taking the
// whole test binary down with a panic.
func guestTimeout(t *testing.T, modes int) time.Duration {
	d := time.Duration(modes)*guestRunTimeout + 2*time.Minute
	if dl, ok := t.Deadline(); ok {
		if left := time.Until(dl) - 30*time.Second; left < d {
			d = left
		}
	}
	return d
}

// buildStatic runs `go <verb> -ldflags=-s -w -o out pkg` from the module root with
// CGO_ENABLED=0: the guest has no libc for Go binaries, and symbols are a third of their
// size.
func buildStatic(t *testing.T, verb []string, out, pkg string) {
	t.Helper()
	args := append(append([]string{}, verb...), "-ldflags=-s -w", "-o", out, pkg)
	cmd := exec.CommandContext(t.Context(), "go", args...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	if static, err := IsStatic(out); err != nil || !static {
		t.Fatalf("%s is not a static binary (err %v)", out, err)
	}
}

// buildDatapathInitramfs assembles the guest: the init script and its settings, busybox,
// the modules, the static kube-proxy and e2e binaries, and every tool the e2e suite and
// kube-proxy exec (ip, sysctl, iptables of both backends, nft, ipset, ipvsadm,
// conntrack) with their libraries.
func buildDatapathInitramfs(k *Kernel, busybox, kubeProxy, e2e string, tools map[string]string, env, out string) error {
	r := NewInitramfs()
	script, err := os.ReadFile("testdata/datapath-init.sh")
	if err != nil {
		return err
	}
	r.AddBytes("init", script, 0o755)
	r.AddBytes("etc/e2e.env", []byte(env), 0o644)
	if err := r.AddFile("usr/bin/kube-proxy", kubeProxy); err != nil {
		return err
	}
	if err := r.AddFile("usr/bin/e2e.test", e2e); err != nil {
		return err
	}
	mods, err := k.ModuleClosure(DefaultModules)
	if err != nil {
		return err
	}
	if err := r.AddModules(k, mods); err != nil {
		return err
	}
	if err := r.AddIPTables(tools["xtables-nft-multi"], tools["xtables-legacy-multi"]); err != nil {
		return err
	}
	for _, tool := range []string{"ipset", "ipvsadm", "ip", "nft", "conntrack", "sysctl", "nsenter"} {
		if tools[tool] == "" {
			continue // optional, absent on the host
		}
		// In /usr/sbin, ahead of busybox's applets of the same name in PATH and in
		// the archive (AddBusybox leaves taken paths alone).
		if err := r.AddDynamic("usr/sbin/"+tool, tools[tool]); err != nil {
			return err
		}
	}
	for _, f := range []string{"/etc/protocols", "/etc/services", "/etc/ethertypes"} {
		if _, err := os.Stat(f); err == nil {
			if err := r.AddFile(f, f); err != nil {
				return err
			}
		}
	}
	r.AddBytes("etc/hostname", []byte("node-1\n"), 0o644)
	r.AddBytes("etc/passwd", []byte("root:x:0:0:root:/root:/bin/sh\n"), 0o644)
	if err := r.AddBusybox(busybox); err != nil {
		return err
	}
	return r.Write(out)
}

// goTestResult is one (sub)test's result line of `go test -v` output.
type goTestResult struct {
	Mode    string // the guest's VMMODE when it ran
	Name    string // "TestDatapath/ipvs/ClusterIP"
	Status  string // PASS, FAIL or SKIP
	Elapsed string // "1.23s"
	Output  []string
}

func (r goTestResult) hasFailedChild(all []goTestResult) bool {
	for _, o := range all {
		if o.Status == "FAIL" && o.Mode == r.Mode && strings.HasPrefix(o.Name, r.Name+"/") {
			return true
		}
	}
	return false
}

// goTestLog reads `go test -v` output line by line, as the console delivers it: "=== RUN
// X", "=== CONT X" and "=== NAME X" say whose output follows, indented lines are that
// test's log, "--- PASS|FAIL|SKIP: X (1.2s)" (indented for subtests) ends X. "VMMODE m"
// lines of the guest's init say which mode the following run is.
type goTestLog struct {
	mu      sync.Mutex
	mode    string
	current string
	output  map[string][]string // by mode + "\x00" + test name
	done    []goTestResult
}

// maxOutputLines bounds what is kept of one test's log: the end is what explains a
// failure.
const maxOutputLines = 60

var (
	runRE    = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)`)
	resultRE = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+s)\)`)
)

func newGoTestLog() *goTestLog { return &goTestLog{output: map[string][]string{}} }

func (l *goTestLog) line(s string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m, ok := strings.CutPrefix(s, "VMMODE "); ok {
		l.mode, l.current = strings.TrimSpace(m), ""
		return
	}
	if m := runRE.FindStringSubmatch(s); m != nil {
		l.current = m[1]
		return
	}
	if m := resultRE.FindStringSubmatch(s); m != nil {
		key := l.mode + "\x00" + m[2]
		l.done = append(l.done, goTestResult{Mode: l.mode, Name: m[2], Status: m[1], Elapsed: m[3], Output: l.output[key]})
		delete(l.output, key)
		return
	}
	if l.current != "" && strings.HasPrefix(s, "    ") {
		key := l.mode + "\x00" + l.current
		out := append(l.output[key], strings.TrimSpace(s))
		if len(out) > maxOutputLines {
			out = out[len(out)-maxOutputLines:]
		}
		l.output[key] = out
	}
}

// results returns mode's results in the order they were reported.
func (l *goTestLog) results(mode string) []goTestResult {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []goTestResult
	for _, r := range l.done {
		if r.Mode == mode {
			out = append(out, r)
		}
	}
	return out
}
