//go:build linux

package iptables

import (
	"strings"
	"testing"

	discovery "k8s.io/api/discovery/v1"
)

// TestKernelDispatchEdits: partial syncs that add and remove Services, and
// take a Service's endpoints away and back, edit KUBE-SERVICES and
// KUBE-NODEPORTS in place on both backends, and after each the kernel
// holds exactly what a full resync of the same state writes.
func TestKernelDispatchEdits(t *testing.T) {
	eachBackend(t, func(t *testing.T, variant string, f fam) {
		real, _ := kernelIPTables(t, variant, f)
		ipt := &corruptingIPTables{Interface: real}
		env := kernelProxier(t, f, ipt)
		svcs, slcs := manyServicesShaped(f, 16, 3)
		for _, s := range svcs[:15] {
			env.p.OnServiceAdd(s)
		}
		for _, s := range slcs[:15] {
			env.p.OnEndpointSliceAdd(s)
		}
		env.p.OnServiceSynced()
		env.p.OnEndpointSlicesSynced()
		if env.p.NeedsFullSync() {
			t.Fatalf("first sync failed; last restore:\n%s", ipt.last)
		}
		step := func(what string, change func()) {
			t.Helper()
			change()
			if err := env.p.SyncNow(); err != nil {
				t.Fatalf("%s: %v; restore:\n%s", what, err, ipt.last)
			}
			nat := natSection(string(ipt.last))
			if strings.Contains(nat, ":KUBE-SERVICES ") || !strings.Contains(nat, "\n-D ") && !strings.Contains(nat, "\n-I ") {
				t.Fatalf("%s: want the dispatch edited in place, restore:\n%s", what, ipt.last)
			}
			edited := canonicalSave(normalizeSave(save(t, real)))
			env.p.RequestFullSync()
			if err := env.p.SyncNow(); err != nil {
				t.Fatalf("%s: full resync: %v", what, err)
			}
			if rewritten := canonicalSave(normalizeSave(save(t, real))); rewritten != edited {
				t.Errorf("%s: the edited kernel differs from a full resync:\n%s", what, lineDiff(rewritten, edited))
			}
		}
		step("service added", func() {
			env.p.OnServiceAdd(svcs[15])
			env.p.OnEndpointSliceAdd(slcs[15])
		})
		step("service deleted", func() { env.p.OnServiceDelete(svcs[3]) })
		step("endpoints gone", func() {
			updateSlice(env.p, slcs, 6, func(s *discovery.EndpointSlice) { s.Endpoints = nil })
		})
		step("endpoints back", func() {
			updateSlice(env.p, slcs, 6, func(s *discovery.EndpointSlice) { s.Endpoints = slcs[7].Endpoints })
		})
	})
}
