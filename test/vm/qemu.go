package vm

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Result is one check the guest reported as "VMCHECK <name> PASS|FAIL <detail>".
type Result struct {
	Name   string
	Pass   bool
	Detail string
}

func (r Result) String() string {
	s := "FAIL"
	if r.Pass {
		s = "PASS"
	}
	return fmt.Sprintf("%s %s %s", r.Name, s, r.Detail)
}

// DoneMarker is the line a guest prints when it has reported every check; Boot treats a
// console that ends without it as a guest that crashed or hung.
const DoneMarker = "VMDONE"

// BootOptions tune Boot; the zero value is usable.
type BootOptions struct {
	// Timeout bounds the whole boot; the guest is killed when it expires. Default 150s.
	Timeout time.Duration
	// MemoryMB is the guest's memory. Default 1024.
	MemoryMB int
	// Cmdline is appended to the kernel command line.
	Cmdline string
	// KVMStartTimeout is how long a KVM guest may take to print its first line starting
	// with "VM" before Boot falls back to TCG. Default 20s (a working KVM guest prints its
	// first line within a few seconds).
	KVMStartTimeout time.Duration
	// OnLine, when set, is called with every console line (carriage returns trimmed), in
	// order, from one goroutine, before Boot returns: for guests that report more than
	// VMCHECK lines, such as a Go test binary's -test.v output.
	OnLine func(line string)
}

// Accel returns the qemu accelerator to use: kvm when /dev/kvm can be opened, else tcg;
// KUBE_PROXY_VM_ACCEL overrides. Opening is the test, not existence: a /dev/kvm node
// without access (or without a working module) would make qemu fail rather than fall back.
func Accel() string {
	if a := os.Getenv("KUBE_PROXY_VM_ACCEL"); a != "" {
		return a
	}
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return "tcg"
	}
	f.Close()
	return "kvm"
}

// Require skips t unless the host can boot guests: root (for building from the host's
// kernel cache and tools) and qemu-system-x86_64. It also skips with -short: a guest
// run takes a minute or more.
func Require(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("boots a QEMU guest (a minute or more); skipped with -short")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the kernel cache and apt-get download need it")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("qemu-system-x86_64 not installed (apt-get install qemu-system-x86)")
	}
}

// errNoGuestOutput says a KVM guest printed nothing of its own in time.
var errNoGuestOutput = errors.New("no guest output")

// Boot boots kernel with initrd under qemu-system-x86_64, logs every console line to t,
// and returns the checks the guest reported. It returns an error, with the results seen so
// far, when qemu fails, the timeout expires (the guest is killed) or the guest stopped
// without printing DoneMarker.
//
// Under KVM, a guest that prints no line starting with "VM" within KVMStartTimeout is
// killed and booted again under TCG: some hosts (nested or microVM hypervisors) expose a
// /dev/kvm that opens but cannot run this kernel ("KVM internal error ... emulation
// failure" after minutes of silence). The retry gets what is left of Timeout.
func Boot(ctx context.Context, t testing.TB, kernel, initrd string, opts BootOptions) ([]Result, error) {
	t.Helper()
	if opts.Timeout == 0 {
		opts.Timeout = 150 * time.Second
	}
	if opts.MemoryMB == 0 {
		opts.MemoryMB = 1024
	}
	if opts.KVMStartTimeout == 0 {
		opts.KVMStartTimeout = 20 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	accel := Accel()
	results, err := bootOnce(ctx, t, kernel, initrd, opts, accel)
	if accel == "kvm" && errors.Is(err, errNoGuestOutput) && os.Getenv("KUBE_PROXY_VM_ACCEL") == "" {
		t.Logf("KVM guest printed nothing within %v; retrying under TCG", opts.KVMStartTimeout)
		results, err = bootOnce(ctx, t, kernel, initrd, opts, "tcg")
	}
	return results, err
}

func bootOnce(ctx context.Context, t testing.TB, kernel, initrd string, opts BootOptions, accel string) ([]Result, error) {
	t.Helper()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	args := []string{
		"-accel", accel,
		"-m", fmt.Sprint(opts.MemoryMB),
		"-smp", "2",
		"-nographic", "-no-reboot",
		// No network device or disk: the guest's world is its initramfs.
		"-nic", "none",
		"-kernel", kernel, "-initrd", initrd,
		// no_timer_check: under TCG on a loaded host the kernel's IO-APIC timer
		// check can fail ("IO-APIC + timer doesn't work!") and panic the boot; it
		// was seen once at load 17.
		"-append", strings.TrimSpace("console=ttyS0 panic=-1 no_timer_check " + opts.Cmdline),
	}
	if accel == "kvm" {
		args = append(args, "-cpu", "host")
	}
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	// Killing qemu is enough: it has no children worth waiting for. WaitDelay bounds the
	// wait for the console pipe should something still hold it.
	cmd.WaitDelay = 5 * time.Second
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("qemu stdout: %w", err)
	}
	cmd.Stderr = cmd.Stdout
	t.Logf("booting: qemu-system-x86_64 %s", strings.Join(args, " "))
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting qemu: %w", err)
	}
	var (
		mu      sync.Mutex
		results []Result
		done    bool
	)
	alive := make(chan struct{})
	var aliveOnce sync.Once
	if accel == "kvm" {
		go func() {
			select {
			case <-alive:
			case <-ctx.Done():
			case <-time.After(opts.KVMStartTimeout):
				cancel(errNoGuestOutput)
			}
		}()
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 64*1024), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			t.Logf("[%6.2fs] %s", time.Since(start).Seconds(), line)
			if strings.HasPrefix(line, "VM") {
				aliveOnce.Do(func() { close(alive) })
			}
			if opts.OnLine != nil {
				opts.OnLine(line)
			}
			r, ok := parseCheck(line)
			mu.Lock()
			if ok {
				results = append(results, r)
			}
			if strings.TrimSpace(line) == DoneMarker {
				done = true
			}
			mu.Unlock()
		}
	}()
	<-scanned
	waitErr := cmd.Wait()
	mu.Lock()
	defer mu.Unlock()
	t.Logf("guest ran %.1fs (accel %s)", time.Since(start).Seconds(), accel)
	if errors.Is(context.Cause(ctx), errNoGuestOutput) {
		return results, fmt.Errorf("%w within %v under KVM; killed it", errNoGuestOutput, opts.KVMStartTimeout)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return results, fmt.Errorf("guest did not finish within %v; killed it", opts.Timeout)
	}
	if waitErr != nil {
		return results, fmt.Errorf("qemu: %w", waitErr)
	}
	if !done {
		return results, fmt.Errorf("guest stopped without printing %s (crashed or init died)", DoneMarker)
	}
	return results, nil
}

// parseCheck parses "VMCHECK <name> PASS|FAIL <detail…>" anywhere in a line (kernel
// messages can share the serial line with the guest's output).
func parseCheck(line string) (Result, bool) {
	i := strings.Index(line, "VMCHECK ")
	if i < 0 {
		return Result{}, false
	}
	f := strings.SplitN(strings.TrimSpace(line[i+len("VMCHECK "):]), " ", 3)
	if len(f) < 2 || (f[1] != "PASS" && f[1] != "FAIL") {
		return Result{}, false
	}
	r := Result{Name: f[0], Pass: f[1] == "PASS"}
	if len(f) == 3 {
		r.Detail = f[2]
	}
	return r, true
}
