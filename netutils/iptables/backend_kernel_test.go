//go:build linux

package iptables_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
	"k8s.io/net-utils/iptables"
	utilexec "k8s.io/utils/exec"
)

// wrapperOracle is iptables-wrappers' (v2) decision as a shell pipeline, run in the
// namespace next to the Go detection, so that the kernel tests compare against the
// rule the images follow rather than against this package's reading of it. It
// prints "legacy" or "nft".
const wrapperOracle = `
kubelet_chains='^:(KUBE-IPTABLES-HINT|KUBE-KUBELET-CANARY)'
if { iptables-nft-save -t mangle; ip6tables-nft-save -t mangle; } 2>/dev/null | grep -qE "$kubelet_chains"; then
	echo nft; exit 0
fi
if { iptables-legacy-save; ip6tables-legacy-save; } 2>/dev/null | grep -qE "$kubelet_chains"; then
	echo legacy; exit 0
fi
legacy=$({ iptables-legacy-save; ip6tables-legacy-save; } 2>/dev/null | grep -c '^-')
nft=$({ iptables-nft-save; ip6tables-nft-save; } 2>/dev/null | grep -c '^-')
if [ "$legacy" -gt "$nft" ]; then echo legacy; else echo nft; fi
`

// TestKernelDetectBackend places rules with the real binaries in a namespace of its
// own and checks that detection picks what iptables-wrappers would.
func TestKernelDetectBackend(t *testing.T) {
	for _, bin := range []string{
		"iptables-legacy", "iptables-legacy-save", "ip6tables-legacy", "ip6tables-legacy-save",
		"iptables-nft", "iptables-nft-save", "ip6tables-nft", "ip6tables-nft-save", "sh", "grep",
	} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed: detection needs both backends' binaries", bin)
		}
	}
	// Each step is "binary args..." run in the namespace.
	rulesIn := func(bin string, n int) []string {
		var out []string
		for i := range n {
			src := fmt.Sprintf("198.18.0.%d/32", i+1)
			if strings.HasPrefix(bin, "ip6") {
				src = fmt.Sprintf("fd00::%d/128", i+1)
			}
			out = append(out, fmt.Sprintf("%s -A INPUT -s %s -j ACCEPT", bin, src))
		}
		return out
	}
	hint := func(bin string) string { return bin + " -t mangle -N KUBE-IPTABLES-HINT" }
	canary := func(bin string) string { return bin + " -t mangle -N KUBE-KUBELET-CANARY" }
	for _, tc := range []struct {
		name  string
		steps []string
		want  iptables.Backend
	}{
		{name: "neither", want: iptables.BackendNFT},
		{name: "legacy only", steps: rulesIn("iptables-legacy", 2), want: iptables.BackendLegacy},
		{name: "nft only", steps: rulesIn("iptables-nft", 2), want: iptables.BackendNFT},
		{name: "both, more in legacy", steps: append(rulesIn("iptables-legacy", 3), rulesIn("ip6tables-nft", 2)...), want: iptables.BackendLegacy},
		{name: "both, more in nft", steps: append(rulesIn("ip6tables-legacy", 2), rulesIn("iptables-nft", 3)...), want: iptables.BackendNFT},
		{name: "both, as many in each", steps: append(rulesIn("iptables-legacy", 2), rulesIn("iptables-nft", 2)...), want: iptables.BackendNFT},
		{name: "kubelet hint in legacy, more rules in nft", steps: append([]string{hint("iptables-legacy")}, rulesIn("iptables-nft", 5)...), want: iptables.BackendLegacy},
		{name: "kubelet canary in ip6tables-legacy only", steps: append([]string{canary("ip6tables-legacy")}, rulesIn("iptables-nft", 5)...), want: iptables.BackendLegacy},
		{name: "kubelet hint in nft, more rules in legacy", steps: append([]string{hint("iptables-nft")}, rulesIn("iptables-legacy", 5)...), want: iptables.BackendNFT},
		{name: "kubelet chains in both", steps: []string{hint("iptables-legacy"), canary("ip6tables-nft")}, want: iptables.BackendNFT},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := newNetns(t)
			for _, bin := range []string{"iptables-legacy", "ip6tables-legacy", "iptables-nft", "ip6tables-nft"} {
				if out, err := exec.Command("ip", "netns", "exec", ns, bin, "-w", "5", "-S", "INPUT").CombinedOutput(); err != nil {
					t.Skipf("%s does not work here (no kernel support?): %v: %s", bin, err, out)
				}
			}
			for _, step := range tc.steps {
				args := append([]string{"netns", "exec", ns}, strings.Fields(step)...)
				if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
					t.Fatalf("%s: %v: %s", step, err, out)
				}
			}
			before := legacyTables(t, ns)
			e := nsExec{Interface: utilexec.New(), ns: ns}
			d, err := iptables.DetectBackendWith(context.Background(), e)
			if err != nil {
				t.Fatal(err)
			}

			out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", wrapperOracle).CombinedOutput()
			if err != nil {
				t.Fatalf("iptables-wrappers' rule: %v: %s", err, out)
			}
			oracle := iptables.Backend(strings.TrimSpace(string(out)))
			if oracle != tc.want {
				t.Fatalf("iptables-wrappers' rule picks %q here, the test expects %q: the test is wrong", oracle, tc.want)
			}
			if d.Backend != tc.want {
				t.Errorf("detected %q (%s), iptables-wrappers picks %q", d.Backend, d.Reason, tc.want)
			}
			if len(d.Failed) != 0 {
				t.Errorf("save commands failed: %q", d.Failed)
			}
			t.Logf("%s: %s", d.Backend, d.Reason)

			if after := legacyTables(t, ns); after != before {
				t.Errorf("detection changed the legacy tables from %q to %q: it must only read", before, after)
			}
		})
	}
}

// TestKernelChooseBackend: the chosen backend's Interface programs the backend
// detection named, so its rules sit next to the host's.
func TestKernelChooseBackend(t *testing.T) {
	for _, bin := range []string{"iptables-legacy", "iptables-legacy-save", "iptables-legacy-restore", "iptables-nft", "iptables-nft-save", "iptables-nft-restore"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s is not installed: detection needs both backends' binaries", bin)
		}
	}
	ns := newNetns(t)
	if out, err := exec.Command("ip", "netns", "exec", ns, "iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT").CombinedOutput(); err != nil {
		t.Skipf("iptables-legacy does not work here: %v: %s", err, out)
	}
	_, ctx := ktesting.NewTestContext(t)
	e := nsExec{Interface: utilexec.New(), ns: ns}
	c, err := iptables.ChooseBackendWith(ctx, e, iptables.BackendModeAuto)
	if err != nil {
		t.Fatal(err)
	}
	if c.Backend != iptables.BackendLegacy {
		t.Fatalf("chose %q (%s), want legacy", c.Backend, c.Reason)
	}
	// The kernel tests' runner with the chosen backend's binary names.
	ipt := iptables.NewForTest(e, iptables.ProtocolIPv4, "iptables-"+string(c.Backend), "iptables-"+string(c.Backend)+"-save", "iptables-"+string(c.Backend)+"-restore", true, t.TempDir()+"/xtables.lock")
	if _, err := ipt.EnsureChain(iptables.TableNAT, "KUBE-SERVICES"); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ip", "netns", "exec", ns, "iptables-legacy-save", "-t", "nat").CombinedOutput()
	if err != nil || !strings.Contains(string(out), ":KUBE-SERVICES") {
		t.Errorf("KUBE-SERVICES is not in the legacy nat table: %v\n%s", err, out)
	}
}

// legacyTables lists the x_tables tables that exist in ns, for both families; asking
// iptables-legacy for a table creates it, which detection must not do.
func legacyTables(t *testing.T, ns string) string {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", ns, "sh", "-c", "cat /proc/net/ip_tables_names /proc/net/ip6_tables_names 2>/dev/null | sort").CombinedOutput()
	if err != nil {
		t.Fatalf("listing legacy tables: %v: %s", err, out)
	}
	return strings.Join(strings.Fields(string(out)), ",")
}
