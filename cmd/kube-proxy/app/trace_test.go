//go:build linux

package app

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

var clusterManifests = filepath.Join("..", "..", "..", "examples", "cluster")

// runTrace runs `kube-proxy trace args...` in-process and returns its output.
func runTrace(t *testing.T, args ...string) (string, error) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	cmd, to := newTraceCommandOptions()
	to.selfCommand = helperSelfCommand
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	if err := cmd.ParseFlags(args); err != nil {
		return "", err
	}
	var out bytes.Buffer
	err := to.run(ctx, cmd.Flags(), &out)
	return out.String(), err
}

// helperSelfCommand runs the test binary as kube-proxy (see
// TestKubeProxyHelperProcess), where trace runs its own binary.
func helperSelfCommand(ctx context.Context, args []string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, self, append([]string{"-test.run=^TestKubeProxyHelperProcess$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), kubeProxyHelperEnv+"=1")
	return cmd, nil
}

func decodeReport(t *testing.T, out string) traceReport {
	t.Helper()
	var rep traceReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil || rep.Result == nil {
		t.Fatalf("-o json: %v\n%s", err, out)
	}
	return rep
}

func outcomeList(r *trace.Result) []string {
	var s []string
	for _, o := range r.Outcomes {
		s = append(s, o.Key())
	}
	return s
}

// Without root and without touching the host: the rules computed from
// --manifests, as --dry-run computes them.
func TestTraceComputedFromManifests(t *testing.T) {
	for _, tc := range []struct {
		mode string
		args []string
		want []string
	}{
		{"nftables", []string{"--from=198.19.1.5", "--to=10.96.0.10:80"}, []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080"}},
		{"iptables", []string{"--from=198.19.1.5", "--to=10.96.0.10:80/tcp"}, []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080"}},
		{"nftables", []string{"--from=fd00:19:1::5", "--to=[fd00:10:96::14]:80/tcp"}, []string{"ACCEPT dnat=[fd00:1:1::15]:8080", "ACCEPT dnat=[fd00:1:2::15]:8080"}},
		{"iptables", []string{"--from=203.0.113.9", "--in-interface=eth0", "--to=198.18.100.1:80"}, []string{"DROP"}},
		{"nftables", []string{"--from=203.0.113.9", "--in-interface=eth0", "--to=198.18.100.1:80"}, []string{"DROP"}},
		{"nftables", []string{"--from=198.19.1.5", "--to=10.96.0.10:81"}, []string{"REJECT"}},
	} {
		t.Run(tc.mode+" "+strings.Join(tc.args, " "), func(t *testing.T) {
			args := append([]string{"--manifests=" + clusterManifests, "--hostname-override=node-1", "--proxy-mode=" + tc.mode, "-o", "json"}, tc.args...)
			out, err := runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			if got := outcomeList(rep.Result); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q\n%s", got, tc.want, out)
			}
			if rep.InSync != nil {
				t.Errorf("inSync reported without live rules")
			}
			if !strings.HasPrefix(rep.Rules, "computed from --manifests") {
				t.Errorf("rules: %q", rep.Rules)
			}
		})
	}
	out, err := runTrace(t, "--manifests="+clusterManifests, "--hostname-override=node-1", "--proxy-mode=nftables", "--from=198.19.1.5", "--to=10.96.0.53:53/udp")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"service kube-system/kube-dns:dns", "50.0%", "affinity: source recorded in @affinity-", "vmap @service-ips"} {
		if !strings.Contains(out, want) {
			t.Errorf("text answer lacks %q:\n%s", want, out)
		}
	}
}

func TestTraceFlagErrors(t *testing.T) {
	base := []string{"--manifests=" + clusterManifests, "--hostname-override=node-1"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--from=1.2.3.4"}, "--to is required"},
		{[]string{"--to=10.96.0.10:80"}, "--from is required"},
		{[]string{"--from=1.2.3.4", "--to=10.96.0.10"}, "want IP:PORT/PROTO"},
		{[]string{"--from=1.2.3.4", "--to=10.96.0.10:80/icmp"}, "protocol"},
		{[]string{"--from=fd00::1", "--to=10.96.0.10:80"}, "different IP families"},
		{[]string{"--from=1.2.3.4", "--to=10.96.0.10:80", "-o", "yaml"}, "want text or json"},
		{[]string{"--from=nonsense", "--to=10.96.0.10:80"}, "--from"},
		{[]string{"--from=1.2.3.4", "--to=10.96.0.10:80", "--local-addresses=x"}, "--local-addresses"},
		{[]string{"--from=1.2.3.4", "--to=10.96.0.10:80", "--proxy-mode=nftables", "--netns=/nonexistent/ns"}, "/nonexistent/ns"},
	} {
		_, err := runTrace(t, append(slices.Clone(base), tc.args...)...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: error %v, want one saying %q", tc.args, err, tc.want)
		}
	}
}

// newTraceNetns creates a private network namespace for a kernel test, or
// skips saying why it cannot.
func newTraceNetns(t *testing.T, tools ...string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, tool := range append([]string{"ip", "nsenter"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("needs %s: %v", tool, err)
		}
	}
	name := "kptrace-" + strings.ReplaceAll(time.Now().Format("150405.000000"), ".", "")
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })
	nsRun(t, name, "ip", "link", "set", "lo", "up")
	return name
}

func nsRun(t testing.TB, ns, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func nsRunInput(t testing.TB, ns, input, name string, args ...string) {
	t.Helper()
	cmd := exec.Command("ip", append([]string{"netns", "exec", ns, name}, args...)...)
	cmd.Stdin = strings.NewReader(input)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// dryRunSection is one family's part of a dry run of examples/cluster.
func dryRunSection(t *testing.T, mode string) string {
	t.Helper()
	o, err := parseAndComplete(t, []string{"--manifests=" + clusterManifests, "--hostname-override=node-1", "--proxy-mode=" + mode})
	if err != nil {
		t.Fatal(err)
	}
	_, ctx := ktesting.NewTestContext(t)
	text, _, err := computeRules(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "# kube-proxy --dry-run: ") {
			in = strings.HasPrefix(line, "# kube-proxy --dry-run: IPv4,")
			continue
		}
		if in {
			b.WriteString(line + "\n")
		}
	}
	return b.String()
}

// loadIPTablesDryRun programs an iptables dry run into ns: the restore
// input, then the jumps from the builtin chains.
func loadIPTablesDryRun(t testing.TB, ns, text string) {
	t.Helper()
	loadIPTablesDryRunWith(t, ns, text, "iptables")
}

// loadIPTablesDryRunWith is loadIPTablesDryRun through the binaries named
// ipt ("iptables", "iptables-legacy", "iptables-nft").
func loadIPTablesDryRunWith(t testing.TB, ns, text, ipt string) {
	t.Helper()
	nsRunInput(t, ns, text, ipt+"-restore", "--noflush")
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, "# ensure: -t ")
		if !ok {
			continue
		}
		words, err := trace.SplitIPTablesWords(rest)
		if err != nil {
			t.Fatal(err)
		}
		table, op := words[0], words[1]
		if op == "-N" {
			_ = exec.Command("ip", append([]string{"netns", "exec", ns, ipt, "-t", table}, words[1:]...)...).Run()
			continue
		}
		check := append([]string{"netns", "exec", ns, ipt, "-t", table, "-C"}, words[2:]...)
		if exec.Command("ip", check...).Run() == nil {
			continue
		}
		nsRun(t, ns, ipt, append([]string{"-t", table}, words[1:]...)...)
	}
}

// In a private network namespace: rules loaded into the kernel are read
// back (iptables-save, nft -j) and traced; they match what kube-proxy
// would program; a rule edited behind kube-proxy's back is a difference
// and changes the answer; a foreign table's rule the tracer cannot read is
// named, not guessed.
func TestTraceLiveKernel(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			tools := map[string][]string{"nftables": {"nft"}, "iptables": {"iptables", "iptables-restore", "iptables-save"}}[mode]
			ns := newTraceNetns(t, tools...)
			text := dryRunSection(t, mode)
			if mode == "nftables" {
				nsRunInput(t, ns, text, "nft", "-f", "-")
			} else {
				loadIPTablesDryRun(t, ns, text)
			}
			args := []string{"--netns=" + ns, "--live", "--manifests=" + clusterManifests, "--hostname-override=node-1", "--proxy-mode=" + mode,
				"--local-addresses=198.18.0.10", "--from=198.19.1.5", "--in-interface=cbr0", "--to=10.96.0.10:80", "-o", "json"}
			out, err := runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			want := []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080"}
			if got := outcomeList(rep.Result); !slices.Equal(got, want) {
				t.Errorf("live rules: got %q, want %q", got, want)
			}
			if rep.InSync == nil || !*rep.InSync {
				t.Errorf("freshly loaded rules reported out of sync: %v", rep.Differences)
			}

			// Behind kube-proxy's back: the Service's traffic is dropped
			// (nftables), or no longer load-balanced (iptables, where nat
			// rules cannot drop).
			edited := []string{"DROP"}
			if mode == "nftables" {
				nsRun(t, ns, "nft", "insert", "rule", "ip", "kube-proxy", "services", "ip", "daddr", "10.96.0.10", "drop")
			} else {
				nsRun(t, ns, "iptables", "-t", "nat", "-I", "KUBE-SERVICES", "-d", "10.96.0.10", "-j", "RETURN")
				edited = []string{"ACCEPT"}
			}
			out, err = runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep = decodeReport(t, out)
			if got := outcomeList(rep.Result); !slices.Equal(got, edited) {
				t.Errorf("after the edit: got %q, want %q", got, edited)
			}
			if rep.InSync == nil || *rep.InSync || len(rep.Differences) == 0 || !strings.Contains(rep.Differences[0].Live, "10.96.0.10") {
				t.Errorf("the edit is not reported as a difference: %+v", rep.Differences)
			}
			if got := outcomeList(rep.Computed); !slices.Equal(got, want) {
				t.Errorf("computed rules: got %q, want %q", got, want)
			}
			textOut, err := runTrace(t, args[:len(args)-2]...)
			if err != nil || !strings.Contains(textOut, "DIFFER") || !strings.Contains(textOut, "would instead go") {
				t.Errorf("text answer: %v\n%s", err, textOut)
			}

			// A foreign rule in front of kube-proxy's that the tracer cannot read.
			if mode == "nftables" {
				nsRunInput(t, ns, "add table inet other\nadd chain inet other pre { type filter hook prerouting priority -300 ; }\nadd rule inet other pre ct mark 0x1 accept\n", "nft", "-f", "-")
			} else {
				nsRun(t, ns, "iptables", "-t", "raw", "-A", "PREROUTING", "-m", "connmark", "--mark", "0x1", "-j", "ACCEPT")
			}
			out, err = runTrace(t, args...)
			if err != nil {
				t.Fatal(err)
			}
			rep = decodeReport(t, out)
			if len(rep.Result.Unknowns) == 0 || rep.Result.Outcomes[0].Verdict != trace.Unknown {
				t.Errorf("foreign unmodelled rule: outcomes %q, unknowns %v", outcomeList(rep.Result), rep.Result.Unknowns)
			}
		})
	}
}

func TestJoinNFTJSON(t *testing.T) {
	a := []byte(`{"nftables": [{"metainfo": {}}, {"table": {"family": "ip", "name": "kube-proxy"}}]}` + "\n")
	b := []byte(`{"nftables": [{"metainfo": {}}, {"table": {"family": "inet", "name": "filter"}}]}`)
	j, err := joinNFTJSON(a, b)
	if err != nil {
		t.Fatal(err)
	}
	nft, err := trace.ParseNFTJSON(j, "kube-proxy")
	if err != nil {
		t.Fatalf("%v: %s", err, j)
	}
	if len(nft.Tables) != 2 {
		t.Errorf("joined %d tables from %s", len(nft.Tables), j)
	}
	if _, err := joinNFTJSON([]byte("nope"), b); err == nil {
		t.Errorf("no error for a non-document")
	}
}
