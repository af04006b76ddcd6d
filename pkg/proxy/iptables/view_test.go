//go:build linux

package iptables

import (
	"bytes"
	"slices"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy"
	utiliptables "k8s.io/net-utils/iptables"
)

// takeStale hands out queued chains at once, or (large clusters) at most
// once per period, and never one its port uses again.
func TestViewTakeStale(t *testing.T) {
	owner := proxy.ServicePortName{Port: "p"}
	t0 := time.Unix(1000, 0)
	for _, tc := range []struct {
		name    string
		now     bool
		at      time.Time
		inUse   bool
		want    []utiliptables.Chain
		wantTS  time.Time
		wantQue int
	}{
		{"at once", true, t0.Add(time.Second), false, []utiliptables.Chain{"KUBE-SEP-A"}, t0.Add(time.Second), 0},
		{"within the period", false, t0.Add(time.Second), false, nil, t0, 1},
		{"after the period", false, t0.Add(time.Minute), false, []utiliptables.Chain{"KUBE-SEP-A"}, t0.Add(time.Minute), 0},
		{"in use again", true, t0.Add(time.Second), true, nil, t0.Add(time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newView()
			v.lastStaleCleanup = t0
			v.stale["KUBE-SEP-A"] = owner
			if tc.inUse {
				v.ports[owner] = &portRules{chains: []utiliptables.Chain{"KUBE-SEP-A"}}
			}
			got := v.takeStale(tc.now, tc.at, 30*time.Second)
			if !slices.Equal(got, tc.want) || !v.lastStaleCleanup.Equal(tc.wantTS) || len(v.stale) != tc.wantQue {
				t.Errorf("takeStale = %v (last cleanup %v, %d queued), want %v (%v, %d)", got, v.lastStaleCleanup, len(v.stale), tc.want, tc.wantTS, tc.wantQue)
			}
		})
	}
}

// The dry-run interface reads as an empty kernel, says "not found" the way
// iptables does, and prints each restore with what was ensured before it.
func TestDryRunIPTables(t *testing.T) {
	var out bytes.Buffer
	d := newDryRunIPTables("IPv6", &out)
	var save bytes.Buffer
	if err := d.SaveInto(utiliptables.TableNAT, &save); err != nil || save.Len() != 0 {
		t.Errorf("SaveInto = %q, %v; want nothing", save.String(), err)
	}
	if ok, err := d.ChainExists(utiliptables.TableNAT, "KUBE-SERVICES"); ok || !utiliptables.IsNotFoundError(err) {
		t.Errorf("ChainExists = %v, %v; want false and a not-found error", ok, err)
	}
	if err := d.FlushChain(utiliptables.TableNAT, "KUBE-SERVICES"); !utiliptables.IsNotFoundError(err) {
		t.Errorf("FlushChain = %v; want a not-found error", err)
	}
	if _, err := d.EnsureRule(utiliptables.Prepend, utiliptables.TableNAT, utiliptables.ChainOutput, "-m", "comment", "--comment", "a b", "-j", "X"); err != nil {
		t.Fatal(err)
	}
	if err := d.RestoreAll([]byte("*nat\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
		t.Fatal(err)
	}
	if err := d.RestoreAll([]byte("*nat\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.RestoreCounters); err != nil {
		t.Fatal(err)
	}
	want := "# kube-proxy iptables dry run: family=IPv6 fullSync=true\n" +
		"# ensure: -t nat -I OUTPUT -m comment --comment \"a b\" -j X\n" +
		"*nat\nCOMMIT\n" +
		"# kube-proxy iptables dry run: family=IPv6 fullSync=false\n" +
		"*nat\nCOMMIT\n"
	if out.String() != want || !d.IsIPv6() || d.Protocol() != utiliptables.ProtocolIPv6 {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
