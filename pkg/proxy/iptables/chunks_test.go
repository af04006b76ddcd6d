//go:build linux

package iptables

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	utiliptables "k8s.io/net-utils/iptables"
)

// block is one table's lines of a restore input, between "*table" and COMMIT.
type block struct {
	table string
	lines []string
}

func splitBlocks(t testing.TB, input string) []block {
	t.Helper()
	var out []block
	var cur *block
	for _, l := range strings.Split(strings.TrimSuffix(input, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			if cur != nil {
				t.Fatalf("%s begins inside the %s block", l, cur.table)
			}
			cur = &block{table: l[1:]}
		case l == "COMMIT":
			if cur == nil {
				t.Fatalf("COMMIT outside a block")
			}
			out = append(out, *cur)
			cur = nil
		default:
			if cur == nil {
				t.Fatalf("line outside a block: %s", l)
			}
			cur.lines = append(cur.lines, l)
		}
	}
	if cur != nil {
		t.Fatalf("block %s not committed", cur.table)
	}
	return out
}

func natBlocks(t testing.TB, input string) []block {
	var nat []block
	for _, b := range splitBlocks(t, input) {
		if b.table == "nat" {
			nat = append(nat, b)
		}
	}
	return nat
}

// checkChunked checks what makes a split restore safe: the first nat block
// only ensures KUBE-MARK-MASQ, each middle block holds whole service ports
// (every service chain its rules name is declared in it) and at most about
// maxChains declarations, no service chain is declared twice, and the
// top-level nat chains are written only in the last block.
func checkChunked(t testing.TB, input string, maxChains int) {
	t.Helper()
	nat := natBlocks(t, input)
	if len(nat) < 3 {
		t.Fatalf("want at least 3 nat blocks (KUBE-MARK-MASQ, ports, top level), got %d:\n%s", len(nat), input)
	}
	if first := nat[0].lines; len(first) < 2 || first[0] != ":KUBE-MARK-MASQ - [0:0]" || !strings.HasPrefix(first[1], "-A KUBE-MARK-MASQ ") {
		t.Errorf("first nat block is not KUBE-MARK-MASQ alone: %q", first)
	}
	seen := map[string]int{}
	for i, b := range nat[1 : len(nat)-1] {
		declared := map[string]bool{}
		for _, l := range b.lines {
			if name, ok := strings.CutPrefix(l, ":"); ok {
				name = strings.Fields(name)[0]
				if !isServiceChainName(name) {
					t.Errorf("block %d declares non-service chain %s", i+1, name)
				}
				if prev, dup := seen[name]; dup {
					t.Errorf("chain %s declared in blocks %d and %d", name, prev, i+1)
				}
				seen[name], declared[name] = i+1, true
			}
		}
		if len(declared) > maxChains+20 {
			t.Errorf("block %d declares %d chains, limit %d", i+1, len(declared), maxChains)
		}
		for _, l := range b.lines {
			if !strings.HasPrefix(l, "-A ") {
				continue
			}
			words := strings.Fields(l)
			if !declared[words[1]] {
				t.Errorf("block %d: rule in a chain it does not declare: %s", i+1, l)
			}
			if j := slices.Index(words, "-j"); j > 0 && j+1 < len(words) && isServiceChainName(words[j+1]) && !declared[words[j+1]] {
				t.Errorf("block %d: rule jumps to a service chain of another block: %s", i+1, l)
			}
		}
	}
	last := nat[len(nat)-1].lines
	if !slices.Contains(last, ":KUBE-SERVICES - [0:0]") {
		t.Errorf("last nat block does not write KUBE-SERVICES")
	}
	for _, l := range last {
		if name, ok := strings.CutPrefix(l, ":"); ok && isServiceChainName(strings.Fields(name)[0]) {
			if _, ported := seen[strings.Fields(name)[0]]; ported {
				t.Errorf("last block re-declares %s", name)
			}
		}
	}
}

// canonicalSave orders an iptables-save text's chains by name, keeping each
// chain's rules in order: chains created by different blocks are listed in
// a different order by the fake, which means nothing to packets.
func canonicalSave(save string) string {
	var out []string
	var table string
	chains := map[string][]string{}
	flush := func() {
		names := slices.Sorted(maps.Keys(chains))
		for _, n := range names {
			out = append(out, table+" "+n)
			for _, r := range chains[n] {
				out = append(out, "  "+r)
			}
		}
		clear(chains)
	}
	for _, l := range strings.Split(save, "\n") {
		switch {
		case strings.HasPrefix(l, "*"):
			flush()
			table = l
		case strings.HasPrefix(l, ":"):
			name := strings.Fields(l[1:])[0]
			chains[name] = append(chains[name], l)
		case strings.HasPrefix(l, "-A "):
			name := strings.Fields(l)[1]
			chains[name] = append(chains[name], l)
		}
	}
	flush()
	return strings.Join(out, "\n")
}

// TestRestoreChunksOnNFT: on iptables-nft a full sync of many Services is
// written as bounded nat blocks; on legacy, and for small syncs, as one.
func TestRestoreChunksOnNFT(t *testing.T) {
	for _, tc := range []struct {
		name       string
		variant    utiliptables.Variant
		services   int
		wantBlocks bool
	}{
		{"nft, 150 Services", utiliptables.VariantNFT, 150, true},
		{"nft, 20 Services", utiliptables.VariantNFT, 20, false},
		{"legacy, 150 Services", utiliptables.VariantLegacy, 150, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := families[0]
			env := newTestEnv(t, f, envConfig{})
			features := env.ipt.Features()
			features.Variant = tc.variant
			env.ipt.SetFeatures(features)
			svcs, slcs := manyServicesShaped(f, tc.services, 10)
			for _, s := range svcs {
				env.p.OnServiceAdd(s)
			}
			for _, s := range slcs {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			input := env.restore[0]
			if tc.wantBlocks {
				checkChunked(t, input, nftBlockChains(env.p.view.chains))
			} else if n := len(natBlocks(t, input)); n != 1 {
				t.Errorf("want one nat block, got %d", n)
			}
		})
	}
}

// TestChunkedSyncsSameRules runs the same changes through a proxier that
// splits every restore into blocks of a few chains and one that never
// splits: the tables must be identical after every step.
func TestChunkedSyncsSameRules(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			const maxChains = 7
			plain, split := newTestEnv(t, f, envConfig{}), newTestEnv(t, f, envConfig{})
			plain.p.syncer.chunks = chunking{decided: true}
			split.p.syncer.chunks = chunking{decided: true, maxChains: maxChains}
			svcs, slcs := manyServicesShaped(f, 30, 4)
			slcs2 := slices.Clone(slcs)
			envs := []*testEnv{plain, split}
			slicesOf := [][]*discovery.EndpointSlice{slcs, slcs2}
			for _, env := range envs {
				for _, s := range svcs {
					env.p.OnServiceAdd(s)
				}
				for _, s := range slcs {
					env.p.OnEndpointSliceAdd(s)
				}
			}
			steps := []struct {
				name  string
				apply func(e *testEnv, slcs []*discovery.EndpointSlice)
				split bool // the split proxier's restore must be split
			}{
				{"full sync", func(e *testEnv, _ []*discovery.EndpointSlice) { e.start(t) }, true},
				{"one endpoint", func(e *testEnv, s []*discovery.EndpointSlice) {
					updateSlice(e.p, s, 3, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(9000)} })
					e.sync(t)
				}, false},
				{"service deleted", func(e *testEnv, _ []*discovery.EndpointSlice) {
					e.p.OnServiceDelete(svcs[5])
					e.sync(t)
				}, false},
				{"stale chains deleted", func(e *testEnv, _ []*discovery.EndpointSlice) { e.sync(t) }, false},
				{"eTP Local", func(e *testEnv, _ []*discovery.EndpointSlice) {
					old := svcs[10]
					s := old.DeepCopy()
					s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
					s.Spec.HealthCheckNodePort = 32100
					e.p.OnServiceUpdate(old, s)
					e.sync(t)
				}, false},
				{"forced full sync", func(e *testEnv, _ []*discovery.EndpointSlice) {
					e.p.RequestFullSync()
					e.sync(t)
				}, true},
			}
			for _, step := range steps {
				for i, env := range envs {
					step.apply(env, slicesOf[i])
				}
				if got, want := canonicalSave(split.dump(t)), canonicalSave(plain.dump(t)); got != want {
					t.Fatalf("%s: split restores gave different tables:\n%s", step.name, lineDiff(want, got))
				}
				if step.split {
					checkChunked(t, split.restore[len(split.restore)-1], maxChains)
				}
			}
		})
	}
}

// TestChunkPlan tests the planner on hand-written port chains: where it may
// cut, and that it gives up (one block) when the lines are not the
// generator's.
func TestChunkPlan(t *testing.T) {
	decl := func(names ...string) string {
		var b strings.Builder
		for _, n := range names {
			fmt.Fprintf(&b, ":%s - [0:0]\n", n)
		}
		return b.String()
	}
	for _, tc := range []struct {
		name   string
		chains string
		rules  string
		max    int
		want   []cut // nil: no split
		parses bool
	}{{
		name:   "two independent ports",
		chains: decl("S1", "E1", "S2", "E2"),
		rules:  "-A S1 -j E1\n-A E1 -j DNAT\n-A S2 -j E2\n-A E2 -j DNAT\n",
		max:    2, parses: true,
		want: []cut{{2, 2}, {4, 4}},
	}, {
		name:   "a jump forward joins the ports",
		chains: decl("S1", "E1", "S2", "E2"),
		rules:  "-A S1 -j E2\n-A E1 -j DNAT\n-A S2 -j E2\n-A E2 -j DNAT\n",
		max:    2, parses: true,
		want: nil,
	}, {
		name:   "a jump backward joins the ports",
		chains: decl("S1", "E1", "S2", "E2"),
		rules:  "-A S1 -j E1\n-A E1 -j DNAT\n-A S2 -j E2\n-A E2 -j E1\n",
		max:    2, parses: true,
		want: nil,
	}, {
		name:   "chains without rules go with the block before the next rule's",
		chains: decl("S1", "X", "S2", "Y"),
		rules:  "-A S1 -j DNAT\n-A S2 -j DNAT\n",
		max:    2, parses: true,
		want: []cut{{2, 1}, {4, 2}},
	}, {
		name:   "blocks grow to the next allowed cut",
		chains: decl("A", "B", "C", "D", "E", "F"),
		rules:  "-A A -j B\n-A B -j C\n-A C -j DNAT\n-A D -j DNAT\n-A E -j F\n-A F -j DNAT\n",
		max:    2, parses: true,
		want: []cut{{3, 3}, {6, 6}},
	}, {
		name:   "quoted -j in a comment is not a jump",
		chains: decl("S1", "E1", "S2", "E2"),
		rules:  "-A S1 -m comment --comment \"x -j E2\" -j E1\n-A E1 -j DNAT\n-A S2 -j E2\n-A E2 -j DNAT\n",
		max:    2, parses: true,
		want: []cut{{2, 2}, {4, 4}},
	}, {
		name:   "rule in an undeclared chain",
		chains: decl("S1", "E1"),
		rules:  "-A KUBE-SERVICES -j S1\n",
		max:    1, parses: false,
	}, {
		name:   "not a chain line",
		chains: "-X S1\n",
		max:    1, parses: false,
	}, {
		name:   "chain declared twice",
		chains: decl("S1", "S1"),
		max:    1, parses: false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var c chunking
			if got := c.parse([]byte(tc.chains), []byte(tc.rules)); got != tc.parses {
				t.Fatalf("parse = %v, want %v", got, tc.parses)
			}
			if !tc.parses {
				return
			}
			if got := c.plan(tc.max); !slices.Equal(got, tc.want) {
				t.Errorf("plan = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestChunkedInputFallsBack: input the planner cannot split safely is
// written exactly as an unsplit restore.
func TestChunkedInputFallsBack(t *testing.T) {
	env := newTestEnv(t, families[0], envConfig{})
	svcs, slcs := manyServicesShaped(families[0], 40, 4)
	for _, s := range svcs {
		env.p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	tb := &env.p.tables
	want := string(tb.restoreInput(nil, true, true, nil))
	var c chunking
	for _, tc := range []struct {
		name  string
		max   int
		stale []utiliptables.Chain
	}{
		{"no limit", 0, nil},
		{"limit above the chain count", 100000, nil},
		{"stale chains not declared", 5, []utiliptables.Chain{"KUBE-SEP-NOTDECLAREDATALL", "KUBE-SEP-NOTDECLAREDATALL2"}},
	} {
		wantHere := want
		if tc.stale != nil {
			wantHere = string(tb.restoreInput(nil, true, true, tc.stale))
		}
		if got := string(c.restoreInput(nil, tb, true, true, tc.stale, tc.max)); got != wantHere {
			t.Errorf("%s: input differs from the unsplit one:\n%s", tc.name, lineDiff(wantHere, got))
		}
	}
}

// BenchmarkChunkedRestoreInput measures what splitting adds to a full
// sync's generation: indexing the ports' lines and planning the blocks.
func BenchmarkChunkedRestoreInput(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name, func(b *testing.B) {
			p, _ := benchProxierShape(b, &discardIPTables{}, size.n, 10)
			t := &p.tables
			var c chunking
			var dst []byte
			for _, max := range []int{0, nftBlockChains(p.view.chains)} {
				b.Run(fmt.Sprintf("max=%d", max), func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						dst = c.restoreInput(dst[:0], t, true, true, nil, max)
					}
					b.ReportMetric(float64(len(natBlocks(b, string(dst)))), "nat-blocks")
				})
			}
		})
	}
}

// TestBlockChains pins the block sizes the measurements in nftBlockChains'
// comment chose between: about 370 chains for a 1k-Service table and about
// 1160 for 10k, never under the floor, and growing with the table.
func TestBlockChains(t *testing.T) {
	for _, tc := range []struct{ table, lo, hi int }{
		{0, nftMinBlockChains, nftMinBlockChains},
		{2000, nftMinBlockChains, nftMinBlockChains},
		{11_000, 350, 390},
		{110_000, 1100, 1200},
		{550_000, 2500, 2700},
	} {
		if got := nftBlockChains(tc.table); got < tc.lo || got > tc.hi {
			t.Errorf("nftBlockChains(%d) = %d, want %d..%d", tc.table, got, tc.lo, tc.hi)
		}
	}
	for n, prev := 0, 0; n < 1_000_000; n += 997 {
		if got := nftBlockChains(n); got < prev {
			t.Fatalf("nftBlockChains(%d) = %d, less than %d for a smaller table", n, got, prev)
		} else {
			prev = got
		}
	}
}
