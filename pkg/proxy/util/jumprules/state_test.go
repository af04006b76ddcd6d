package jumprules

import (
	"slices"
	"strings"
	"testing"

	utiliptables "k8s.io/net-utils/iptables"
)

func TestHasJump(t *testing.T) {
	portals := Jump{filter, utiliptables.ChainForward, "KUBE-SERVICES", "kubernetes service portals", []string{"-m", "conntrack", "--ctstate", "NEW"}}
	bare := Jump{filter, utiliptables.ChainOutput, "KUBE-FIREWALL", "", nil}
	cases := []struct {
		name string
		save string
		j    Jump
		want bool
	}{
		{"as written", "-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, true},
		{"matches in another order", "-A FORWARD -m comment --comment \"kubernetes service portals\" -m conntrack --ctstate NEW -j KUBE-SERVICES", portals, true},
		{"tab separated, other matches", "-A FORWARD\t-i eth0 -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, true},
		{"in another built-in chain", "-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, false},
		{"in a chain of ours", "-A KUBE-FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, false},
		{"another comment", "-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"other\" -j KUBE-SERVICES", portals, false},
		{"without comment", "-A FORWARD -m conntrack --ctstate NEW -j KUBE-SERVICES", portals, false},
		{"another ctstate", "-A FORWARD -m conntrack --ctstate RELATED -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, false},
		{"negated ctstate", "-A FORWARD -m conntrack ! --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, false},
		{"without ctstate", "-A FORWARD -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES", portals, false},
		{"another target", "-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES-X", portals, false},
		{"goto is not a jump", "-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -g KUBE-SERVICES", portals, false},
		{"second of several rules", "-A FORWARD -j ACCEPT\n-A FORWARD -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n", portals, true},
		{"no comment wanted: any comment", "-A OUTPUT -m comment --comment \"kubelet's\" -j KUBE-FIREWALL", bare, true},
		{"no comment wanted: none", "-A OUTPUT -j KUBE-FIREWALL", bare, true},
		{"empty save", "", bare, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			save := "*filter\n:INPUT ACCEPT [0:0]\n" + tc.save + "\nCOMMIT\n"
			if got := ParseTableState([]byte(save)).HasJump(tc.j); got != tc.want {
				t.Errorf("HasJump in\n%s= %v, want %v", save, got, tc.want)
			}
			// A drift check collects the same rules with AddRule.
			var st TableState
			st.Reset()
			for _, line := range strings.Split(save, "\n") {
				if strings.HasPrefix(line, "-A ") {
					st.AddRule([]byte(line))
				}
			}
			if got := st.HasJump(tc.j); got != tc.want {
				t.Errorf("HasJump after AddRule = %v, want %v", got, tc.want)
			}
		})
	}
}

// MissingJumps names what a drift check reports, in order and for one table,
// and each jump's Rule, once in a save, makes the jump present.
func TestMissingJumps(t *testing.T) {
	st := ParseTableState([]byte("*filter\n" + testJumps[0].Rule() + "\nCOMMIT\n"))
	var got []string
	for _, j := range st.MissingJumps(filter, testJumps) {
		got = append(got, j.Name()+": "+j.Rule())
	}
	want := []string{
		`filter/FORWARD -j KUBE-A: -A FORWARD -m comment --comment "a portals" -j KUBE-A`,
		`filter/OUTPUT -j KUBE-FW: -A OUTPUT -j KUBE-FW`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("MissingJumps = %q, want %q", got, want)
	}

	var all strings.Builder
	for _, j := range testJumps {
		all.WriteString(j.Rule() + "\n")
	}
	for _, table := range []utiliptables.Table{filter, nat} {
		if m := ParseTableState([]byte(all.String())).MissingJumps(table, testJumps); len(m) != 0 {
			t.Errorf("%s: every jump's Rule saved, still missing %v", table, m)
		}
	}
}

func TestHasChain(t *testing.T) {
	st := ParseTableState([]byte("*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -j KUBE-MISSING\nCOMMIT\n"))
	for chain, want := range map[utiliptables.Chain]bool{"PREROUTING": true, "KUBE-SERVICES": true, "KUBE-MISSING": false, "KUBE": false} {
		if got := st.HasChain(chain); got != want {
			t.Errorf("HasChain(%s) = %v, want %v", chain, got, want)
		}
	}
}

func TestSplitRuleWords(t *testing.T) {
	cases := []struct {
		line string
		want []string
	}{
		{`-A INPUT -j KUBE-A`, []string{"-A", "INPUT", "-j", "KUBE-A"}},
		{"-A  INPUT\t-j KUBE-A ", []string{"-A", "INPUT", "-j", "KUBE-A"}},
		{`-A X --comment "two words" -j Y`, []string{"-A", "X", "--comment", "two words", "-j", "Y"}},
		{`-A X --comment "say \"hi\"" -j Y`, []string{"-A", "X", "--comment", `say "hi"`, "-j", "Y"}},
		{`-A X --comment ""`, []string{"-A", "X", "--comment", ""}},
		{`-A X "unterminated rest`, []string{"-A", "X", "unterminated rest"}},
		{``, nil},
	}
	for _, tc := range cases {
		if got := SplitRuleWords(tc.line); !slices.Equal(got, tc.want) {
			t.Errorf("SplitRuleWords(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestRestoreInput(t *testing.T) {
	empty := map[utiliptables.Table]*TableState{filter: ParseTableState(nil), nat: ParseTableState(nil)}
	withA := map[utiliptables.Table]*TableState{filter: ParseTableState([]byte("*filter\n:KUBE-A - [0:0]\nCOMMIT\n")), nat: ParseTableState(nil)}
	cases := []struct {
		name    string
		present map[utiliptables.Table]*TableState
		jumps   []Jump
		chains  []Chain
		want    string
	}{
		{"nothing missing", empty, nil, nil, ""},
		{"everything", empty, testJumps, testChains, complete},
		{"a present chain is not created", withA, testJumps[:2], nil,
			"*filter\n" + `-I INPUT -m conntrack --ctstate NEW -m comment --comment "a portals" -j KUBE-A` + "\n" +
				`-I FORWARD -m comment --comment "a portals" -j KUBE-A` + "\nCOMMIT\n"},
		{"chains only, nat only", empty, nil, []Chain{{nat, "KUBE-C"}, {nat, "KUBE-C"}}, "*nat\n-N KUBE-C\nCOMMIT\n"},
		{"filter comes first", empty, []Jump{testJumps[3], testJumps[2]}, nil,
			"*filter\n-N KUBE-FW\n-I OUTPUT -j KUBE-FW\nCOMMIT\n*nat\n-N KUBE-B\n" + `-I PREROUTING -m comment --comment "b rules" -j KUBE-B` + "\nCOMMIT\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := string(RestoreInput(tc.present, tc.jumps, tc.chains)); got != tc.want {
				t.Errorf("RestoreInput:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

// Saves are read from the kernel: whatever they hold, parsing does not
// panic, and without quotes the words are strings.Fields'.
func FuzzParseTableState(f *testing.F) {
	for _, s := range []string{
		"-A INPUT -m conntrack --ctstate NEW -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES",
		`-A X "unterminated`, `-A X "a\"b" c`, ``, `"`, `\`, "-A\tINPUT  -j", "-A ", "-A INPUT",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		words := SplitRuleWords(line)
		if !strings.ContainsAny(line, "\"\\") && !strings.ContainsAny(line, "\n\r\v\f\u0085\u00a0") {
			if got, want := strings.Join(words, "|"), strings.Join(strings.Fields(line), "|"); got != want {
				t.Errorf("SplitRuleWords(%q) = %q, want %q", line, got, want)
			}
		}
		st := ParseTableState([]byte(line))
		st.AddRule([]byte(line))
		for _, j := range testJumps {
			_ = st.HasJump(j)
		}
	})
}
