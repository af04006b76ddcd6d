//go:build linux

package nftables

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"
)

// conflictServices all claim cluster IP 172.30.0.61:80, external IP
// 192.168.99.61:80 and NodePort 3061. The iptables mode serves such a
// destination with the first service port in namespace, name, port order:
// "ns" sorts before "ns-a" there, although "ns-a/" sorts before "ns/" as a
// string.
var conflictServices = []tsvc{
	{ns: "ns-a", name: "alpha", portName: "http", clusterIP: "172.30.0.61", port: 80, nodePort: 3061, externalIPs: []string{"192.168.99.61"},
		eps: []tep{{ip: "10.180.0.2", port: 8080}}},
	{ns: "ns", name: "zeta", portName: "http", clusterIP: "172.30.0.61", port: 80, nodePort: 3061, externalIPs: []string{"192.168.99.61"},
		eps: []tep{{ip: "10.180.0.1", port: 8080}}},
	{ns: "ns0", name: "a", clusterIP: "172.30.0.61", port: 80, nodePort: 3061, externalIPs: []string{"192.168.99.61"},
		eps: []tep{{ip: "10.180.0.3", port: 8080}}},
	{ns: "ns", name: "zeta", portName: "https", clusterIP: "172.30.0.61", port: 80, nodePort: 3061, externalIPs: []string{"192.168.99.61"},
		eps: []tep{{ip: "10.180.0.4", port: 8080}}},
}

var conflictFlows = []flowCase{
	{name: "pod to the shared clusterIP", src: "10.1.2.3", dst: "172.30.0.61", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080"}},
	{name: "external to the shared externalIP", src: "external", dst: "192.168.99.61", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080"}, masq: true},
	{name: "external to the shared NodePort", src: "external", dst: "node", port: 3061, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080"}, masq: true},
}

// Conflicting service ports get the same winner whatever order they arrive
// in, in full syncs and in partial ones, and after the winner leaves and
// comes back.
func TestConflictWinnerIsDeterministic(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ctx := context.Background()
			rnd := rand.New(rand.NewPCG(1, 2))
			for trial := range 40 {
				s, fake := newTestSyncer(t, tf, nil)
				order := rnd.Perm(len(conflictServices))
				svcs := make([]tsvc, len(order))
				for i, j := range order {
					svcs[i] = conflictServices[j]
				}
				full := rnd.IntN(len(svcs) + 1) // how many arrive in the first, full sync
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs[:full]...)}); err != nil {
					t.Fatal(err)
				}
				for _, svc := range svcs[full:] {
					if _, err := s.sync(ctx, syncInput{services: models(tf.ip, svc)}); err != nil {
						t.Fatal(err)
					}
				}
				t.Logf("trial %d: order %v, %d in the full sync", trial, order, full)
				runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, conflictFlows)

				// The winner leaves and comes back; a partial sync of
				// another claimant in between must not steal it for good.
				winner := ownerOf(conflictServices[1])
				if _, err := s.sync(ctx, syncInput{removed: []string{winner}}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.sync(ctx, syncInput{services: models(tf.ip, conflictServices[1])}); err != nil {
					t.Fatal(err)
				}
				if _, err := s.sync(ctx, syncInput{services: models(tf.ip, svcs[rnd.IntN(len(svcs))])}); err != nil {
					t.Fatal(err)
				}
				runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, conflictFlows)
				if t.Failed() {
					return
				}
			}
		})
	}
}

// A conflict is logged once, naming both service ports, however many syncs
// rebuild it; it is logged again if it goes away and comes back.
func TestConflictLoggedOnce(t *testing.T) {
	tf := families[0]
	ctx := context.Background()
	s, _ := newTestSyncer(t, tf, nil)
	logger := ktesting.NewLogger(t, ktesting.NewConfig(ktesting.BufferLogs(true)))
	s.logger = logger
	logged := func() []string {
		var out []string
		for _, line := range strings.Split(logger.GetSink().(ktesting.Underlier).GetBuffer().String(), "\n") {
			if strings.Contains(line, "claim the same destination") {
				out = append(out, line)
			}
		}
		return out
	}
	a, b := conflictServices[0], conflictServices[1]
	for range 3 {
		if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, a, b)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.sync(ctx, syncInput{services: models(tf.ip, a)}); err != nil {
			t.Fatal(err)
		}
	}
	// One line per destination: cluster IP, external IP and NodePort.
	lines := logged()
	if len(lines) != 3 {
		t.Fatalf("want 3 conflict lines (one per shared destination), got %d:\n%s", len(lines), strings.Join(lines, "\n"))
	}
	for _, l := range lines {
		if !strings.Contains(l, ownerOf(a)) || !strings.Contains(l, ownerOf(b)) {
			t.Errorf("conflict line does not name both service ports: %s", l)
		}
	}

	if _, err := s.sync(ctx, syncInput{removed: []string{ownerOf(b)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.sync(ctx, syncInput{services: models(tf.ip, b)}); err != nil {
		t.Fatal(err)
	}
	if got := len(logged()); got != 6 {
		t.Fatalf("a conflict that went away and came back: want 6 conflict lines in all, got %d", got)
	}
}

// A partial sync of the service port that holds a shared destination gives
// it back to that service port, with its verdict, and the other claimants
// keep their places in line. For a moment the holder has let go of the
// element and the next claimant holds it; that step once lost the next
// claimant (with three others) or left an empty claim holding the element
// (with one other), which wrote "key : " with no verdict, and nft refused it.
func TestConflictHolderResynced(t *testing.T) {
	for _, n := range []int{2, len(conflictServices)} {
		for _, tf := range families {
			t.Run(string(tf.family)+"/"+itoa(n)+" claimants", func(t *testing.T) {
				ctx := context.Background()
				s, fake := newTestSyncer(t, tf, nil)
				claimants := conflictServices[:n]
				if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, claimants...)}); err != nil {
					t.Fatal(err)
				}
				holder := conflictServices[1]
				var others []string
				for _, c := range claimants {
					if o := ownerOf(c); o != ownerOf(holder) {
						others = append(others, o)
					}
				}
				slices.SortFunc(others, compareOwners)
				holder.eps = []tep{{ip: "10.180.0.1", port: 8080}, {ip: "10.180.0.9", port: 8080}}
				if _, err := s.sync(ctx, syncInput{services: models(tf.ip, holder)}); err != nil {
					t.Fatal(err)
				}
				for _, c := range []container{cServiceIPs, cServiceNodePorts} {
					for key, w := range s.view.elems[c].want {
						if w.owner != ownerOf(holder) || !strings.HasPrefix(w.value, "goto ") {
							t.Errorf("%s %q is held by %q with value %q, want %q with a goto", containerNames[c], key, w.owner, w.value, ownerOf(holder))
						}
						var got []string
						for _, o := range w.others {
							got = append(got, o.owner)
						}
						if !slices.Equal(got, others) {
							t.Errorf("%s %q: the other claimants are %q, want %q", containerNames[c], key, got, others)
						}
					}
				}
				flows := []flowCase{{name: "pod to the shared clusterIP", src: "10.1.2.3", dst: "172.30.0.61", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:8080", "10.180.0.9:8080"}}}
				runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, flows)
			})
		}
	}
}
