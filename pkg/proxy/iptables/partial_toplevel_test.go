//go:build linux

package iptables

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

var topLevelNAT = []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ"}

// writesTopLevel reports which top-level nat chains restore declares or
// appends to, and whether it touches the filter table at all.
func writesTopLevel(restore string) (nat []string, filter bool) {
	for _, c := range topLevelNAT {
		if regexp.MustCompile(`(?m)^(:|-A )` + c + ` `).MatchString(restore) {
			nat = append(nat, c)
		}
	}
	return nat, strings.Contains(restore, "*filter\n")
}

// natSection returns the nat table's part of a restore input.
func natSection(restore string) string {
	_, nat, _ := strings.Cut(restore, "*nat\n")
	nat, _, _ = strings.Cut(nat, "COMMIT\n")
	return nat
}

// A partial sync whose changes do not alter the top-level chains leaves
// them out of the restore; the kernel keeps them and stays correct. Any
// change to them, and every full sync, writes them again.
func TestPartialSyncSkipsUnchangedTopLevelChains(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			svcs, slcs := manyServices(f, 5, 3)
			env := newTestEnv(t, f, envConfig{})
			for _, s := range svcs {
				env.p.OnServiceAdd(s)
			}
			for _, s := range slcs {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			if nat, filter := writesTopLevel(env.restore[len(env.restore)-1]); len(nat) != len(topLevelNAT) || !filter {
				t.Fatalf("full sync wrote top-level nat chains %v, filter %v; want all", nat, filter)
			}
			traceAll := func(stage string, want map[int]int) {
				t.Helper()
				tr := env.tracer(t)
				for i := range svcs {
					outs, err := tr.trace(f.fromPod(f.pod(9), f.svcIndex(i), 80))
					if err != nil {
						t.Fatal(err)
					}
					n, ok := want[i] // 0: rejected
					if !ok {
						n = 3
					}
					if n == 0 {
						if got := summary(outs); len(got) != 1 || got[0] != "REJECT (100%)" {
							t.Errorf("%s: svc%d: %q, want REJECT", stage, i, got)
						}
					} else if len(outs) != n || outs[0].dnat == "" {
						t.Errorf("%s: svc%d: %v, want %d DNAT outcomes", stage, i, summary(outs), n)
					}
				}
				// The host's traffic is masqueraded: KUBE-POSTROUTING and
				// KUBE-MARK-MASQ are intact.
				outs, err := tr.trace(f.fromHost(f.svcIndex(0), 80))
				if err != nil {
					t.Fatal(err)
				}
				for _, o := range outs {
					if !o.masq || o.dnat == "" {
						t.Errorf("%s: host to svc0: %v, want DNAT and masquerade", stage, summary(outs))
						break
					}
				}
			}

			// An endpoint replaced: only svc2's own chains are written.
			updateSlice(env.p, slcs, 2, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(999)} })
			env.sync(t)
			partial := env.restore[len(env.restore)-1]
			if nat, filter := writesTopLevel(partial); len(nat) != 0 || filter {
				t.Errorf("endpoint-only partial sync wrote top-level nat chains %v, filter table %v:\n%s", nat, filter, partial)
			}
			if got, want := len(serviceChainsIn(partial)), 1+3+1; got != want {
				t.Errorf("endpoint-only partial sync declared %d service chains, want %d:\n%s", got, want, partial)
			}
			if last, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("nat", string(f.family))); int(last) != strings.Count(partial, "\n-A ") {
				t.Errorf("nat rules written metric = %v, want %d (the -A lines written)", last, strings.Count(partial, "\n-A "))
			}
			if last, _ := testutil.GetGaugeMetricValue(metrics.IPTablesRulesLastSync.WithLabelValues("filter", string(f.family))); last != 0 {
				t.Errorf("filter rules written metric = %v, want 0", last)
			}
			traceAll("after an endpoint change", nil)

			// Nothing changed at all: no iptables-restore.
			env.sync(t)
			if got := env.restore[len(env.restore)-1]; got != "" {
				t.Errorf("idle partial sync wrote:\n%s", got)
			}

			// Once per syncPeriod they are written anyway, so a chain
			// flushed behind our back (canary left alone) is repaired by
			// the next sync after that.
			env.p.view.lastTopLevelWrite = time.Now().Add(-env.p.syncPeriod)
			updateSlice(env.p, slcs, 2, func(s *discovery.EndpointSlice) { s.Endpoints[1].Addresses = []string{f.podIndex(997)} })
			env.sync(t)
			if nat, filter := writesTopLevel(env.restore[len(env.restore)-1]); len(nat) != len(topLevelNAT) || !filter {
				t.Errorf("partial sync a syncPeriod after the last top-level write wrote top-level nat chains %v, filter %v; want all", nat, filter)
			}
			updateSlice(env.p, slcs, 2, func(s *discovery.EndpointSlice) { s.Endpoints[1].Addresses = []string{f.podIndex(996)} })
			env.sync(t)
			if nat, filter := writesTopLevel(env.restore[len(env.restore)-1]); len(nat) != 0 || filter {
				t.Errorf("the next endpoint-only sync wrote top-level nat chains %v, filter %v; want none", nat, filter)
			}
			traceAll("after the periodic top-level rewrite", nil)

			// svc1 loses its endpoints: its cluster IP jump leaves
			// KUBE-SERVICES, deleted in place (edits.go) rather than by
			// rewriting the nat top-level chains, and a REJECT appears in
			// filter, which is rewritten.
			updateSlice(env.p, slcs, 1, func(s *discovery.EndpointSlice) { s.Endpoints = nil })
			env.sync(t)
			restore := env.restore[len(env.restore)-1]
			if nat, _ := writesTopLevel(natSection(restore)); len(nat) != 0 || !strings.Contains(restore, "*filter\n") {
				t.Errorf("sync changing svc1's dispatch wrote top-level nat chains %v; want none written whole, and the filter table:\n%s", nat, restore)
			}
			if !regexp.MustCompile(`(?m)^-D KUBE-SERVICES .*ns/svc1:p80 cluster IP.* -j KUBE-SVC-`).MatchString(restore) {
				t.Errorf("sync changing svc1's dispatch did not delete its cluster IP rule in place:\n%s", restore)
			}
			outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svcIndex(1), 80))
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(outs); len(got) != 1 || got[0] != "REJECT (100%)" {
				t.Errorf("svc1 without endpoints: %q, want REJECT", got)
			}
			traceAll("after svc1 lost its endpoints", map[int]int{1: 0})

			// A failed restore: whatever the kernel has now, the next sync
			// writes everything.
			env.ipt.SetRestoreError(errors.New("injected failure"))
			updateSlice(env.p, slcs, 3, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(998)} })
			if err := env.p.SyncNow(); err == nil {
				t.Fatal("sync succeeded although restore failed")
			}
			env.ipt.SetRestoreError(nil)
			env.sync(t)
			if nat, filter := writesTopLevel(env.restore[len(env.restore)-1]); len(nat) != len(topLevelNAT) || !filter {
				t.Errorf("sync after a failure wrote top-level nat chains %v, filter %v; want all", nat, filter)
			}
			traceAll("after the repair", map[int]int{1: 0})
		})
	}
}
