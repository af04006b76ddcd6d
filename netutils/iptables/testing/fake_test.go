package testing

import (
	"bytes"
	"errors"
	"strings"
	"sync"
	"testing"

	"k8s.io/net-utils/iptables"
)

func save(t *testing.T, f *FakeIPTables, table iptables.Table) string {
	t.Helper()
	var buf bytes.Buffer
	if err := f.SaveInto(table, &buf); err != nil {
		t.Fatalf("SaveInto(%q): %v", table, err)
	}
	return buf.String()
}

func TestNewFake(t *testing.T) {
	f := NewFake()
	want := `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
COMMIT
`
	if got := save(t, f, ""); got != want {
		t.Errorf("initial state:\n%s\nwant:\n%s", got, want)
	}
	if f.IsIPv6() || f.Protocol() != iptables.ProtocolIPv4 {
		t.Errorf("NewFake is not IPv4")
	}
	if f6 := NewIPv6Fake(); !f6.IsIPv6() || f6.Protocol() != iptables.ProtocolIPv6 {
		t.Errorf("NewIPv6Fake is not IPv6")
	}
	if !iptables.HasRandomFully(f) {
		t.Errorf("default fake should report --random-fully")
	}
	f.SetFeatures(iptables.Features{})
	if iptables.HasRandomFully(f) {
		t.Errorf("SetFeatures did not take effect")
	}
	if err := f.Present(); err != nil {
		t.Errorf("Present: %v", err)
	}
	f.SetPresentError(errors.New("gone"))
	if err := f.Present(); err == nil {
		t.Errorf("SetPresentError did not take effect")
	}
}

func TestFakeChainsAndRules(t *testing.T) {
	f := NewFake()
	type step struct {
		name string
		do   func() (bool, error)
		// existed is the bool result expected; err a substring of the error, "" for none.
		existed  bool
		err      string
		notFound bool // the error must satisfy iptables.IsNotFoundError
	}
	ok := func(err error) (bool, error) { return false, err }
	steps := []step{
		{name: "chain in missing table", do: func() (bool, error) { return f.EnsureChain("blah", "KUBE-TEST") }, err: `no such table "blah"`},
		{name: "new chain", do: func() (bool, error) { return f.EnsureChain(iptables.TableNAT, "KUBE-TEST") }},
		{name: "existing chain", do: func() (bool, error) { return f.EnsureChain(iptables.TableNAT, "KUBE-TEST") }, existed: true},
		{name: "chain exists", do: func() (bool, error) { return f.ChainExists(iptables.TableNAT, "KUBE-TEST") }, existed: true},
		{name: "chain does not exist", do: func() (bool, error) { return f.ChainExists(iptables.TableNAT, "KUBE-NOPE") }, err: "no such chain", notFound: true},
		{name: "rule in missing chain", do: func() (bool, error) {
			return f.EnsureRule(iptables.Append, iptables.TableNAT, "KUBE-NOPE", "-j", "ACCEPT")
		}, err: "no such chain", notFound: true},
		{name: "rule jumping nowhere", do: func() (bool, error) {
			return f.EnsureRule(iptables.Append, iptables.TableNAT, "KUBE-TEST", "-j", "KUBE-NOWHERE")
		}, err: "non-existent chain", notFound: true},
		{name: "append", do: func() (bool, error) {
			return f.EnsureRule(iptables.Append, iptables.TableNAT, "KUBE-TEST", "-m", "comment", "--comment", "two words", "-j", "ACCEPT")
		}},
		{name: "prepend", do: func() (bool, error) {
			return f.EnsureRule(iptables.Prepend, iptables.TableNAT, "KUBE-TEST", "-j", "DROP")
		}},
		{name: "append existing", do: func() (bool, error) {
			return f.EnsureRule(iptables.Append, iptables.TableNAT, "KUBE-TEST", "-j", "DROP")
		}, existed: true},
		{name: "jump from a built-in chain", do: func() (bool, error) {
			return f.EnsureRule(iptables.Append, iptables.TableNAT, iptables.ChainPrerouting, "-j", "KUBE-TEST")
		}},
		{name: "delete a referenced chain", do: func() (bool, error) { return ok(f.DeleteChain(iptables.TableNAT, "KUBE-TEST")) }, err: "referenced by existing rules"},
		{name: "delete the jump", do: func() (bool, error) {
			return ok(f.DeleteRule(iptables.TableNAT, iptables.ChainPrerouting, "-j", "KUBE-TEST"))
		}},
		{name: "delete an absent rule", do: func() (bool, error) {
			return ok(f.DeleteRule(iptables.TableNAT, iptables.ChainPrerouting, "-j", "KUBE-TEST"))
		}},
		{name: "delete a rule in a missing chain", do: func() (bool, error) { return ok(f.DeleteRule(iptables.TableNAT, "KUBE-NOPE", "-j", "DROP")) }, err: "no such chain", notFound: true},
		{name: "delete a non-empty chain", do: func() (bool, error) { return ok(f.DeleteChain(iptables.TableNAT, "KUBE-TEST")) }, err: "it has 2 rules"},
		{name: "delete a built-in chain", do: func() (bool, error) { return ok(f.DeleteChain(iptables.TableNAT, iptables.ChainOutput)) }, err: "built-in"},
		{name: "flush a missing chain", do: func() (bool, error) { return ok(f.FlushChain(iptables.TableNAT, "KUBE-NOPE")) }, err: "no such chain", notFound: true},
	}
	for _, s := range steps {
		existed, err := s.do()
		switch {
		case s.err == "" && err != nil:
			t.Fatalf("%s: unexpected error %v", s.name, err)
		case s.err != "" && (err == nil || !strings.Contains(err.Error(), s.err)):
			t.Fatalf("%s: want error containing %q, got %v", s.name, s.err, err)
		case s.notFound && !iptables.IsNotFoundError(err):
			t.Fatalf("%s: error %q is not recognized by IsNotFoundError", s.name, err)
		case existed != s.existed:
			t.Fatalf("%s: got %v, want %v", s.name, existed, s.existed)
		}
	}
	want := `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-TEST - [0:0]
-A KUBE-TEST -j DROP
-A KUBE-TEST -m comment --comment "two words" -j ACCEPT
COMMIT
`
	if got := save(t, f, iptables.TableNAT); got != want {
		t.Fatalf("after rule steps:\n%s\nwant:\n%s", got, want)
	}
	// The same rule written with other quoting is the same rule.
	if existed, err := f.EnsureRule(iptables.Append, iptables.TableNAT, "KUBE-TEST", "-m", "comment", "--comment", "two words", "-j", "ACCEPT"); err != nil || !existed {
		t.Fatalf("EnsureRule of an existing quoted rule = %v, %v", existed, err)
	}
	if err := f.FlushChain(iptables.TableNAT, "KUBE-TEST"); err != nil {
		t.Fatal(err)
	}
	if err := f.DeleteChain(iptables.TableNAT, "KUBE-TEST"); err != nil {
		t.Fatal(err)
	}
	if exists, err := f.ChainExists(iptables.TableNAT, "KUBE-TEST"); exists || err == nil {
		t.Fatalf("chain still exists after DeleteChain")
	}
}

const baseNAT = `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SEP-B - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SVC-B -j KUBE-SEP-B
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`

func TestFakeRestore(t *testing.T) {
	for _, tc := range []struct {
		name     string
		table    iptables.Table // "" means RestoreAll
		input    string
		flush    iptables.FlushFlag
		counters iptables.RestoreCountersFlag
		// want is the nat table afterwards; "" when the restore must fail (and then
		// change nothing).
		want string
		err  string
		line int
	}{{
		name:  "noflush keeps undeclared chains and flushes declared ones",
		input: "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-SVC-B\nCOMMIT\n",
		want: `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SEP-B - [0:0]
-A KUBE-SERVICES -j KUBE-SVC-B
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SVC-B -j KUBE-SEP-B
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`,
	}, {
		name: "noflush deletes unreferenced chains",
		input: `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-B
-X KUBE-SVC-A
-X KUBE-SEP-A
COMMIT
`,
		want: `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SEP-B - [0:0]
-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SVC-B -j KUBE-SEP-B
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`,
	}, {
		name:  "flush replaces the table",
		input: "*nat\n:POSTROUTING DROP [3:4]\n:NEW - [0:0]\n-A POSTROUTING -j NEW\nCOMMIT\n",
		flush: iptables.FlushTables, counters: iptables.RestoreCounters,
		want: `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING DROP [3:4]
:NEW - [0:0]
-A POSTROUTING -j NEW
COMMIT
`,
	}, {
		name:  "counters only with RestoreCounters",
		input: "*nat\n:POSTROUTING ACCEPT [3:4]\n:KUBE-SVC-A - [9:9]\n-A KUBE-SVC-A -j KUBE-SEP-A\nCOMMIT\n",
		want: `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SEP-B - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SVC-B -j KUBE-SEP-B
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`,
	}, {
		name:  "Restore of one table ignores the others",
		table: iptables.TableFilter,
		input: "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*filter\n:F - [0:0]\nCOMMIT\n",
		want:  savedBase,
	}, {
		name:  "deleting a chain still referenced fails at the -X line",
		input: "*nat\n:KUBE-SEP-A - [0:0]\n-X KUBE-SEP-A\nCOMMIT\n",
		err:   "referenced by existing rules", line: 3,
	}, {
		name:  "jump to a missing chain fails at the rule's line",
		input: "*nat\n:KUBE-SVC-A - [0:0]\n\n-A KUBE-SVC-A -j KUBE-SEP-C\nCOMMIT\n",
		err:   "non-existent chain", line: 4,
	}, {
		name:  "deleting a missing chain",
		input: "*nat\n-X KUBE-NOPE\nCOMMIT\n",
		err:   "no such chain", line: 2,
	}, {
		name:  "appending to an undeclared missing chain",
		input: "*nat\n-A KUBE-NOPE -j ACCEPT\nCOMMIT\n",
		err:   "no such chain", line: 2,
	}, {
		name:  "policy on a user chain",
		input: "*nat\n:KUBE-NEW ACCEPT [0:0]\nCOMMIT\n",
		err:   "user-defined chain", line: 2,
	}, {
		name:  "deleting a built-in chain",
		input: "*nat\n-X OUTPUT\nCOMMIT\n",
		err:   "built-in", line: 2,
	}, {
		name:  "syntax error late in the input changes nothing earlier",
		input: "*filter\n:F - [0:0]\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j\nCOMMIT\n",
		err:   `requires an argument`, line: 6,
	}, {
		name:  "semantic error in the second table rolls back the first",
		input: "*filter\n:F - [0:0]\nCOMMIT\n*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j NOPE\nCOMMIT\n",
		err:   `non-existent chain`, line: 6,
	}, {
		name:  "unknown table",
		input: "*raw\n:X - [0:0]\nCOMMIT\n",
		err:   `table "raw" does not exist`, line: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := NewFake()
			if err := f.RestoreAll([]byte(baseNAT), iptables.NoFlushTables, iptables.NoRestoreCounters); err != nil {
				t.Fatalf("setting up: %v", err)
			}
			before := save(t, f, "")
			var err error
			if tc.table != "" {
				err = f.Restore(tc.table, []byte(tc.input), tc.flush, tc.counters)
			} else {
				err = f.RestoreAll([]byte(tc.input), tc.flush, tc.counters)
			}
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error containing %q, got %v", tc.err, err)
				}
				var pErr iptables.ParseError
				if !errors.As(err, &pErr) || pErr.Line() != tc.line {
					t.Fatalf("want a ParseError for line %d, got %#v", tc.line, err)
				}
				if after := save(t, f, ""); after != before {
					t.Fatalf("failed restore changed the state:\n%s\nwas:\n%s", after, before)
				}
			} else {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				if got := save(t, f, iptables.TableNAT); got != tc.want {
					t.Fatalf("nat afterwards:\n%s\nwant:\n%s", got, tc.want)
				}
			}
			if string(f.LastRestoreInput()) != tc.input || string(f.Lines) != tc.input {
				t.Errorf("last restore input not recorded")
			}
			h := f.RestoreHistory()
			if len(h) != 2 || h[1].Table != tc.table || h[1].Flush != tc.flush || h[1].Counters != tc.counters || (h[1].Err != nil) != (tc.err != "") {
				t.Errorf("wrong history: %+v", h)
			}
		})
	}
}

// savedBase is the nat table after baseNAT is restored into a new fake.
var savedBase = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SVC-B - [0:0]
:KUBE-SEP-B - [0:0]
-A KUBE-SERVICES -d 172.30.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SERVICES -d 172.30.0.2/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-B
-A KUBE-SVC-A -j KUBE-SEP-A
-A KUBE-SEP-A -p tcp -m tcp -j DNAT --to-destination 10.0.0.1:80
-A KUBE-SVC-B -j KUBE-SEP-B
-A KUBE-SEP-B -p tcp -m tcp -j DNAT --to-destination 10.0.0.2:80
COMMIT
`

func TestFakeRestoreInputIsCopied(t *testing.T) {
	f := NewFake()
	buf := []byte("*nat\n:A - [0:0]\nCOMMIT\n")
	if err := f.RestoreAll(buf, iptables.NoFlushTables, iptables.NoRestoreCounters); err != nil {
		t.Fatal(err)
	}
	copy(buf, "XXXX")
	if got := string(f.LastRestoreInput()); !strings.HasPrefix(got, "*nat") {
		t.Errorf("recorded input changed with the caller's buffer: %q", got)
	}
	calls, n := f.RestoreStats()
	if calls != 1 || n != int64(len(buf)) {
		t.Errorf("RestoreStats = %d, %d; want 1, %d", calls, n, len(buf))
	}
	f.ResetRestoreHistory()
	if calls, _ := f.RestoreStats(); calls != 0 || f.LastRestoreInput() != nil || len(f.RestoreHistory()) != 0 {
		t.Errorf("ResetRestoreHistory left state behind")
	}
}

func TestFakeRestoreHistoryIsBounded(t *testing.T) {
	f := NewFake()
	for range maxRestoreHistory + 5 {
		_ = f.RestoreAll([]byte("*nat\nCOMMIT\n"), iptables.NoFlushTables, iptables.NoRestoreCounters)
	}
	if n := len(f.RestoreHistory()); n != maxRestoreHistory {
		t.Errorf("history has %d entries, want %d", n, maxRestoreHistory)
	}
	if calls, _ := f.RestoreStats(); calls != maxRestoreHistory+5 {
		t.Errorf("RestoreStats counted %d calls", calls)
	}
}

func TestFakeSetRestoreError(t *testing.T) {
	f := NewFake()
	injected := errors.New("injected")
	f.SetRestoreError(injected)
	err := f.RestoreAll([]byte(baseNAT), iptables.NoFlushTables, iptables.NoRestoreCounters)
	if !errors.Is(err, injected) {
		t.Fatalf("want injected error, got %v", err)
	}
	if _, err := f.ChainExists(iptables.TableNAT, "KUBE-SERVICES"); err == nil {
		t.Fatalf("failed restore created chains")
	}
	f.SetRestoreError(nil)
	if err := f.RestoreAll([]byte(baseNAT), iptables.NoFlushTables, iptables.NoRestoreCounters); err != nil {
		t.Fatalf("restore after clearing the error: %v", err)
	}
}

// TestFakeUsableWithIPTablesHelpers checks the fake's errors with the helpers callers
// use on restore failures.
func TestFakeUsableWithIPTablesHelpers(t *testing.T) {
	f := NewFake()
	input := []byte("*nat\n:A - [0:0]\n-A A -j B\nCOMMIT\n")
	err := f.RestoreAll(input, iptables.NoFlushTables, iptables.NoRestoreCounters)
	pErr, ok := err.(iptables.ParseError)
	if !ok {
		t.Fatalf("want a ParseError, got %T %v", err, err)
	}
	lines := iptables.ExtractLines(input, pErr.Line(), 0)
	if len(lines) != 1 || lines[0].Data != "-A A -j B" {
		t.Errorf("ExtractLines at the error line = %+v", lines)
	}
	var buf bytes.Buffer
	if err := f.RestoreAll([]byte(baseNAT), iptables.NoFlushTables, iptables.NoRestoreCounters); err != nil {
		t.Fatal(err)
	}
	if err := f.SaveInto(iptables.TableNAT, &buf); err != nil {
		t.Fatal(err)
	}
	chains := iptables.GetChainsFromTable(buf.Bytes())
	if !chains.Has("KUBE-SVC-A") || !chains.Has("PREROUTING") || chains.Len() != 9 {
		t.Errorf("GetChainsFromTable on fake output = %v", chains.UnsortedList())
	}
}

func TestFakeConcurrentUse(t *testing.T) {
	f := NewFake()
	if _, err := f.EnsureChain(iptables.TableFilter, "C"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				_, _ = f.EnsureRule(iptables.Append, iptables.TableFilter, "C", "-j", "ACCEPT")
				_ = f.RestoreAll([]byte(baseNAT), iptables.NoFlushTables, iptables.NoRestoreCounters)
				var buf bytes.Buffer
				_ = f.SaveInto("", &buf)
			}
		})
	}
	wg.Wait()
	if got := save(t, f, iptables.TableFilter); strings.Count(got, "-A C -j ACCEPT") != 1 {
		t.Errorf("concurrent EnsureRule added duplicates:\n%s", got)
	}
}
