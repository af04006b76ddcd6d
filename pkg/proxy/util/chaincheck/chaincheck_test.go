package chaincheck

import (
	"errors"
	"reflect"
	"testing"

	"k8s.io/klog/v2"
	utiliptables "k8s.io/net-utils/iptables"
)

const nat = utiliptables.TableNAT

// restore is restore input as a proxier writes it: two tables, our chains
// declared, rules appended, and a rule in a built-in chain.
const restore = `*filter
:KUBE-FORWARD - [0:0]
-A KUBE-FORWARD -j ACCEPT
COMMIT
*nat
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-EMPTY - [0:0]
-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-X
-A KUBE-SERVICES -j KUBE-NODEPORTS
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A PREROUTING -j KUBE-SERVICES
COMMIT
`

// asWritten is the nat table's save when it holds what restore wrote,
// spelled as iptables-save spells it, with a chain that is not ours.
const asWritten = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-EMPTY - [0:0]
:OTHER - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-X
-A KUBE-SERVICES -j KUBE-NODEPORTS
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A OTHER -j ACCEPT
COMMIT
`

func key(c string) Key { return Key{Table: nat, Chain: utiliptables.Chain(c)} }

func TestCompare(t *testing.T) {
	for _, tc := range []struct {
		name string
		save string
		// fingerprinted: a check of asWritten ran before this one.
		fingerprinted bool
		want          []Difference
	}{
		{name: "as written", save: asWritten},
		{name: "as written, fingerprinted", save: asWritten, fingerprinted: true},
		{
			name: "chain missing",
			save: `:KUBE-SERVICES - [0:0]
:KUBE-EMPTY - [0:0]
-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-X
-A KUBE-SERVICES -j KUBE-NODEPORTS
`,
			want: []Difference{{Kind: KindChain, Key: key("KUBE-MARK-MASQ"), Expected: "1 rule"}},
		},
		{
			name: "chain flushed",
			save: ":KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-EMPTY - [0:0]\n-A KUBE-MARK-MASQ -j MARK\n",
			want: []Difference{{Kind: KindRule, Key: key("KUBE-SERVICES"), Expected: "2 rules", Found: "0 rules"}},
		},
		{
			name: "rule added to an empty chain",
			save: asWritten + "-A KUBE-EMPTY -j DROP\n",
			want: []Difference{{Kind: KindRule, Key: key("KUBE-EMPTY"), Expected: "0 rules", Found: "1 rule"}},
		},
		{
			name:          "rule replaced in place after a fingerprint",
			save:          replace(asWritten, "--set-xmark 0x4000/0x4000", "--set-xmark 0x8000/0x8000"),
			fingerprinted: true,
			want: []Difference{{Kind: KindRule, Key: key("KUBE-MARK-MASQ"),
				Expected: "1 rule as written", Found: "1 rule, changed since"}},
		},
		{
			// Without a fingerprint a same-count change cannot be told
			// from the kernel's own spelling.
			name: "rule replaced in place before any fingerprint",
			save: replace(asWritten, "--set-xmark 0x4000/0x4000", "--set-xmark 0x8000/0x8000"),
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fingerprints := map[Key]uint64{}
			var c Check
			if tc.fingerprinted {
				c.Reset(nat)
				c.WantTable([]byte(restore))
				c.Scan([]byte(asWritten), nil)
				if d := c.Compare(fingerprints, nil); len(d) != 0 {
					t.Fatalf("first check: %v", d)
				}
			}
			c.Reset(nat)
			c.WantTable([]byte(restore))
			c.Scan([]byte(tc.save), nil)
			got := c.Compare(fingerprints, nil)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
			// Every chain found as written now has a fingerprint; a
			// chain found otherwise has none, so a rewrite is compared
			// afresh.
			for _, d := range got {
				if _, ok := fingerprints[d.Key]; ok && d.Found != "1 rule, changed since" {
					t.Errorf("%s keeps a fingerprint after %s", d.Key.Object(), d.Kind)
				}
			}
		})
	}
}

func replace(s, old, new string) string {
	i := len(s) - len(old)
	for ; i >= 0; i-- {
		if s[i:i+len(old)] == old {
			return s[:i] + new + s[i+len(old):]
		}
	}
	panic("not found: " + old)
}

func TestWant(t *testing.T) {
	type counted struct {
		chain string
		rules int
	}
	for _, tc := range []struct {
		name string
		fill func(c *Check)
		want []counted
	}{
		{
			name: "WantTable: only the table's section, only declared chains' rules",
			fill: func(c *Check) { c.WantTable([]byte(restore)) },
			want: []counted{{"KUBE-SERVICES", 2}, {"KUBE-MARK-MASQ", 1}, {"KUBE-EMPTY", 0}},
		},
		{
			name: "WantDeclared then WantRules: undeclared chains' rules are wanted too",
			fill: func(c *Check) {
				c.WantDeclared([]byte(":KUBE-A - [0:0]\n:KUBE-B - [0:0]"))
				c.WantRules([]byte("-A KUBE-A -j X\n-A KUBE-C -j Y\n-A KUBE-A -j Z"))
			},
			want: []counted{{"KUBE-A", 2}, {"KUBE-B", 0}, {"KUBE-C", 1}},
		},
		{
			name: "Want adds up; Share marks only a wanted chain",
			fill: func(c *Check) {
				c.Want("KUBE-A", 3)
				c.Want("KUBE-A", 2)
				c.Want("KUBE-FIREWALL", 1)
				c.Share("KUBE-FIREWALL")
				c.Share("KUBE-NOT-WANTED")
			},
			want: []counted{{"KUBE-A", 5}, {"KUBE-FIREWALL", Shared}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Check
			c.Reset(nat)
			c.Want("KUBE-STALE", 9) // forgotten by the Reset below
			c.Reset(nat)
			tc.fill(&c)
			var got []counted
			for _, w := range c.chains {
				got = append(got, counted{string(w.name), w.rules})
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestShared(t *testing.T) {
	var c Check
	c.Reset(utiliptables.TableFilter)
	c.Want("KUBE-FIREWALL", 1)
	c.Share("KUBE-FIREWALL")
	fingerprints := map[Key]uint64{}
	c.Scan([]byte(":KUBE-FIREWALL - [0:0]\n-A KUBE-FIREWALL -j A\n-A KUBE-FIREWALL -j B\n"), nil)
	if d := c.Compare(fingerprints, nil); len(d) != 0 {
		t.Errorf("a shared chain with other rules: %v, want no difference", d)
	}
	c.Reset(utiliptables.TableFilter)
	c.Want("KUBE-FIREWALL", 1)
	c.Share("KUBE-FIREWALL")
	c.Scan([]byte(":OTHER - [0:0]\n"), nil)
	want := []Difference{{Kind: KindChain, Key: Key{utiliptables.TableFilter, "KUBE-FIREWALL"}, Expected: "present"}}
	if d := c.Compare(fingerprints, nil); !reflect.DeepEqual(d, want) {
		t.Errorf("a shared chain missing: %+v, want %+v", d, want)
	}
}

func TestScanOther(t *testing.T) {
	var c Check
	c.Reset(nat)
	c.WantTable([]byte(restore))
	var other []string
	c.Scan([]byte(asWritten), func(chain, line []byte) { other = append(other, string(chain)+"|"+string(line)) })
	want := []string{
		`PREROUTING|-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
		"OTHER|-A OTHER -j ACCEPT",
	}
	if !reflect.DeepEqual(other, want) {
		t.Errorf("rules of chains not wanted: %q, want %q", other, want)
	}
}

func TestRuleChain(t *testing.T) {
	for line, want := range map[string]string{
		"-A KUBE-SERVICES -j X":  "KUBE-SERVICES",
		"-A KUBE-SERVICES":       "KUBE-SERVICES",
		"-I KUBE-SERVICES -j X":  "",
		":KUBE-SERVICES - [0:0]": "",
		"-A ":                    "",
		"":                       "",
	} {
		if got := string(RuleChain([]byte(line))); got != want {
			t.Errorf("RuleChain(%q) = %q, want %q", line, got, want)
		}
	}
}

// fakeGen is an iptables interface that tells its nf_tables generation.
type fakeGen struct {
	utiliptables.Interface
	gen uint32
	ok  bool
	err error
}

func (f *fakeGen) Generation() (uint32, bool, error) { return f.gen, f.ok, f.err }

func TestGeneration(t *testing.T) {
	type step struct {
		gen       uint32
		ok        bool
		err       error
		unchanged bool // what Unchanged must say
		clean     bool // the check's outcome, when it runs
	}
	for _, tc := range []struct {
		name  string
		ipt   utiliptables.Interface
		steps []step
	}{
		{
			name: "unchanged after a clean check",
			steps: []step{
				{gen: 7, ok: true, clean: true},
				{gen: 7, ok: true, unchanged: true},
				{gen: 8, ok: true, clean: true},
				{gen: 8, ok: true, unchanged: true},
			},
		},
		{
			name: "a check that found drift does not spare the next",
			steps: []step{
				{gen: 7, ok: true, clean: false},
				{gen: 7, ok: true, clean: true},
				{gen: 7, ok: true, unchanged: true},
			},
		},
		{
			name: "legacy iptables has no generation",
			steps: []step{
				{gen: 0, ok: false, clean: true},
				{gen: 0, ok: false, clean: true},
			},
		},
		{
			name: "an error reading it forgets the last",
			steps: []step{
				{gen: 7, ok: true, clean: true},
				{err: errors.New("netlink"), clean: true},
				{gen: 7, ok: true, clean: true},
				{gen: 7, ok: true, unchanged: true},
			},
		},
		{
			name: "an interface that cannot tell",
			ipt:  struct{ utiliptables.Interface }{},
			steps: []step{
				{clean: true},
				{clean: true},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var g Generation
			f := &fakeGen{}
			for i, s := range tc.steps {
				f.gen, f.ok, f.err = s.gen, s.ok, s.err
				ipt := tc.ipt
				if ipt == nil {
					ipt = f
				}
				if got := g.Unchanged(ipt, klog.Background()); got != s.unchanged {
					t.Fatalf("step %d: Unchanged = %v, want %v", i, got, s.unchanged)
				}
				if !s.unchanged {
					g.Done(s.clean)
				}
			}
		})
	}
}

func TestRulesText(t *testing.T) {
	for n, want := range map[int]string{Shared: "present", 0: "0 rules", 1: "1 rule", 2: "2 rules"} {
		if got := RulesText(n); got != want {
			t.Errorf("RulesText(%d) = %q, want %q", n, got, want)
		}
	}
}
