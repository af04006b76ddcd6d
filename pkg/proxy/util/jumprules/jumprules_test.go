package jumprules

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"k8s.io/klog/v2/ktesting"

	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
)

var (
	filter = utiliptables.TableFilter
	nat    = utiliptables.TableNAT
)

// testJumps has a conntrack-matching jump, two jumps to one chain, a jump
// without comment and a nat one.
var testJumps = []Jump{
	{filter, utiliptables.ChainInput, "KUBE-A", "a portals", []string{"-m", "conntrack", "--ctstate", "NEW"}},
	{filter, utiliptables.ChainForward, "KUBE-A", "a portals", nil},
	{filter, utiliptables.ChainOutput, "KUBE-FW", "", nil},
	{nat, utiliptables.ChainPrerouting, "KUBE-B", "b rules", nil},
}

// testChains has a chain no jump leads to and one a jump leads to.
var testChains = []Chain{{nat, "KUBE-C"}, {filter, "KUBE-A"}}

// complete is what Ensure makes of an empty node.
const complete = "*filter\n-N KUBE-A\n" +
	`-I INPUT -m conntrack --ctstate NEW -m comment --comment "a portals" -j KUBE-A` + "\n" +
	`-I FORWARD -m comment --comment "a portals" -j KUBE-A` + "\n" +
	"-N KUBE-FW\n-I OUTPUT -j KUBE-FW\nCOMMIT\n" +
	"*nat\n-N KUBE-C\n-N KUBE-B\n" +
	`-I PREROUTING -m comment --comment "b rules" -j KUBE-B` + "\n" +
	"COMMIT\n"

// callLog passes everything to a fake and logs the calls that exec
// iptables on a node; failSave and failRestore make those calls fail.
type callLog struct {
	*iptablestest.FakeIPTables
	calls                 []string
	restores              []string
	failSave, failRestore bool
	oneByOne              bool
}

func (c *callLog) EnsureChain(table utiliptables.Table, chain utiliptables.Chain) (bool, error) {
	c.calls = append(c.calls, "ensure-chain "+string(table)+"/"+string(chain))
	return c.FakeIPTables.EnsureChain(table, chain)
}

func (c *callLog) EnsureRule(pos utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	c.calls = append(c.calls, "ensure-rule "+string(table)+"/"+string(chain)+" "+args[len(args)-1])
	return c.FakeIPTables.EnsureRule(pos, table, chain, args...)
}

func (c *callLog) SaveInto(table utiliptables.Table, b *bytes.Buffer) error {
	c.calls = append(c.calls, "save "+string(table))
	if c.failSave {
		return errors.New("iptables-save: exit status 1")
	}
	return c.FakeIPTables.SaveInto(table, b)
}

func (c *callLog) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	c.calls = append(c.calls, "restore")
	c.restores = append(c.restores, string(data))
	if flush != utiliptables.NoFlushTables {
		return errors.New("the jump restore must not flush the built-in chains")
	}
	if c.failRestore {
		return errors.New("iptables-restore: line 2 failed")
	}
	return c.FakeIPTables.RestoreAll(data, flush, counters)
}

// loggingOneByOne is a callLog that asks for Ensure calls (as a dry run).
type loggingOneByOne struct{ *callLog }

func (loggingOneByOne) WantsEnsureCalls() bool { return true }

// saveAll returns the fake's filter and nat tables.
func saveAll(t *testing.T, ipt utiliptables.Interface) string {
	t.Helper()
	var b bytes.Buffer
	for _, table := range tables {
		if err := ipt.SaveInto(table, &b); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

func TestEnsure(t *testing.T) {
	saves := []string{"save filter", "save nat"}
	everyEnsure := []string{
		"ensure-chain nat/KUBE-C", "ensure-chain filter/KUBE-A",
		"ensure-chain filter/KUBE-A", "ensure-rule filter/INPUT KUBE-A",
		"ensure-chain filter/KUBE-A", "ensure-rule filter/FORWARD KUBE-A",
		"ensure-chain filter/KUBE-FW", "ensure-rule filter/OUTPUT KUBE-FW",
		"ensure-chain nat/KUBE-B", "ensure-rule nat/PREROUTING KUBE-B",
	}
	cases := []struct {
		name string
		// node is restored (with --noflush) into an empty fake first.
		node                  string
		failSave, failRestore bool
		oneByOne              bool
		wantCalls             []string
		wantRestore           string
	}{{
		name:        "empty node: one restore",
		wantCalls:   append(slices.Clone(saves), "restore"),
		wantRestore: complete,
	}, {
		name:      "everything present: the saves only",
		node:      complete,
		wantCalls: saves,
	}, {
		name: "one jump and one chain missing",
		node: "*filter\n-N KUBE-A\n-N KUBE-FW\n" +
			`-A INPUT -m conntrack --ctstate NEW -m comment --comment "a portals" -j KUBE-A` + "\n" +
			"-A OUTPUT -j KUBE-FW\nCOMMIT\n*nat\n-N KUBE-B\n" +
			`-A PREROUTING -m comment --comment "b rules" -j KUBE-B` + "\nCOMMIT\n",
		wantCalls:   append(slices.Clone(saves), "restore"),
		wantRestore: "*filter\n" + `-I FORWARD -m comment --comment "a portals" -j KUBE-A` + "\nCOMMIT\n*nat\n-N KUBE-C\nCOMMIT\n",
	}, {
		// Other software's jumps to our chains do not count as ours:
		// another comment, another or a negated conntrack state.
		name: "look-alike jumps are not ours",
		node: "*filter\n-N KUBE-A\n-N KUBE-FW\n" +
			`-A INPUT -m conntrack ! --ctstate NEW -m comment --comment "a portals" -j KUBE-A` + "\n" +
			`-A INPUT -m conntrack --ctstate RELATED -m comment --comment "a portals" -j KUBE-A` + "\n" +
			`-A FORWARD -m comment --comment "someone else's" -j KUBE-A` + "\n" +
			"-A OUTPUT -m comment --comment anything -j KUBE-FW\nCOMMIT\n*nat\n-N KUBE-B\n-N KUBE-C\n-N KUBE-OTHER\n" +
			`-A PREROUTING -m comment --comment "b rules" -j KUBE-OTHER` + "\nCOMMIT\n",
		wantCalls: append(slices.Clone(saves), "restore"),
		wantRestore: "*filter\n" +
			`-I INPUT -m conntrack --ctstate NEW -m comment --comment "a portals" -j KUBE-A` + "\n" +
			`-I FORWARD -m comment --comment "a portals" -j KUBE-A` + "\nCOMMIT\n*nat\n" +
			`-I PREROUTING -m comment --comment "b rules" -j KUBE-B` + "\nCOMMIT\n",
	}, {
		name:      "save fails: every chain and jump one by one",
		failSave:  true,
		wantCalls: append([]string{"save filter"}, everyEnsure...),
	}, {
		name:        "restore fails: what is missing one by one",
		failRestore: true,
		wantCalls:   append(append(slices.Clone(saves), "restore"), everyEnsure...),
		wantRestore: complete,
	}, {
		name: "one by one wanted: only what is missing",
		node: strings.Replace(complete, "-N KUBE-C\n", "", 1),
		// the dry run's case; its kernel is empty, here one chain is missing
		oneByOne:  true,
		wantCalls: append(slices.Clone(saves), "ensure-chain nat/KUBE-C"),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			logger, _ := ktesting.NewTestContext(t)
			fake := iptablestest.NewFake()
			if tc.node != "" {
				if err := fake.RestoreAll([]byte(tc.node), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters); err != nil {
					t.Fatalf("setting up the node: %v", err)
				}
			}
			log := &callLog{FakeIPTables: fake, failSave: tc.failSave, failRestore: tc.failRestore}
			var ipt utiliptables.Interface = log
			if tc.oneByOne {
				ipt = loggingOneByOne{log}
			}
			var seen []string
			onSave := func(table utiliptables.Table, save []byte) {
				seen = append(seen, string(table))
				if !bytes.HasPrefix(save, []byte("*"+string(table))) {
					t.Errorf("onSave(%s) was handed %q", table, save)
				}
			}
			if err := Ensure(logger, ipt, testJumps, testChains, onSave); err != nil {
				t.Fatalf("Ensure: %v", err)
			}
			if got, want := strings.Join(log.calls, "\n"), strings.Join(tc.wantCalls, "\n"); got != want {
				t.Errorf("calls:\n%s\nwant:\n%s", got, want)
			}
			if want := []string{"filter", "nat"}; !tc.failSave && !slices.Equal(seen, want) {
				t.Errorf("onSave saw %v, want %v", seen, want)
			}
			gotRestore := ""
			if len(log.restores) > 0 {
				gotRestore = log.restores[0]
			}
			if gotRestore != tc.wantRestore {
				t.Errorf("restore input:\n%s\nwant:\n%s", gotRestore, tc.wantRestore)
			}

			// Whatever the node held, every chain and jump is now
			// there, none twice, and a second Ensure finds nothing to
			// do. (A jump without comment is matched by its target:
			// "anything -j KUBE-FW" counts.)
			node := saveAll(t, fake)
			for _, j := range testJumps {
				var b bytes.Buffer
				if err := fake.SaveInto(j.Table, &b); err != nil {
					t.Fatal(err)
				}
				line := "-A " + string(j.Src) + " " + QuoteArgs(j.Args())
				if n := strings.Count(node, line+"\n"); n > 1 || !ParseTableState(b.Bytes()).HasJump(j) {
					t.Errorf("%q is there %d times, want once:\n%s", line, n, node)
				}
			}
			for _, c := range testChains {
				if !strings.Contains(node, ":"+string(c.Chain)+" ") {
					t.Errorf("chain %s/%s missing:\n%s", c.Table, c.Chain, node)
				}
			}
			again := &callLog{FakeIPTables: fake}
			if err := Ensure(logger, again, testJumps, testChains, nil); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(again.calls, saves) {
				t.Errorf("a second Ensure made calls %v, want only %v", again.calls, saves)
			}
		})
	}
}

// A failing Ensure call names what it was ensuring and wraps the cause.
func TestEnsureOneByOneError(t *testing.T) {
	logger, _ := ktesting.NewTestContext(t)
	cause := errors.New("iptables: Resource temporarily unavailable")
	ipt := &failingEnsure{callLog: &callLog{FakeIPTables: iptablestest.NewFake(), failSave: true}, err: cause}
	err := Ensure(logger, ipt, testJumps, nil, nil)
	if !errors.Is(err, cause) || !strings.Contains(err.Error(), "filter/INPUT -> KUBE-A") {
		t.Errorf("Ensure = %v, want an error naming filter/INPUT -> KUBE-A wrapping %v", err, cause)
	}
	if ipt.ruleCalls != 1 {
		t.Errorf("%d EnsureRule calls, want 1: the first error stops", ipt.ruleCalls)
	}
}

type failingEnsure struct {
	*callLog
	err       error
	ruleCalls int
}

func (f *failingEnsure) EnsureRule(utiliptables.RulePosition, utiliptables.Table, utiliptables.Chain, ...string) (bool, error) {
	f.ruleCalls++
	return false, f.err
}
