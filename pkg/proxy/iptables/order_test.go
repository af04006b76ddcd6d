//go:build linux

package iptables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestRestoreRulesChainByChain checks the order sortedRules gives the
// service ports' rules in a restore's nat table: chain by chain, the chains
// in the byte order of their declarations, on a full sync and on a partial
// one. What each chain holds, in which order, is the golden files' and the
// behaviour tests' business.
func TestRestoreRulesChainByChain(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			env := setupScenario(t, f, representativeCluster(f))
			checkChainByChain(t, "full sync", env.restore[len(env.restore)-1])

			// A second endpoint for ns1/svc1 re-renders that port only.
			env.p.OnEndpointSliceAdd(st.Slice("ns1", "svc1", "svc1-2", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)},
				st.EP{IP: f.pod(9), Node: testNodeName}))
			env.sync(t)
			checkChainByChain(t, "partial sync", env.restore[len(env.restore)-1])
		})
	}
}

func checkChainByChain(t *testing.T, what, restore string) {
	t.Helper()
	_, nat, ok := strings.Cut(restore, "*nat\n")
	if !ok {
		t.Fatalf("%s: no nat table in the restore:\n%s", what, restore)
	}
	var declared []string
	var order []string // port chains in the order their rules come
	seen := map[string]bool{}
	for line := range strings.Lines(nat) {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			declared = append(declared, strings.Fields(name)[0])
			continue
		}
		words := strings.Fields(line)
		if len(words) < 2 || words[0] != "-A" || !isServiceChainName(words[1]) {
			continue
		}
		chain := words[1]
		if len(order) > 0 && order[len(order)-1] == chain {
			continue
		}
		if seen[chain] {
			t.Errorf("%s: the rules of %s are not together:\n%s", what, chain, nat)
		}
		seen[chain] = true
		order = append(order, chain)
	}
	if len(order) < 2 {
		t.Fatalf("%s: %d port chains with rules, want several:\n%s", what, len(order), nat)
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] > order[i] {
			t.Errorf("%s: rules of %s come before those of %s", what, order[i-1], order[i])
		}
	}
	// The same order as the declarations, which sortedDecls sorts.
	pos := map[string]int{}
	for i, c := range declared {
		pos[c] = i
	}
	for i := 1; i < len(order); i++ {
		if pos[order[i-1]] > pos[order[i]] {
			t.Errorf("%s: %s is declared after %s but its rules come first", what, order[i-1], order[i])
		}
	}
}
