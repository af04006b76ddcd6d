//go:build linux

package iptables

import (
	"errors"
	"testing"

	discovery "k8s.io/api/discovery/v1"
)

// TestKernelChunkedRestore loads the same Services and changes into
// iptables-nft twice, each in a fresh private namespace: once with every
// restore in one piece, once split into blocks of a few chains. The kernel
// must accept every split restore (so no block jumps to a chain a later
// block creates) and end up with the same rules after every step.
func TestKernelChunkedRestore(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			saves := map[int][]string{}
			for _, maxChains := range []int{0, 7} {
				t.Run(map[int]string{0: "one piece", 7: "split"}[maxChains], func(t *testing.T) {
					real, _ := kernelIPTables(t, "nft", f)
					ipt := &corruptingIPTables{Interface: real}
					env := kernelProxier(t, f, ipt)
					env.p.syncer.chunks = chunking{decided: true, maxChains: maxChains}

					svcs, slcs := manyServicesShaped(f, 25, 4)
					for _, s := range svcs {
						env.p.OnServiceAdd(s)
					}
					for _, s := range slcs {
						env.p.OnEndpointSliceAdd(s)
					}
					env.p.OnServiceSynced()
					env.p.OnEndpointSlicesSynced()
					if env.p.NeedsFullSync() {
						t.Fatalf("first sync failed; last restore:\n%s", ipt.last)
					}
					if maxChains > 0 {
						checkChunked(t, string(ipt.last), maxChains)
					}
					record := func() {
						saves[maxChains] = append(saves[maxChains], canonicalSave(normalizeSave(save(t, real))))
					}
					record()
					syncOK := func(what string) {
						t.Helper()
						if err := env.p.SyncNow(); err != nil {
							t.Fatalf("%s: %v; last restore:\n%s", what, err, ipt.last)
						}
						record()
					}
					updateSlice(env.p, slcs, 2, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:2] })
					syncOK("one endpoint fewer")
					env.p.OnServiceDelete(svcs[5])
					syncOK("service deleted")
					syncOK("stale chains deleted")
					env.p.RequestFullSync()
					syncOK("full resync over existing rules")
					if maxChains > 0 {
						checkChunked(t, string(ipt.last), maxChains)
					}

					// A last block the kernel rejects (after the port blocks
					// were applied) fails the sync; the next one repairs.
					ipt.bad = true
					updateSlice(env.p, slcs, 7, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })
					env.p.RequestFullSync()
					if err := env.p.SyncNow(); !errors.Is(err, errSyncFailed) {
						t.Fatalf("sync with a bad rule: got %v, want failure", err)
					}
					ipt.bad = false
					syncOK("repair after a failed restore")
				})
			}
			one, split := saves[0], saves[7]
			if len(one) == 0 || len(split) == 0 {
				return // skipped or failed above
			}
			if len(one) != len(split) {
				t.Fatalf("steps: one piece %d, split %d", len(one), len(split))
			}
			for i := range one {
				if one[i] != split[i] {
					t.Errorf("step %d: the kernel's rules differ:\n%s", i, lineDiff(one[i], split[i]))
				}
			}
		})
	}
}
