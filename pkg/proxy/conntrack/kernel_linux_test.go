//go:build linux

package conntrack

import (
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
	v1 "k8s.io/api/core/v1"

	netconntrack "k8s.io/net-utils/conntrack"
)

// TestCleanStaleEntriesKernel runs CleanStaleEntries against the real
// conntrack table of a private network namespace, seeded with the conntrack
// CLI, and checks exactly the stale UDP flows are gone.
func TestCleanStaleEntriesKernel(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace")
	}
	for _, bin := range []string{"ip", "conntrack"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("needs the %s binary: %v", bin, err)
		}
	}
	name := fmt.Sprintf("kp-ct-clean-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("cannot create network namespace: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", name).Run() })

	type entry struct {
		dst      string
		dport    int
		replySrc string
		rport    int
		proto    string
		stale    bool
	}
	entries := []entry{
		{clusterIP, svcPort, servingEP, epPort, "udp", false},
		{clusterIP, svcPort, deletedEP, epPort, "udp", true},
		{clusterIP, svcPort, nonServingEP, epPort, "udp", true},
		{externalIP, svcPort, deletedEP, epPort, "udp", true},
		{lbIP, svcPort, servingEP, epPort, "udp", false},
		{"192.168.1.1", nodePort, deletedEP, epPort, "udp", true},
		{clusterIP, svcPort, deletedEP, epPort, "tcp", false},
		{"8.8.8.8", 53, "8.8.8.8", 53, "udp", false},
	}
	for i, e := range entries {
		args := []string{"netns", "exec", name, "conntrack", "-I", "-p", e.proto,
			"-s", "10.9.9.9", "-d", e.dst, "--sport", fmt.Sprint(40000 + i), "--dport", fmt.Sprint(e.dport),
			"--reply-src", e.replySrc, "--reply-dst", "10.9.9.9", "--reply-port-src", fmt.Sprint(e.rport), "--reply-port-dst", fmt.Sprint(40000 + i),
			"-t", "300"}
		if e.proto == "tcp" {
			args = append(args, "--state", "ESTABLISHED")
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			t.Skipf("cannot seed conntrack (nf_conntrack unavailable?): %v: %s", err, out)
		}
	}

	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ns.Close() })
	ct, err := netconntrack.NewInNamespace(ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ct.Close)

	sm, em := testMaps(t)
	CleanStaleEntries(ct, v1.IPv4Protocol, sm, em)

	out, err := exec.Command("ip", "netns", "exec", name, "conntrack", "-L").CombinedOutput()
	if err != nil {
		t.Fatalf("listing conntrack: %v: %s", err, out)
	}
	var remaining []string
	for _, line := range strings.Split(string(out), "\n") {
		for i := range entries {
			if strings.Contains(line, fmt.Sprintf("sport=%d ", 40000+i)) {
				remaining = append(remaining, fmt.Sprint(i))
			}
		}
	}
	var want []string
	for i, e := range entries {
		if !e.stale {
			want = append(want, fmt.Sprint(i))
		}
	}
	slices.Sort(remaining)
	if !slices.Equal(remaining, want) {
		t.Errorf("remaining entries %v, want %v; table:\n%s", remaining, want, out)
	}
}
