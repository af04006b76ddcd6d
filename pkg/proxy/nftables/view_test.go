//go:build linux

package nftables

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// The view's claim bookkeeping against a model: after any sequence of
// service ports setting, changing and dropping their claims on shared keys,
// each key is held by the first claimant in owner order, with its value, and
// the others wait in owner order, each once.
func TestClaimsMatchModel(t *testing.T) {
	owners := []string{"ns/zeta:http", "ns-a/alpha:http", "ns0/a", "ns/zeta:https", "ns/b"}
	keys := []string{"172.30.0.1 . tcp . 80", "192.168.99.1 . tcp . 80", "tcp . 3001"}
	for seed := range uint64(200) {
		rnd := rand.New(rand.NewPCG(seed, 7))
		v := newView("ip", "ipv4_addr")
		model := map[string]map[string]string{} // owner -> key -> value
		for step := range 30 {
			owner := owners[rnd.IntN(len(owners))]
			if rnd.IntN(4) == 0 {
				v.setOwner(owner, nil)
				delete(model, owner)
			} else {
				r := &serviceRules{}
				claims := map[string]string{}
				for _, k := range keys {
					if rnd.IntN(2) == 0 {
						val := "goto service-" + owner + "-" + itoa(rnd.IntN(3))
						r.elems = append(r.elems, elemSpec{c: cServiceIPs, key: k, value: val})
						claims[k] = val
					}
				}
				v.setOwner(owner, r)
				model[owner] = claims
			}
			for _, k := range keys {
				var claimants []string
				for o, claims := range model {
					if _, ok := claims[k]; ok {
						claimants = append(claimants, o)
					}
				}
				slices.SortFunc(claimants, compareOwners)
				w := v.elems[cServiceIPs].want[k]
				if len(claimants) == 0 {
					if w != nil {
						t.Fatalf("seed %d step %d: %q is held by %q, but nobody claims it", seed, step, k, w.owner)
					}
					continue
				}
				if w == nil {
					t.Fatalf("seed %d step %d: %q is not wanted, but %v claim it", seed, step, k, claimants)
				}
				got := []string{w.owner}
				for _, o := range w.others {
					got = append(got, o.owner)
				}
				if !slices.Equal(got, claimants) {
					t.Fatalf("seed %d step %d: %q claimants %v, want %v", seed, step, k, got, claimants)
				}
				if want := model[claimants[0]][k]; w.value != want {
					t.Fatalf("seed %d step %d: %q has value %q, want %q", seed, step, k, w.value, want)
				}
				for _, o := range w.others {
					if o.value != model[o.owner][k] || !strings.HasPrefix(o.value, "goto ") {
						t.Fatalf("seed %d step %d: %q waiting claimant %s has value %q, want %q", seed, step, k, o.owner, o.value, model[o.owner][k])
					}
				}
			}
		}
	}
}
