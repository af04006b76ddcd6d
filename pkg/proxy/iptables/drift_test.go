//go:build linux

package iptables

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/component-base/metrics/testutil"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
)

// outsideChange is something another program does to the node's rules,
// as iptables-restore --noflush input. In the input, {SVC} is a KUBE-SVC
// chain of a Service with endpoints, {SEPRULE} its rule jumping to its
// first endpoint's chain (iptables-save's spelling, without "-A CHAIN")
// and {SEP} that chain.
type outsideChange struct {
	name  string
	input string
	// fingerprinted: the change keeps the chain's rule count, so only a
	// check that took the chain's fingerprint before sees it.
	fingerprinted bool
	// kinds the drift check must report, each counted in the repair
	// metric; none for a change that is not ours to repair.
	kinds []string
}

var outsideChanges = []outsideChange{
	{name: "rule deleted from a KUBE-SVC chain", input: "*nat\n-D {SVC} {SEPRULE}\nCOMMIT\n", kinds: []string{driftRule}},
	{name: "KUBE-SERVICES flushed, chain kept", input: "*nat\n-F KUBE-SERVICES\nCOMMIT\n", kinds: []string{driftRule}},
	{name: "KUBE-SEP chain deleted", input: "*nat\n-D {SVC} {SEPRULE}\n-F {SEP}\n-X {SEP}\nCOMMIT\n", kinds: []string{driftChain, driftRule}},
	{name: "jump from PREROUTING removed", input: "*nat\n-D PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\nCOMMIT\n", kinds: []string{driftJump}},
	{name: "filter KUBE-FORWARD flushed", input: "*filter\n-F KUBE-FORWARD\nCOMMIT\n", kinds: []string{driftRule}},
	{name: "rule added to KUBE-NODEPORTS", input: "*nat\n-A KUBE-NODEPORTS -j RETURN\nCOMMIT\n", kinds: []string{driftRule}},
	{name: "rule of KUBE-MARK-MASQ replaced", input: "*nat\n-D KUBE-MARK-MASQ 1\n-A KUBE-MARK-MASQ -j RETURN\nCOMMIT\n", fingerprinted: true, kinds: []string{driftRule}},
	{name: "other software's chain and rules", input: "*nat\n:OTHER-NAT - [0:0]\n-A OTHER-NAT -j RETURN\n-I PREROUTING 1 -j OTHER-NAT\n-A OUTPUT -j OTHER-NAT\nCOMMIT\n*filter\n-I INPUT 1 -p tcp --dport 22 -j ACCEPT\nCOMMIT\n"},
}

var sepRuleRE = regexp.MustCompile(`(?m)^-A (KUBE-SVC-\S+) (.* -j (KUBE-SEP-\S+))$`)

// expand fills in an outside change's placeholders from an iptables-save.
func (c outsideChange) expand(t testing.TB, saved string) string {
	t.Helper()
	m := sepRuleRE.FindStringSubmatch(saved)
	if m == nil {
		t.Fatalf("no KUBE-SVC rule jumping to a KUBE-SEP chain in:\n%s", saved)
	}
	return strings.NewReplacer("{SVC}", m[1], "{SEPRULE}", m[2], "{SEP}", m[3]).Replace(c.input)
}

func driftRepairs(t testing.TB, family v1.IPFamily, kind string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(metrics.SyncProxyRulesDriftRepairsTotal.WithLabelValues(string(family), kind))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// sortedSave is an iptables-save with counters and comments dropped and
// lines sorted: chains re-created by a repair may be listed elsewhere.
func sortedSave(t testing.TB, ipt utiliptables.Interface) string {
	t.Helper()
	lines := strings.Split(normalizeSave(save(t, ipt)), "\n")
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// testOutsideChange programs a few Services through env's proxier, makes
// c behind its back through ipt (the same kernel or fake), and checks that
// the next drift check reports it and its full sync puts back exactly what
// was there, or, for a change that is not ours, that nothing is rewritten.
func testOutsideChange(t *testing.T, env *testEnv, ipt utiliptables.Interface, f fam, c outsideChange) {
	sc := representativeCluster(f)
	more, moreSlices := manyServices(f, 5, 3)
	for _, s := range append(sc.services, more...) {
		env.p.OnServiceAdd(s)
	}
	for _, s := range append(sc.slices, moreSlices...) {
		env.p.OnEndpointSliceAdd(s)
	}
	env.p.OnServiceSynced()
	env.p.OnEndpointSlicesSynced()
	if !env.p.Initialized() || env.p.NeedsFullSync() {
		t.Fatalf("first sync failed")
	}
	// A partial sync rewrites one Service's chains: the check must know
	// what it wrote there too.
	updateSlice(env.p, moreSlices, 1, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:2] })
	if err := env.p.SyncNow(); err != nil {
		t.Fatalf("partial sync: %v", err)
	}
	if c.fingerprinted {
		// A check with nothing changed takes every chain's fingerprint.
		env.p.RequestRulesCheck()
		if err := env.p.SyncNow(); err != nil {
			t.Fatal(err)
		}
	}

	before := sortedSave(t, ipt)
	repairs := map[string]float64{}
	for _, k := range []string{driftChain, driftRule, driftJump} {
		repairs[k] = driftRepairs(t, f.family, k)
	}
	if err := ipt.RestoreAll([]byte(c.expand(t, save(t, ipt))), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters); err != nil {
		t.Fatalf("making the outside change: %v", err)
	}
	changed := sortedSave(t, ipt)
	if changed == before {
		t.Fatalf("the outside change changed nothing")
	}

	drifts, err := (*rulesBackend)(env.p).Drift(env.ctx)
	if err != nil {
		t.Fatalf("Drift: %v", err)
	}
	var kinds []string
	for _, d := range drifts {
		kinds = append(kinds, d.Kind)
	}
	slices.Sort(kinds)
	kinds = slices.Compact(kinds)
	want := slices.Sorted(slices.Values(c.kinds))
	if !slices.Equal(kinds, want) {
		t.Errorf("drift kinds = %v, want %v; drifts: %+v", kinds, want, drifts)
	}

	// The Shell's periodic check, as its timer would ask it.
	env.p.RequestRulesCheck()
	if err := env.p.SyncNow(); err != nil {
		t.Fatalf("sync after the outside change: %v", err)
	}
	after := sortedSave(t, ipt)
	if len(c.kinds) == 0 {
		if after != changed {
			t.Errorf("a change outside our chains was undone:\n%s", lineDiff(changed, after))
		}
	} else if after != before {
		t.Errorf("not repaired within one check:\n%s", lineDiff(before, after))
	}
	for _, k := range []string{driftChain, driftRule, driftJump} {
		got := driftRepairs(t, f.family, k) - repairs[k]
		if wanted := slices.Contains(c.kinds, k); wanted != (got > 0) {
			t.Errorf("repairs of kind %q counted: %v, want some: %v", k, got, wanted)
		}
	}

	// Repaired, the next check finds nothing.
	drifts, err = (*rulesBackend)(env.p).Drift(env.ctx)
	if err != nil || len(drifts) != 0 {
		t.Errorf("second check: %+v, %v; want nothing", drifts, err)
	}
}

// TestDriftRepair makes every outside change of issue 35 that concerns
// iptables mode to the fake iptables.
func TestDriftRepair(t *testing.T) {
	for _, f := range families {
		for _, c := range outsideChanges {
			t.Run(fmt.Sprintf("%s/%s", f.family, c.name), func(t *testing.T) {
				env := newTestEnv(t, f, envConfig{})
				testOutsideChange(t, env, env.ipt, f, c)
			})
		}
	}
}

// TestKernelDriftRepair is TestDriftRepair against the kernel, in a
// private network namespace, with both iptables backends.
func TestKernelDriftRepair(t *testing.T) {
	eachBackend(t, func(t *testing.T, variant string, f fam) {
		for _, c := range outsideChanges {
			t.Run(c.name, func(t *testing.T) {
				real, _ := kernelIPTables(t, variant, f)
				// On nft the checks use the kernel's nf_tables generation.
				if _, ok, err := real.(utiliptables.GenerationReader).Generation(); ok != (variant == "nft") || err != nil {
					t.Fatalf("nf_tables generation: ok %v, %v", ok, err)
				}
				env := kernelProxier(t, f, real)
				testOutsideChange(t, env, real, f, c)
			})
		}
	})
}

// TestDriftNothingChanged: checks of an untouched kernel, after full and
// partial syncs of every kind, find nothing and write nothing.
func TestDriftNothingChanged(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			env := newTestEnv(t, f, envConfig{localhostNodePorts: new(bool)})
			sc := representativeCluster(f)
			more, moreSlices := manyServices(f, 5, 3)
			for _, s := range append(sc.services, more...) {
				env.p.OnServiceAdd(s)
			}
			for _, s := range append(sc.slices, moreSlices...) {
				env.p.OnEndpointSliceAdd(s)
			}
			env.start(t)
			check := func(stage string) {
				t.Helper()
				for i := 0; i < 2; i++ { // the second one with fingerprints
					drifts, err := (*rulesBackend)(env.p).Drift(env.ctx)
					if err != nil || len(drifts) != 0 {
						t.Fatalf("%s: drift check %d: %+v, %v; want nothing", stage, i, drifts, err)
					}
				}
			}
			check("full sync")
			updateSlice(env.p, moreSlices, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[:1] })
			env.sync(t)
			check("endpoint removed")
			env.p.OnServiceDelete(more[2])
			env.sync(t)
			check("service deleted")
			env.p.OnServiceAdd(more[2])
			env.sync(t)
			check("service added back")
			calls := env.restoreCalls
			env.p.RequestRulesCheck()
			env.sync(t)
			if env.restoreCalls != calls {
				t.Errorf("a check that found nothing restored:\n%s", env.restore[len(env.restore)-1])
			}
		})
	}
}

// generationIPT is the fake with an nf_tables generation: every restore,
// by the proxier or from outside, bumps it; saves are counted.
type generationIPT struct {
	*iptablestest.FakeIPTables
	gen, saves int
}

func (g *generationIPT) Generation() (uint32, bool, error) { return uint32(g.gen), true, nil }

func (g *generationIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	g.gen++
	return g.FakeIPTables.RestoreAll(data, flush, counters)
}

func (g *generationIPT) SaveInto(table utiliptables.Table, buf *bytes.Buffer) error {
	g.saves++
	return g.FakeIPTables.SaveInto(table, buf)
}

// TestDriftGeneration: on iptables-nft a check reads the tables only when
// the kernel's nf_tables generation moved since the last check that found
// nothing, and still sees a change made from outside.
func TestDriftGeneration(t *testing.T) {
	f := families[0]
	env := newTestEnv(t, f, envConfig{})
	ipt := &generationIPT{FakeIPTables: env.ipt}
	env.p.syncer.ipt = ipt
	sc := representativeCluster(f)
	for _, s := range sc.services {
		env.p.OnServiceAdd(s)
	}
	for _, s := range sc.slices {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	b := (*rulesBackend)(env.p)
	for i, want := range []int{2, 0, 0} { // saves: nat and filter, then none
		saves := ipt.saves
		if d, err := b.Drift(env.ctx); err != nil || len(d) != 0 {
			t.Fatalf("check %d: %+v, %v", i, d, err)
		}
		if got := ipt.saves - saves; got != want {
			t.Errorf("check %d read %d tables, want %d", i, got, want)
		}
	}
	if err := ipt.RestoreAll([]byte("*nat\n-F KUBE-SERVICES\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters); err != nil {
		t.Fatal(err)
	}
	if d, err := b.Drift(env.ctx); err != nil || len(d) != 1 || d[0].Object != "nat/KUBE-SERVICES" {
		t.Errorf("after KUBE-SERVICES was flushed: %+v, %v", d, err)
	}
	// Drift found: the next check reads again, though nothing was committed.
	saves := ipt.saves
	if d, _ := b.Drift(env.ctx); len(d) != 1 || ipt.saves != saves+2 {
		t.Errorf("check after a drift: %+v, %d tables read; want the drift again, 2 tables read", d, ipt.saves-saves)
	}
}

// TestDriftContested: a writer that keeps flushing KUBE-SERVICES is fought
// three times, then the chain is reported contested and left alone until
// its backoff ends, instead of being rewritten at every check.
func TestDriftContested(t *testing.T) {
	f := families[0]
	env := newTestEnv(t, f, envConfig{})
	sc := representativeCluster(f)
	for _, s := range sc.services {
		env.p.OnServiceAdd(s)
	}
	for _, s := range sc.slices {
		env.p.OnEndpointSliceAdd(s)
	}
	env.start(t)
	flushed := func() bool {
		t.Helper()
		c, err := env.ipt.Dump.GetChain(utiliptables.TableNAT, kubeServicesChain)
		if err != nil {
			t.Fatal(err)
		}
		return len(c.Rules) == 0
	}
	repairs := driftRepairs(t, f.family, driftRule)
	for i := 1; i <= 4; i++ {
		if err := env.ipt.RestoreAll([]byte("*nat\n-F KUBE-SERVICES\nCOMMIT\n"), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters); err != nil {
			t.Fatal(err)
		}
		env.p.RequestRulesCheck()
		env.sync(t)
		// Repaired the first three times; the fourth, contested, waits.
		if want := i == 4; flushed() != want {
			t.Errorf("flush %d: KUBE-SERVICES left flushed %v, want %v", i, flushed(), want)
		}
	}
	if got := driftRepairs(t, f.family, driftRule) - repairs; got != 3 {
		t.Errorf("rule repairs counted: %v, want 3", got)
	}
	contested, err := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesDriftContested.WithLabelValues(string(f.family)))
	if err != nil || contested != 1 {
		t.Errorf("contested objects: %v, %v; want 1", contested, err)
	}
}
