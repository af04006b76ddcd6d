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
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	printFigures()
	if buildDir != "" {
		_ = os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// kubeProxyBinary builds cmd/kube-proxy once per test binary run.
func kubeProxyBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "kp-e2e-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "kube-proxy")
		out, err := exec.Command("go", "build", "-o", binPath, "../../cmd/kube-proxy").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build ./cmd/kube-proxy: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// modeTools are the binaries each mode needs in the node namespace.
var modeTools = map[string][]string{
	"iptables": {"iptables-restore", "iptables-save", "ip6tables-restore", "ip6tables-save", "conntrack"},
	"nftables": {"nft", "conntrack"},
}

func forEachMode(t *testing.T, fn func(t *testing.T, mode string)) {
	requireRoot(t)
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			for _, tool := range modeTools[mode] {
				if _, err := exec.LookPath(tool); err != nil {
					t.Skipf("%s mode needs %s: %v", mode, tool, err)
				}
			}
			fn(t, mode)
		})
	}
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
}

func (w *world) startKubeProxy(t *testing.T, mode, dir string) *kubeProxy {
	t.Helper()
	kp := &kubeProxy{t: t, w: w, mode: mode, bin: kubeProxyBinary(t), dir: dir, out: &syncBuffer{}}
	kp.start()
	t.Cleanup(func() {
		kp.kill()
		if t.Failed() {
			t.Logf("kube-proxy output (last 8kB):\n%s", tail(kp.out.String(), 8192))
		}
	})
	kp.waitHealthy(60 * time.Second)
	return kp
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
	kp.cmd = exec.Command("ip", "netns", "exec", n1.ns, kp.bin,
		"--manifests="+kp.dir, "--manifests-rescan-period=1s",
		"--hostname-override="+n1.name,
		"--proxy-mode="+kp.mode,
		"--cluster-cidr="+clusterCIDRs,
		"--iptables-sync-period="+syncPeriod.String(),
		"--iptables-min-sync-period=100ms",
		// conntrack limits are host-wide, not per namespace: leave them alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"-v=2",
	)
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

// rules dumps the node's kube-proxy rules of the mode.
func (kp *kubeProxy) rules() string {
	ns := kp.w.nodes[0].ns
	var b strings.Builder
	if kp.mode == "iptables" {
		for _, c := range []string{"iptables-save", "ip6tables-save"} {
			out, _ := nsExec(ns, c)
			b.WriteString(out)
		}
		return b.String()
	}
	out, _ := nsExec(ns, "nft", "list", "ruleset")
	return out
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
