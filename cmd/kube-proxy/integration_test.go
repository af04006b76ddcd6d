//go:build linux

package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/kube-proxy/test/kubeproxybin"
)

// The built binary, run as root in a private network namespace on the example
// manifests: /healthz, rules, /metrics, following a manifest edit, rejecting a bad
// document, leaving rules in place on SIGTERM, and --cleanup emptying the namespace.
func TestBinaryInNetns(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace and programs it")
	}
	for _, tool := range []string{"ip", "iptables-save", "ip6tables-save", "nft", "curl"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped with -short")
	}

	bin := kubeproxybin.Path(t)

	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) { runModeInNetns(t, bin, mode) })
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	kubeproxybin.Remove()
	os.Exit(code)
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// newNetns creates a namespace with loopback up, holding node-1's addresses from the
// example manifests (on a veth pair inside the namespace when the kernel has veth,
// else on loopback).
func newNetns(t *testing.T) string {
	t.Helper()
	ns := randomName("kp-it-")
	run(t, "ip", "netns", "add", ns)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	dev := "eth0"
	if err := exec.Command("ip", "-n", ns, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1").Run(); err != nil {
		dev = "lo"
	} else {
		run(t, "ip", "-n", ns, "link", "set", "eth1", "up")
	}
	run(t, "ip", "-n", ns, "addr", "add", "198.18.0.10/24", "dev", dev)
	run(t, "ip", "-n", ns, "-6", "addr", "add", "fd00:18::10/64", "dev", dev, "nodad")
	run(t, "ip", "-n", ns, "link", "set", dev, "up")
	return ns
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	entries, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		data, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for a process writing and a test reading.
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

func httpGet(ns, url string) (int, string) {
	out, err := exec.Command("ip", "netns", "exec", ns, "curl", "-s", "-m", "2", "-w", "\n%{http_code}", url).Output()
	if err != nil && len(out) == 0 {
		return 0, err.Error()
	}
	s := string(out)
	i := strings.LastIndex(s, "\n")
	var code int
	_, _ = fmt.Sscanf(s[i+1:], "%d", &code)
	return code, s[:i]
}

func rules(t *testing.T, ns string) string {
	t.Helper()
	var b strings.Builder
	for _, cmd := range [][]string{{"iptables-save"}, {"ip6tables-save"}, {"nft", "list", "ruleset"}} {
		out, _ := exec.Command("ip", append([]string{"netns", "exec", ns}, cmd...)...).CombinedOutput()
		b.Write(out)
	}
	return b.String()
}

// modeRules is what the given mode programs: iptables-save output for iptables,
// the kube-proxy tables for nftables. Unlike rules, it cannot be satisfied by the
// other mode's state.
func modeRules(t *testing.T, ns, mode string) string {
	t.Helper()
	cmds := [][]string{{"iptables-save"}, {"ip6tables-save"}}
	if mode == "nftables" {
		cmds = [][]string{{"nft", "list", "table", "ip", "kube-proxy"}, {"nft", "list", "table", "ip6", "kube-proxy"}}
	}
	var b strings.Builder
	for _, cmd := range cmds {
		out, _ := exec.Command("ip", append([]string{"netns", "exec", ns}, cmd...)...).CombinedOutput()
		b.Write(out)
	}
	return b.String()
}

var (
	ruleCounters = regexp.MustCompile(`\[\d+:\d+\]|packets \d+ bytes \d+`)
	saveComment  = regexp.MustCompile(`(?m)^#.*\n`)
)

// stableRules is modeRules without what changes on its own: iptables-save's
// timestamped comments and packet counters.
func stableRules(t *testing.T, ns, mode string) string {
	t.Helper()
	return ruleCounters.ReplaceAllString(saveComment.ReplaceAllString(modeRules(t, ns, mode), ""), "")
}

// leftovers lists the kube-proxy state in the namespace, of either mode.
func leftovers(t *testing.T, ns string) []string {
	t.Helper()
	var left []string
	for _, line := range strings.Split(rules(t, ns), "\n") {
		// KUBE-FIREWALL is kubelet's chain, which kube-proxy only duplicates; upstream's
		// cleanup leaves it too, so that a running kubelet keeps its protection.
		if strings.Contains(line, "KUBE-FIREWALL") || strings.Contains(line, "block incoming localnet connections") {
			continue
		}
		if strings.Contains(line, "KUBE-") || strings.Contains(line, "kube-proxy") {
			left = append(left, line)
		}
	}
	return left
}

// seedOtherMode leaves state behind as a kube-proxy in the other mode would, so the
// test can see that starting in this mode removes it (as upstream does on a mode
// switch).
func seedOtherMode(t *testing.T, ns, mode string) {
	t.Helper()
	exec1 := func(args ...string) { run(t, "ip", append([]string{"netns", "exec", ns}, args...)...) }
	if mode == "nftables" {
		for _, ipt := range []string{"iptables", "ip6tables"} {
			exec1(ipt, "-t", "nat", "-N", "KUBE-SERVICES")
			exec1(ipt, "-t", "nat", "-N", "KUBE-SVC-STALESTALESTALE")
			exec1(ipt, "-t", "nat", "-A", "KUBE-SERVICES", "-m", "comment", "--comment", "stale/svc:http cluster IP", "-j", "KUBE-SVC-STALESTALESTALE")
			exec1(ipt, "-t", "nat", "-I", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES")
			exec1(ipt, "-t", "filter", "-N", "KUBE-FORWARD")
			exec1(ipt, "-t", "filter", "-I", "FORWARD", "-m", "comment", "--comment", "kubernetes forwarding rules", "-j", "KUBE-FORWARD")
		}
		return
	}
	for _, family := range []string{"ip", "ip6"} {
		exec1("nft", "add", "table", family, "kube-proxy", "{", "comment", `"rules for kube-proxy"`, ";", "}")
		exec1("nft", "add", "chain", family, "kube-proxy", "nat-prerouting", "{", "type", "nat", "hook", "prerouting", "priority", "dstnat", ";", "}")
		exec1("nft", "add", "chain", family, "kube-proxy", "service-STALE-stale/svc/tcp/http")
	}
}

// otherModeState is what remains in the namespace of the state seedOtherMode left.
func otherModeState(t *testing.T, ns, mode string) string {
	t.Helper()
	other, marker := "iptables", "KUBE-"
	if mode == "iptables" {
		// A missing table is an error message, not a listing: only listings have braces.
		other, marker = "nftables", "{"
	}
	var left []string
	for _, line := range strings.Split(modeRules(t, ns, other), "\n") {
		if strings.Contains(line, marker) {
			left = append(left, line)
		}
	}
	return strings.Join(left, "\n")
}

func eventually(t *testing.T, what string, timeout time.Duration, cond func() bool, detail func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s\n%s", what, detail())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func runModeInNetns(t *testing.T, bin, mode string) {
	ns := newNetns(t)
	dir := t.TempDir()
	copyDir(t, filepath.Join("..", "..", "examples", "cluster"), dir)
	const healthz, metrics = "127.0.0.1:31256", "127.0.0.1:31249"
	noConntrackLimits := []string{"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0"}

	// --dry-run as root prints the mode's ruleset and programs nothing.
	dryCmd := exec.Command("ip", "netns", "exec", ns, bin, "--dry-run", "--manifests="+dir, "--hostname-override=node-1",
		"--proxy-mode="+mode, "--cluster-cidr=198.19.0.0/16,fd00:1::/48")
	var dryErr strings.Builder
	dryCmd.Stderr = &dryErr
	dryOut, err := dryCmd.Output()
	if err != nil {
		t.Fatalf("--dry-run: %v\n%s", err, dryErr.String())
	}
	wantHeader := map[string]string{"iptables": "iptables-restore input", "nftables": "nft script"}[mode]
	for _, want := range []string{"# kube-proxy --dry-run: IPv4, " + wantHeader, "# kube-proxy --dry-run: IPv6, " + wantHeader, "10.96.0.10", "fd00:10:96::14"} {
		if !strings.Contains(string(dryOut), want) {
			t.Errorf("--dry-run output lacks %q:\n%s", want, dryOut)
		}
	}
	if left := leftovers(t, ns); len(left) > 0 {
		t.Fatalf("--dry-run changed the namespace:\n%s", strings.Join(left, "\n"))
	}

	// --init-only does the privileged setup and exits 0.
	initArgs := append([]string{"netns", "exec", ns, bin, "--init-only", "--manifests=" + dir, "--hostname-override=node-1", "--proxy-mode=" + mode}, noConntrackLimits...)
	if out, err := exec.Command("ip", initArgs...).CombinedOutput(); err != nil {
		t.Fatalf("--init-only: %v\n%s", err, out)
	}

	// A previous kube-proxy ran in the other mode: starting in this one removes its state.
	seedOtherMode(t, ns, mode)
	if otherModeState(t, ns, mode) == "" {
		t.Fatalf("seeding the other mode's state left nothing to see:\n%s", rules(t, ns))
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stderr syncBuffer
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, bin,
		"--manifests="+dir, "--manifests-rescan-period=1s",
		"--hostname-override=node-1",
		"--proxy-mode="+mode,
		"--cluster-cidr=198.19.0.0/16,fd00:1::/48",
		"--healthz-bind-address="+healthz, "--metrics-bind-address="+metrics,
		// conntrack limits are host-wide, not per namespace: leave them alone.
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0",
		"--iptables-min-sync-period=100ms",
	)
	cmd.Stderr = &stderr
	cmd.Stdout = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stopped := false
	defer func() {
		if !stopped {
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("kube-proxy output:\n%s", stderr.String())
		}
	}()

	// Wait for the first sync: /healthz turns 200 once rules are programmed.
	eventually(t, "/healthz 200", 60*time.Second, func() bool {
		select {
		case err := <-exited:
			stopped = true
			t.Fatalf("kube-proxy exited early: %v", err)
		default:
		}
		code, _ := httpGet(ns, "http://"+healthz+"/healthz")
		return code == 200
	}, func() string { _, body := httpGet(ns, "http://"+healthz+"/healthz"); return body })

	// /healthz is also 200 before the first sync has been queued, so wait for rules.
	eventually(t, "the example's rules", 30*time.Second, func() bool {
		r := modeRules(t, ns, mode)
		for _, want := range []string{"10.96.0.10", "198.19.1.10", "fd00:10:96::14", "30443", "198.18.100.1"} {
			if !strings.Contains(r, want) {
				return false
			}
		}
		return true
	}, func() string { return rules(t, ns) })
	if strings.Contains(rules(t, ns), "10.96.0.20") {
		t.Errorf("rules already hold the edited address")
	}
	if left := otherModeState(t, ns, mode); left != "" {
		t.Errorf("starting in %s mode left the other mode's state behind:\n%s", mode, left)
	}

	eventually(t, "sync metrics", 10*time.Second, func() bool {
		code, body := httpGet(ns, "http://"+metrics+"/metrics")
		return code == 200 && strings.Contains(body, "kubeproxy_sync_proxy_rules_duration_seconds_count") &&
			strings.Contains(body, "kubeproxy_sync_proxy_rules_last_timestamp_seconds")
	}, func() string { _, body := httpGet(ns, "http://"+metrics+"/metrics"); return body })
	if code, body := httpGet(ns, "http://"+metrics+"/proxyMode"); code != 200 || body != mode {
		t.Errorf("/proxyMode = %d %q, want %q", code, body, mode)
	}
	if code, body := httpGet(ns, "http://"+metrics+"/healthz"); code != 200 || body != "ok" {
		t.Errorf("metrics /healthz = %d %q", code, body)
	}
	if code, body := httpGet(ns, "http://"+metrics+"/configz"); code != 200 || !strings.Contains(body, "kubeproxy.config.k8s.io") {
		t.Errorf("/configz = %d %q", code, body)
	}

	// Edit a manifest: the rules follow.
	web := filepath.Join(dir, "web.yaml")
	data, _ := os.ReadFile(web)
	if err := os.WriteFile(web, bytes.ReplaceAll(data, []byte("10.96.0.10"), []byte("10.96.0.20")), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "rules to follow the edit", 30*time.Second, func() bool {
		r := modeRules(t, ns, mode)
		return strings.Contains(r, "10.96.0.20") && !strings.Contains(r, "10.96.0.10 ") && !strings.Contains(r, "10.96.0.10/")
	}, func() string { return rules(t, ns) })

	// A bad document is reported with file:line; the rest stays programmed.
	if err := os.WriteFile(filepath.Join(dir, "bad.yaml"), []byte("apiVersion: v1\nkind: Service\nmetadata: {name: bad}\nspec:\n  ports: [{port: 0}]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the bad document to be reported", 20*time.Second, func() bool {
		return strings.Contains(stderr.String(), "bad.yaml") && strings.Contains(stderr.String(), `line=4`)
	}, stderr.String)
	if !strings.Contains(rules(t, ns), "10.96.0.20") {
		t.Errorf("a bad document removed good rules")
	}

	// SIGTERM: clean exit, rules left in place.
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		stopped = true
		if err != nil {
			t.Errorf("exit after SIGTERM: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	if !strings.Contains(rules(t, ns), "10.96.0.20") {
		t.Errorf("rules were removed on SIGTERM")
	}

	// Restarted against an API server that cannot be reached: it keeps retrying, the
	// metrics server's /healthz says why, and the rules programmed before stay as
	// they are; a signal still stops it cleanly.
	before := stableRules(t, ns, mode)
	if !strings.Contains(before, "10.96.0.20") {
		t.Fatalf("no rules to keep before the restart:\n%s", before)
	}
	var stderr2 syncBuffer
	cmd2 := exec.Command("ip", "netns", "exec", ns, bin,
		"--master=https://127.0.0.1:1", "--hostname-override=node-1", "--proxy-mode="+mode,
		"--cluster-cidr=198.19.0.0/16,fd00:1::/48",
		"--healthz-bind-address="+healthz, "--metrics-bind-address="+metrics,
		"--conntrack-max-per-core=0", "--conntrack-tcp-timeout-established=0", "--conntrack-tcp-timeout-close-wait=0")
	cmd2.Stderr, cmd2.Stdout = &stderr2, &stderr2
	if err := cmd2.Start(); err != nil {
		t.Fatal(err)
	}
	exited2 := make(chan error, 1)
	go func() { exited2 <- cmd2.Wait() }()
	stopped2 := false
	defer func() {
		if !stopped2 {
			_ = cmd2.Process.Kill()
			<-exited2
		}
		if t.Failed() {
			t.Logf("kube-proxy (unreachable API server) output:\n%s", stderr2.String())
		}
	}()
	eventually(t, "/healthz/apiserver to report the unreachable API server", 30*time.Second, func() bool {
		select {
		case err := <-exited2:
			stopped2 = true
			t.Fatalf("kube-proxy exited with the API server unreachable: %v", err)
		default:
		}
		code, body := httpGet(ns, "http://"+metrics+"/healthz/apiserver")
		return code == 503 && strings.Contains(body, "API server unreachable")
	}, func() string {
		code, body := httpGet(ns, "http://"+metrics+"/healthz/apiserver")
		return fmt.Sprintf("%d %s", code, body)
	})
	// /healthz itself says only that the process serves, as upstream's does.
	if code, body := httpGet(ns, "http://"+metrics+"/healthz"); code != 200 {
		t.Errorf("metrics /healthz with the API server unreachable: %d %s, want 200 (as upstream)", code, body)
	}
	if after := stableRules(t, ns, mode); after != before {
		t.Errorf("rules changed while the API server was unreachable:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	_ = cmd2.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited2:
		stopped2 = true
		if err != nil {
			t.Errorf("exit after SIGTERM while waiting for the API server: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no exit within 20s of SIGTERM")
	}
	if after := stableRules(t, ns, mode); after != before {
		t.Errorf("rules changed by a kube-proxy that never reached the API server:\nbefore:\n%s\nafter:\n%s", before, after)
	}

	// --cleanup empties the namespace of kube-proxy state.
	out, err := exec.Command("ip", "netns", "exec", ns, bin, "--cleanup").CombinedOutput()
	if err != nil {
		t.Fatalf("--cleanup: %v\n%s", err, out)
	}
	if left := leftovers(t, ns); len(left) > 0 {
		t.Errorf("--cleanup left kube-proxy state behind:\n%s", strings.Join(left, "\n"))
	}
}
