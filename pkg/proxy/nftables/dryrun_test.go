//go:build linux

package nftables

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/knftables"
)

// listAll reads back everything the view reads on a full sync (and the
// table check): object names, rule counts and elements.
func listAll(t *testing.T, nft knftables.Interface) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, kind := range []string{"chain", "set", "map", "counter"} {
		names, err := nft.List(ctx, kind+"s")
		if err != nil {
			t.Fatalf("list %ss: %v", kind, err)
		}
		for _, name := range names {
			out = append(out, kind+" "+name)
			switch kind {
			case "chain":
				rules, err := nft.ListRules(ctx, name)
				if err != nil {
					t.Fatalf("list rules of %s: %v", name, err)
				}
				out = append(out, "rules "+name+" "+itoa(len(rules)))
			case "set", "map":
				elems, err := nft.ListElements(ctx, kind, name)
				if err != nil {
					t.Fatalf("list elements of %s: %v", name, err)
				}
				for _, e := range elems {
					out = append(out, "element "+name+" "+joinKey(e.Key)+" : "+joinKey(e.Value))
				}
			}
		}
	}
	slices.Sort(out)
	return out
}

// The in-memory dry-run table must answer exactly as knftables' Fake would
// after the same syncs, so a dry run prints the transactions a run against
// the fake (and the kernel) would: full syncs, partial ones, removals, and a
// full sync that reads everything back.
func TestDryRunTableMatchesFake(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			ctx := context.Background()
			var fakeOut, memOut bytes.Buffer
			viaFake, fake := newTestSyncer(t, tf, func(c *syncerConfig) { c.maxOps = 50 })
			viaFake.nft = &DryRunInterface{Interface: fake.Fake, Out: &fakeOut}
			viaMem, _ := newTestSyncer(t, tf, func(c *syncerConfig) { c.maxOps = 50 })
			dry := NewDryRunInterface(familyOf(tf.family), &memOut)
			viaMem.nft = dry

			changed := slices.Clone(testServices)
			changed[1].eps = changed[1].eps[:1]
			changed[6].eps = append(slices.Clone(changed[6].eps), tep{ip: "10.180.3.7", port: 80})
			steps := []syncInput{
				{full: true, services: models(tf.ip, testServices...)},
				{services: models(tf.ip, changed[1], changed[6])},
				{removed: []string{ownerOf(testServices[3]), ownerOf(testServices[7])}},
				{full: true, services: models(tf.ip, changed[:5]...)},
				{services: models(tf.ip, testServices[7])},
			}
			for i, in := range steps {
				in2 := in
				in2.services = slices.Clone(in.services)
				if _, err := viaFake.sync(ctx, in); err != nil {
					t.Fatalf("step %d over the fake: %v", i, err)
				}
				if _, err := viaMem.sync(ctx, in2); err != nil {
					t.Fatalf("step %d over the memory table: %v", i, err)
				}
				if diff := cmp.Diff(fakeOut.String(), memOut.String()); diff != "" {
					t.Fatalf("step %d: the dry runs printed different transactions (-fake +memory):\n%s", i, diff)
				}
				if diff := cmp.Diff(listAll(t, fake.Fake), listAll(t, dry.Interface)); diff != "" {
					t.Fatalf("step %d: the tables read back differently (-fake +memory):\n%s", i, diff)
				}
			}
			if viaMem.tableMissing(ctx) {
				t.Error("the table check reports the dry-run table missing, which would force a full sync every syncPeriod")
			}
		})
	}
}

func runText(t *testing.T, mt *memoryTable, lines ...string) error {
	t.Helper()
	return mt.apply(strings.Join(lines, "\n")+"\n", false)
}

// What nft would refuse, the memory table refuses too, and a refused
// transaction changes nothing.
func TestDryRunTableRefusesAtomically(t *testing.T) {
	m := newMemoryTable(knftables.IPv4Family, kubeProxyTable)
	if err := runText(t, m,
		"add table ip kube-proxy",
		"add chain ip kube-proxy a",
		`add rule ip kube-proxy a ip daddr 10.0.0.1 drop comment "x : y \" comment \"z"`,
		"add map ip kube-proxy m { type ipv4_addr : verdict ; }",
		"add set ip kube-proxy s { type ipv4_addr ; }",
		`add element ip kube-proxy m { 10.0.0.1 comment "a : b" : goto a }`,
		"add element ip kube-proxy s { 10.0.0.2 }",
	); err != nil {
		t.Fatal(err)
	}
	before := listAll(t, m)
	for name, line := range map[string]string{
		"flush of a missing chain":        "flush chain ip kube-proxy nope",
		"delete of a missing set":         "delete set ip kube-proxy nope",
		"delete of a missing element":     "delete element ip kube-proxy m { 10.0.0.9 }",
		"element of a missing map":        "add element ip kube-proxy nope { 10.0.0.1 : drop }",
		"verdict naming a missing chain":  "add element ip kube-proxy m { 10.0.0.3 : goto nope }",
		"rule jumping to a missing chain": "add rule ip kube-proxy a jump nope",
		"rule reading a missing map":      "add rule ip kube-proxy a ip daddr vmap @nope",
		"another table":                   "add chain ip other c",
		"a map value missing":             "add element ip kube-proxy m { 10.0.0.4 }",
		"a set named like a map":          "add set ip kube-proxy m { type ipv4_addr ; }",
	} {
		err := runText(t, m, "add chain ip kube-proxy b", "add element ip kube-proxy s { 10.0.0.5 }", "flush chain ip kube-proxy a", line)
		if err == nil {
			t.Errorf("%s: accepted", name)
		}
		if diff := cmp.Diff(before, listAll(t, m)); diff != "" {
			t.Errorf("%s: a refused transaction changed the table (-before +after):\n%s", name, diff)
		}
	}
	tx := m.NewTransaction()
	tx.Add(&knftables.Chain{Name: "checked"})
	if err := m.Check(context.Background(), tx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, listAll(t, m)); diff != "" {
		t.Errorf("Check changed the table (-before +after):\n%s", diff)
	}

	// "flush table" drops rules only, like the kernel.
	if err := runText(t, m, "flush table ip kube-proxy"); err != nil {
		t.Fatal(err)
	}
	want := slices.DeleteFunc(slices.Clone(before), func(s string) bool { return s == "rules a 1" })
	want = append(want, "rules a 0")
	slices.Sort(want)
	if diff := cmp.Diff(want, listAll(t, m)); diff != "" {
		t.Errorf("after flush table (-want +got):\n%s", diff)
	}
	if err := runText(t, m, "delete table ip kube-proxy"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.List(context.Background(), "chains"); !isNotFound(err) {
		t.Errorf("listing a deleted table: got %v, want not found", err)
	}
}
