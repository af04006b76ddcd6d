//go:build linux

package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/kube-proxy/test/kubeapiserver"
	"k8s.io/kube-proxy/test/kubeproxybin"
)

var (
	// The server the tests that do not restart it share, started by the first test
	// that asks and stopped by TestMain.
	sharedOnce   sync.Once
	sharedServer *kubeapiserver.Server
	sharedErr    error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if sharedServer != nil {
		sharedServer.Close()
	}
	kubeproxybin.Remove()
	os.Exit(code)
}

// requireAPIServer skips unless the API server fixtures exist (failing instead under
// KUBE_PROXY_REQUIRE_APISERVER=1) and the run is not -short.
func requireAPIServer(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs kube-apiserver; skipped with -short")
	}
	kubeapiserver.RequireBinaries(t)
}

// requireEnv is requireAPIServer plus what running kube-proxy in network namespaces
// takes: root and the tools.
func requireEnv(t *testing.T) {
	t.Helper()
	requireAPIServer(t)
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates network namespaces and programs them")
	}
	for _, tool := range []string{"ip", "iptables-save", "iptables-restore", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
}

// shared returns the API server of the tests that do not restart it.
func shared(t *testing.T) *kubeapiserver.Server {
	t.Helper()
	requireAPIServer(t)
	sharedOnce.Do(func() {
		bins, err := kubeapiserver.FindBinaries()
		if err != nil {
			sharedErr = err
			return
		}
		began := time.Now()
		sharedServer, sharedErr = kubeapiserver.New(bins, kubeapiserver.Options{})
		if sharedErr == nil {
			t.Logf("shared kube-apiserver ready on %s after %s", sharedServer.URL(), time.Since(began).Round(time.Millisecond))
		}
	})
	if sharedErr != nil {
		t.Fatalf("shared kube-apiserver: %v", sharedErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("--- shared kube-apiserver log tail (%s) ---\n%s", sharedServer.LogPath, sharedServer.LogTail(30))
		}
	})
	return sharedServer
}

// syncBuffer is a bytes.Buffer a process writes and a test reads.
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

// Where kube-proxy serves inside its namespace (upstream's default ports).
const (
	healthzAddr = "127.0.0.1:10256"
	metricsAddr = "127.0.0.1:10249"
)

// kubeProxy is the binary running in a namespace.
type kubeProxy struct {
	ns     *netNS
	cmd    *exec.Cmd
	out    *syncBuffer
	exited chan struct{}
	err    error
}

// startKubeProxy runs the binary in ns with the given kubeconfig, as node nodeName.
// The process is killed in t.Cleanup (its output is logged if the test failed).
func startKubeProxy(t *testing.T, ns *netNS, kubeconfig, mode, nodeName string, extra ...string) *kubeProxy {
	t.Helper()
	return startProxyBinary(t, kubeproxybin.Path(t), "kube-proxy", ns, kubeconfig, mode, nodeName, extra...)
}

// startProxyBinary is startKubeProxy for any kube-proxy binary (ours or upstream's,
// which take the same flags); label names it in the output logged on failure.
func startProxyBinary(t *testing.T, bin, label string, ns *netNS, kubeconfig, mode, nodeName string, extra ...string) *kubeProxy {
	t.Helper()
	args := []string{"netns", "exec", ns.name, bin,
		"--kubeconfig=" + kubeconfig,
		"--proxy-mode=" + mode,
		"--hostname-override=" + nodeName,
		"--cluster-cidr=198.18.0.0/16",
		"--healthz-bind-address=" + healthzAddr,
		"--metrics-bind-address=" + metricsAddr,
		// conntrack limits are host-wide, not per namespace: leave them alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-min-sync-period=100ms",
		"--v=2",
	}
	p := &kubeProxy{ns: ns, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command("ip", append(args, extra...)...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Do not outlive a test binary that dies without running its cleanups.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		p.stop(5 * time.Second)
		if t.Failed() {
			t.Logf("--- %s (%s) output tail ---\n%s", label, mode, lastLines(p.out.String(), 60))
		}
	})
	return p
}

func (p *kubeProxy) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// stop sends SIGTERM and kills after grace; it returns the exit error and whether
// the process ended on SIGTERM.
func (p *kubeProxy) stop(grace time.Duration) (error, bool) {
	if !p.running() {
		return p.err, true
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return p.err, true
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return p.err, false
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// eventually polls cond every 200ms until it holds; on timeout it fails with detail().
func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s\n%s", timeout, what, detail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// grepLines keeps the lines of s that contain substr, for failure messages.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// metricValue is the value of the sample named exactly series (name{labels}) in a
// Prometheus text exposition, or -1 when absent.
func metricValue(body, series string) float64 {
	for _, l := range strings.Split(body, "\n") {
		if rest, ok := strings.CutPrefix(l, series+" "); ok {
			var v float64
			if _, err := fmt.Sscanf(rest, "%g", &v); err == nil {
				return v
			}
		}
	}
	return -1
}
