//go:build linux

package app

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// dryRunInNetns runs `kube-proxy --dry-run` (the test binary as kube-proxy)
// inside ns, as kube-proxy running there would compute its rules, and
// returns the IPv4 part.
func dryRunInNetns(t *testing.T, ns string, args ...string) string {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, self, "-test.run=^TestKubeProxyHelperProcess$", "--", "--dry-run"}, args...)...)
	cmd.Env = append(os.Environ(), kubeProxyHelperEnv+"=1")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kube-proxy --dry-run %v in %s: %v\n%s", args, ns, err, stderr.String())
	}
	var b strings.Builder
	in := false
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "# kube-proxy --dry-run: ") {
			in = strings.HasPrefix(line, "# kube-proxy --dry-run: IPv4,")
			continue
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	if b.Len() == 0 {
		t.Fatalf("the dry run in %s printed no IPv4 rules:\n%s", ns, out)
	}
	return b.String()
}

// kube-proxy in a namespace programs the iptables backend it detects there;
// trace reads that same backend (detected inside the namespace, not on the
// host, and not whatever PATH calls iptables-save) and says which it read.
func TestTraceLiveIPTablesBackend(t *testing.T) {
	for _, backend := range []string{"legacy", "nft"} {
		t.Run(backend, func(t *testing.T) {
			ns := newTraceNetns(t, "iptables-legacy-restore", "iptables-nft-restore", "iptables-legacy-save", "iptables-nft-save", "iptables-legacy", "iptables-nft")
			loadIPTablesDryRunWith(t, ns, dryRunSection(t, "iptables"), "iptables-"+backend)
			args := []string{"--netns=" + ns, "--local-addresses=198.18.0.10", "--from=198.19.1.5", "--in-interface=cbr0", "--to=10.96.0.10:80"}
			out, err := runTrace(t, append(slices.Clone(args), "-o", "json")...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			want := []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080"}
			if got := outcomeList(rep.Result); !slices.Equal(got, want) {
				t.Errorf("rules in iptables-%s: got %q, want %q\n%s", backend, got, want, out)
			}
			if !strings.HasPrefix(rep.Read, "iptables-"+backend+" rules (iptables-"+backend+"-save) from network namespace "+ns) {
				t.Errorf("the answer does not say iptables-%s rules were read: %q", backend, rep.Read)
			}
			text, err := runTrace(t, args...)
			if err != nil || !strings.Contains(text, "\nRead: iptables-"+backend+" rules") {
				t.Errorf("text answer: %v\n%s", err, text)
			}

			// --iptables-backend says which to read, as it says which
			// kube-proxy programs.
			other := map[string]string{"legacy": "nft", "nft": "legacy"}[backend]
			out, err = runTrace(t, append(slices.Clone(args), "--iptables-backend="+other, "-o", "json")...)
			if err != nil {
				t.Fatal(err)
			}
			if rep := decodeReport(t, out); !strings.Contains(rep.Note, "no kube-proxy rules") || !strings.HasPrefix(rep.Read, "iptables-"+other+" rules") {
				t.Errorf("--iptables-backend=%s: want iptables-%s read and no kube-proxy rules found in it:\n%s", other, other, out)
			}
		})
	}
}

// A namespace where kube-proxy has programmed nothing: the answer says so
// rather than answering ACCEPT as if the Service worked, and --live, which
// asks for the live rules explicitly, fails.
func TestTraceNoKubeProxyRules(t *testing.T) {
	ns := newTraceNetns(t, "nft", "iptables-save")
	args := []string{"--netns=" + ns, "--local-addresses=198.18.0.10", "--from=198.19.1.5", "--to=10.96.0.10:80"}
	for _, mode := range []string{"", "iptables", "nftables"} {
		a := slices.Clone(args)
		if mode != "" {
			a = append(a, "--proxy-mode="+mode)
		}
		out, err := runTrace(t, a...)
		if err != nil {
			t.Errorf("mode %q: %v", mode, err)
		}
		if !strings.Contains(out, "Note: no kube-proxy rules in network namespace "+ns) {
			t.Errorf("mode %q: the answer does not say there are no kube-proxy rules:\n%s", mode, out)
		}
		_, err = runTrace(t, append(a, "--live")...)
		if err == nil || !strings.Contains(err.Error(), "no kube-proxy rules") || !strings.Contains(err.Error(), "nothing to trace") {
			t.Errorf("mode %q --live: error %v, want one saying there is nothing to trace", mode, err)
		}
	}
}

// `trace --netns X --live` computes the rules it compares with X's as
// kube-proxy in X computes them: the addresses --nodeport-addresses (or, in
// nftables mode, its default "primary") selects are X's, not the host's.
// So it agrees with `ip netns exec X kube-proxy trace --live`.
func TestTraceNetnsComputedInside(t *testing.T) {
	for _, mode := range []string{"iptables", "nftables"} {
		t.Run(mode, func(t *testing.T) {
			tools := map[string][]string{"nftables": {"nft"}, "iptables": {"iptables", "iptables-restore", "iptables-save"}}[mode]
			ns := newTraceNetns(t, tools...)
			// node-1's address (examples/cluster) is on an interface of
			// the namespace only (lo: this kernel may lack the dummy
			// and veth modules).
			nsRun(t, ns, "ip", "addr", "add", "198.18.0.10/32", "dev", "lo")
			proxyArgs := []string{"--manifests=" + clusterManifests, "--hostname-override=node-1", "--proxy-mode=" + mode}
			if mode == "iptables" {
				proxyArgs = append(proxyArgs, "--nodeport-addresses=198.18.0.0/24")
			}
			text := dryRunInNetns(t, ns, proxyArgs...)
			if !strings.Contains(text, "198.18.0.10") {
				t.Fatalf("the dry run in the namespace has no NodePort rule for 198.18.0.10; the test proves nothing:\n%s", text)
			}
			if mode == "nftables" {
				nsRunInput(t, ns, text, "nft", "-f", "-")
			} else {
				loadIPTablesDryRun(t, ns, text)
			}
			args := append([]string{"--netns=" + ns, "--live", "--from=203.0.113.9", "--in-interface=eth0", "--to=198.18.0.10:30080", "-o", "json"}, proxyArgs...)
			out, err := runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			if rep.InSync == nil || !*rep.InSync {
				t.Errorf("rules kube-proxy computed in the namespace reported as differing from what trace computes for it: %+v", rep.Differences)
			}
		})
	}
}

// A kube-proxy running in nftables mode that has synced an added endpoint
// incrementally balances over other slots of its endpoint map (another
// numgen offset) than a fresh computation; trace --live finds it in sync,
// and traces the three endpoints.
func TestTraceNFTIncrementalSyncInSync(t *testing.T) {
	ns := newTraceNetns(t, "nft")
	manifests := t.TempDir()
	entries, err := os.ReadDir(clusterManifests)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if data, err := os.ReadFile(filepath.Join(clusterManifests, e.Name())); err == nil {
			if err := os.WriteFile(filepath.Join(manifests, e.Name()), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", ns, self, "-test.run=^TestKubeProxyHelperProcess$", "--",
		"--proxy-mode=nftables", "--manifests="+manifests, "--hostname-override=node-1", "--manifests-rescan-period=1s",
		"--healthz-bind-address=127.0.0.1:20256", "--metrics-bind-address=127.0.0.1:20249")
	cmd.Env = append(os.Environ(), kubeProxyHelperEnv+"=1")
	var logs lockedBuffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
	})
	waitFor := func(what, text string) string {
		t.Helper()
		deadline := time.Now().Add(90 * time.Second)
		for time.Now().Before(deadline) {
			out, _ := exec.Command("ip", "netns", "exec", ns, "nft", "list", "table", "ip", "kube-proxy").CombinedOutput()
			if strings.Contains(string(out), text) {
				return string(out)
			}
			time.Sleep(500 * time.Millisecond)
		}
		t.Fatalf("kube-proxy did not program %s within 90s; its log:\n%s", what, logs.String())
		return ""
	}
	waitFor("demo/web's endpoints", "198.19.2.10 . 8080")

	web := filepath.Join(manifests, "web.yaml")
	data, err := os.ReadFile(web)
	if err != nil {
		t.Fatal(err)
	}
	const second = "- addresses: [198.19.2.10]\n  nodeName: node-2\n  zone: zone-b\n  conditions: {ready: true, serving: true, terminating: false}\n"
	if !strings.Contains(string(data), second) {
		t.Fatalf("examples/cluster/web.yaml no longer holds %q", second)
	}
	added := strings.Replace(string(data), second, second+strings.ReplaceAll(second, "198.19.2.10", "198.19.2.11"), 1)
	if err := os.WriteFile(web, []byte(added), 0o644); err != nil {
		t.Fatal(err)
	}
	table := waitFor("the added endpoint", "198.19.2.11 . 8080")
	if strings.Contains(table, "numgen random mod 3 offset 0 map") {
		t.Fatalf("the incremental sync kept demo/web at offset 0, as a fresh computation lays it out; the test proves nothing:\n%s", table)
	}

	out, err := runTrace(t, "--netns="+ns, "--live", "--manifests="+manifests, "--hostname-override=node-1",
		"--from=198.19.1.5", "--to=10.96.0.10:80", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	rep := decodeReport(t, out)
	want := []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080", "ACCEPT dnat=198.19.2.11:8080"}
	if got := outcomeList(rep.Result); !slices.Equal(got, want) {
		t.Errorf("live rules: got %q, want %q", got, want)
	}
	if rep.InSync == nil || !*rep.InSync {
		t.Errorf("an incrementally synced Service that balances as computed is reported out of sync: %v", rep.Differences)
	}
}
