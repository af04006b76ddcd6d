//go:build linux

package app

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

// serviceIPsEntry matches one element key of the nftables service-ips map.
var serviceIPsEntry = regexp.MustCompile(`[0-9.]+ \. [a-z]+ \. [0-9]+`)

// A built-in mode programs nftables in a private namespace, fed over the socket by a
// kube-proxy that serves from manifests in another process. The server is SIGKILLed,
// the manifests edited and the server restarted: the backend ends with the ruleset a
// fresh --manifests kube-proxy programs from the edited files, and at no moment in
// between is a Service missing from its rules.
func TestLocalNodeSourceKernelRestart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	for _, bin := range []string{"ip", "nft"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs %s: %v", bin, err)
		}
	}
	t.Parallel()
	type netns struct {
		name string
		in   func(args ...string) (string, error)
	}
	newNS := func(prefix string) netns {
		var rnd [4]byte
		_, _ = rand.Read(rnd[:])
		ns := prefix + hex.EncodeToString(rnd[:])
		if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
			t.Skipf("cannot create a network namespace: %v: %s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
		in := func(args ...string) (string, error) {
			out, err := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...).CombinedOutput()
			return string(out), err
		}
		if out, err := in("ip", "link", "set", "lo", "up"); err != nil {
			t.Fatalf("lo up in %s: %v: %s", ns, err, out)
		}
		return netns{ns, in}
	}
	serverNS, backendNS, freshNS := newNS("kp-lns-s-"), newNS("kp-lns-b-"), newNS("kp-lns-f-")

	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	common := []string{
		"--proxy-mode=nftables", "--hostname-override=node-1",
		"--cluster-cidr=198.19.0.0/16,fd00:1::/48", "--nodeport-addresses=198.18.0.0/15",
		"--iptables-min-sync-period=0s",
	}
	var procs sync.WaitGroup
	start := func(ns netns, log string, args ...string) *exec.Cmd {
		t.Helper()
		argv := append([]string{"netns", "exec", ns.name, self, "-test.run=^TestKubeProxyHelperProcess$", "--"}, append(slices.Clone(common), args...)...)
		cmd := exec.CommandContext(ctx, "ip", argv...)
		cmd.Env = append(os.Environ(), kubeProxyHelperEnv+"=1")
		f, err := os.Create(log)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs.Add(1)
		go func() { defer procs.Done(); _ = cmd.Wait(); f.Close() }()
		return cmd
	}
	logs := t.TempDir()
	t.Cleanup(func() {
		cancel()
		procs.Wait()
		if t.Failed() {
			for _, name := range []string{"server1", "server2", "backend", "fresh"} {
				data, _ := os.ReadFile(filepath.Join(logs, name+".log"))
				lines := strings.Split(string(data), "\n")
				t.Logf("%s log (last lines):\n%s", name, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})

	// What the server serves, and, with the edit already made, what a fresh kube-proxy
	// programs.
	dir := copyExamplesWithout(t)
	edited := copyExamplesWithout(t)
	editWeb := func(d string) {
		web := filepath.Join(d, "web.yaml")
		data, err := os.ReadFile(web)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(web, []byte(strings.ReplaceAll(string(data), "10.96.0.10", "10.96.0.20")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	editWeb(edited)

	sock := filepath.Join(t.TempDir(), "ln.sock")
	server := start(serverNS, filepath.Join(logs, "server1.log"), "--manifests="+dir, "--localnode-serve=unix://"+sock)
	start(freshNS, filepath.Join(logs, "fresh.log"), "--manifests="+edited)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the server did not listen on %s", sock)
		}
	}
	start(backendNS, filepath.Join(logs, "backend.log"), "--localnode-source=unix://"+sock)

	entries := func(ns netns) []string {
		out, err := ns.in("nft", "list", "map", "ip", "kube-proxy", "service-ips")
		if err != nil {
			return nil
		}
		got := serviceIPsEntry.FindAllString(out, -1)
		sort.Strings(got)
		return got
	}
	waitFor := func(what string, ns netns, cond func([]string) bool) []string {
		t.Helper()
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			if got := entries(ns); cond(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s; service-ips: %v", what, entries(ns))
			}
		}
	}
	has := func(ip string) func([]string) bool {
		return func(got []string) bool {
			return slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, ip+" ") })
		}
	}
	before := waitFor("the backend's first sync", backendNS, has("10.96.0.10"))
	if len(before) != 9 {
		t.Fatalf("service-ips before the restart: %v, want the example's 9", before)
	}
	unchanged := slices.DeleteFunc(slices.Clone(before), func(e string) bool { return strings.HasPrefix(e, "10.96.0.10 ") })

	// Sample the backend's Services throughout the restart.
	stopSampling := make(chan struct{})
	sampled := make(chan [][]string)
	go func() {
		var samples [][]string
		for {
			select {
			case <-stopSampling:
				sampled <- samples
				return
			case <-time.After(20 * time.Millisecond):
				samples = append(samples, entries(backendNS))
			}
		}
	}()

	if err := server.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	editWeb(dir)
	time.Sleep(500 * time.Millisecond) // the backend is left without a server a while
	start(serverNS, filepath.Join(logs, "server2.log"), "--manifests="+dir, "--localnode-serve=unix://"+sock)
	waitFor("the backend to follow the edit", backendNS, func(got []string) bool { return has("10.96.0.20")(got) && !has("10.96.0.10")(got) })
	close(stopSampling)
	samples := <-sampled

	for i, got := range samples {
		for _, e := range unchanged {
			if !slices.Contains(got, e) {
				t.Errorf("sample %d of %d lacks %q: %v", i, len(samples), e, got)
			}
		}
		if len(got) != 9 {
			t.Errorf("sample %d of %d has %d Services: %v", i, len(samples), len(got), got)
		}
	}
	t.Logf("%d samples of the backend's service-ips through the restart, none partial", len(samples))

	waitFor("the fresh kube-proxy's sync", freshNS, has("10.96.0.20"))
	normalize := func(ns netns) string {
		out, err := ns.in("nft", "list", "ruleset")
		if err != nil {
			t.Fatalf("nft list ruleset: %v: %s", err, out)
		}
		// Set and map elements are listed in the kernel's order and wrapped to the
		// line; compare them as one sorted list per line.
		var lines []string
		for _, l := range strings.Split(out, "\n") {
			for _, part := range strings.Split(l, ",") {
				if p := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(part), "elements = {")); p != "" {
					lines = append(lines, strings.TrimSuffix(p, " }"))
				}
			}
		}
		sort.Strings(lines)
		return strings.Join(lines, "\n")
	}
	var got, want string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		got, want = normalize(backendNS), normalize(freshNS)
		if got == want || time.Now().After(deadline) {
			break
		}
	}
	if diff := lineDiff(want, got); diff != "" {
		t.Errorf("the backend's ruleset after the restart differs from a fresh --manifests run's (-fresh +backend):\n%s", diff)
	}
}
