package testing

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/net-utils/iptables"
	"k8s.io/utils/ptr"
)

func TestParseRule(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rule      string
		nonStrict bool
		want      *Rule
		err       string
	}{{
		name: "health check node port",
		rule: `-A KUBE-NODEPORTS -m comment --comment "ns2/svc2:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT`,
		want: &Rule{
			Chain:           "KUBE-NODEPORTS",
			Comment:         &IPTablesValue{Value: "ns2/svc2:p80 health check node port"},
			Protocol:        &IPTablesValue{Value: "tcp"},
			DestinationPort: &IPTablesValue{Value: "30000"},
			Jump:            &IPTablesValue{Value: "ACCEPT"},
		},
	}, {
		name: "unquoted comment",
		rule: `-A KUBE-SVC-XPGD46QRK7WJZT7O -m comment --comment ns1/svc1:p80 -j KUBE-SEP-SXIVWICOYRO3J4NJ`,
		want: &Rule{
			Chain:   "KUBE-SVC-XPGD46QRK7WJZT7O",
			Comment: &IPTablesValue{Value: "ns1/svc1:p80"},
			Jump:    &IPTablesValue{Value: "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		},
	}, {
		name: "quote with escapes, and quotes mid-word",
		rule: `-A X -m comment --comment "say \"hi\" \\ bye" -m comment --comment a"b c"d -j ACCEPT`,
		want: &Rule{
			Chain:   "X",
			Comment: &IPTablesValue{Value: "ab cd"},
			Jump:    &IPTablesValue{Value: "ACCEPT"},
		},
	}, {
		name: "negated source CIDR and destination",
		rule: `-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
		want: &Rule{
			Chain:              "KUBE-SVC-X",
			Comment:            &IPTablesValue{Value: "ns1/svc1:p80 cluster IP"},
			Protocol:           &IPTablesValue{Value: "tcp"},
			DestinationAddress: &IPTablesValue{Value: "172.30.0.41"},
			DestinationPort:    &IPTablesValue{Value: "80"},
			SourceAddress:      &IPTablesValue{Negated: true, Value: "10.0.0.0/8"},
			Jump:               &IPTablesValue{Value: "KUBE-MARK-MASQ"},
		},
	}, {
		name: "addrtype",
		rule: `-A KUBE-SERVICES -m addrtype ! --dst-type LOCAL -m addrtype --src-type LOCAL -j KUBE-NODEPORTS`,
		want: &Rule{
			Chain:           "KUBE-SERVICES",
			DestinationType: &IPTablesValue{Negated: true, Value: "LOCAL"},
			SourceType:      &IPTablesValue{Value: "LOCAL"},
			Jump:            &IPTablesValue{Value: "KUBE-NODEPORTS"},
		},
	}, {
		name: "affinity check as iptables-save prints it",
		rule: `-A KUBE-SVC-X -m comment --comment ns1/svc1:p80 -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-A --mask 255.255.255.255 --rsource -j KUBE-SEP-A`,
		want: &Rule{
			Chain:           "KUBE-SVC-X",
			Comment:         &IPTablesValue{Value: "ns1/svc1:p80"},
			AffinityCheck:   ptr.To(true),
			AffinitySeconds: &IPTablesValue{Value: "10800"},
			AffinityReap:    ptr.To(true),
			AffinityName:    &IPTablesValue{Value: "KUBE-SEP-A"},
			AffinityMask:    &IPTablesValue{Value: "255.255.255.255"},
			AffinityRSource: ptr.To(true),
			Jump:            &IPTablesValue{Value: "KUBE-SEP-A"},
		},
	}, {
		name: "affinity set and DNAT",
		rule: `-A KUBE-SEP-A -p tcp -m comment --comment ns1/svc1:p80 -m recent --set --name KUBE-SEP-A --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.180.0.1:80`,
		want: &Rule{
			Chain:           "KUBE-SEP-A",
			Protocol:        &IPTablesValue{Value: "tcp"},
			Comment:         &IPTablesValue{Value: "ns1/svc1:p80"},
			AffinitySet:     ptr.To(true),
			AffinityName:    &IPTablesValue{Value: "KUBE-SEP-A"},
			AffinityMask:    &IPTablesValue{Value: "255.255.255.255"},
			AffinityRSource: ptr.To(true),
			Jump:            &IPTablesValue{Value: "DNAT"},
			DNATDestination: &IPTablesValue{Value: "10.180.0.1:80"},
		},
	}, {
		name: "negated flag",
		rule: `-A TEST -m recent ! --rcheck -j KUBE-SEP-A`,
		want: &Rule{Chain: "TEST", AffinityCheck: ptr.To(false), Jump: &IPTablesValue{Value: "KUBE-SEP-A"}},
	}, {
		name: "statistic",
		rule: `-A KUBE-SVC-4 -m comment --comment ns4/svc4:p80 -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-U`,
		want: &Rule{
			Chain:         "KUBE-SVC-4",
			Comment:       &IPTablesValue{Value: "ns4/svc4:p80"},
			StatisticMode: &IPTablesValue{Value: "random"},
			Probability:   &IPTablesValue{Value: "0.50000000000"},
			Jump:          &IPTablesValue{Value: "KUBE-SEP-U"},
		},
	}, {
		name: "mark match and MARK targets",
		rule: `-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j MARK --xor-mark 0x4000 --or-mark 0x1 --set-xmark 0x4000/0x4000`,
		want: &Rule{
			Chain:     "KUBE-POSTROUTING",
			MarkCheck: &IPTablesValue{Negated: true, Value: "0x4000/0x4000"},
			Jump:      &IPTablesValue{Value: "MARK"},
			XorMark:   &IPTablesValue{Value: "0x4000"},
			OrMark:    &IPTablesValue{Value: "0x1"},
			SetXMark:  &IPTablesValue{Value: "0x4000/0x4000"},
		},
	}, {
		name: "masquerade random-fully",
		rule: `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`,
		want: &Rule{
			Chain:       "KUBE-POSTROUTING",
			Comment:     &IPTablesValue{Value: "kubernetes service traffic requiring SNAT"},
			Jump:        &IPTablesValue{Value: "MASQUERADE"},
			RandomFully: ptr.To(true),
		},
	}, {
		name: "conntrack, interfaces, reject",
		rule: `-A KUBE-FORWARD -i cni0 ! -o eth0+ -m conntrack --ctstate RELATED,ESTABLISHED -j REJECT --reject-with icmp-port-unreachable`,
		want: &Rule{
			Chain:        "KUBE-FORWARD",
			InInterface:  &IPTablesValue{Value: "cni0"},
			OutInterface: &IPTablesValue{Negated: true, Value: "eth0+"},
			CTStateCheck: &IPTablesValue{Value: "RELATED,ESTABLISHED"},
			Jump:         &IPTablesValue{Value: "REJECT"},
			RejectWith:   &IPTablesValue{Value: "icmp-port-unreachable"},
		},
	}, {
		name: "long option spellings",
		rule: `--append X --source 1.2.3.4 --destination 5.6.7.8 --protocol udp --destination-port 53 --jump ACCEPT`,
		want: &Rule{
			Chain:              "X",
			SourceAddress:      &IPTablesValue{Value: "1.2.3.4"},
			DestinationAddress: &IPTablesValue{Value: "5.6.7.8"},
			Protocol:           &IPTablesValue{Value: "udp"},
			DestinationPort:    &IPTablesValue{Value: "53"},
			Jump:               &IPTablesValue{Value: "ACCEPT"},
		},
	}, {
		name: "ipvs mode: set, physdev, ipvs, nfacct",
		rule: `-A KUBE-SERVICES -m set ! --match-set KUBE-CLUSTER-IP dst,dst -m physdev ! --physdev-is-in -m ipvs --vaddr 10.0.0.1 --vport 80 --vproto tcp -m nfacct --nfacct-name localhost_nps_accepted_pkts -j KUBE-MARK-MASQ`,
		want: &Rule{
			Chain:         "KUBE-SERVICES",
			MatchSet:      &IPTablesValue{Negated: true, Value: "KUBE-CLUSTER-IP"},
			MatchSetFlags: "dst,dst",
			PhysDevIsIn:   ptr.To(false),
			IPVSVAddr:     &IPTablesValue{Value: "10.0.0.1"},
			IPVSVPort:     &IPTablesValue{Value: "80"},
			IPVSVProto:    &IPTablesValue{Value: "tcp"},
			NFAcctName:    &IPTablesValue{Value: "localhost_nps_accepted_pkts"},
			Jump:          &IPTablesValue{Value: "KUBE-MARK-MASQ"},
		},
	}, {
		name:      "unknown options kept when not strict",
		rule:      `-A X -m tcp --tcp-flags SYN,RST SYN ! --syn -m multiport --dports 80,443 -j ACCEPT`,
		nonStrict: true,
		want: &Rule{
			Chain:            "X",
			OtherArgs:        []string{"--tcp-flags", "SYN,RST", "SYN", "!", "--syn"},
			DestinationPorts: &IPTablesValue{Value: "80,443"},
			Jump:             &IPTablesValue{Value: "ACCEPT"},
		},
	}, {
		name: "unknown option is an error when strict",
		rule: `-A X -m tcp --tcp-flags SYN,RST SYN -j ACCEPT`,
		err:  `unrecognized parameter "--tcp-flags"`,
	}, {
		name: "no match rules",
		rule: `-A KUBE-NODEPORTS`,
		err:  `(no match rules)`,
	}, {
		name: "only -A",
		rule: `-D KUBE-NODEPORTS -j ACCEPT`,
		err:  `(does not start with "-A CHAIN")`,
	}, {
		name: "empty",
		rule: ``,
		err:  `(does not start with "-A CHAIN")`,
	}, {
		name:      "cannot negate a jump",
		rule:      `-A X ! -j ACCEPT`,
		nonStrict: true,
		err:       `cannot negate parameter "-j"`,
	}, {
		name:      "missing argument",
		rule:      `-A X -j`,
		nonStrict: true,
		err:       `parameter "-j" requires an argument`,
	}, {
		name:      "missing module",
		rule:      `-A X -j ACCEPT -m`,
		nonStrict: true,
		err:       `parameter "-m" requires an argument`,
	}, {
		name:      "match-set without flags",
		rule:      `-A X -m set --match-set FOO`,
		nonStrict: true,
		err:       `requires a set name and flags`,
	}, {
		name:      "dangling negation",
		rule:      `-A X -j ACCEPT !`,
		nonStrict: true,
		err:       `"!" at the end`,
	}, {
		name:      "double negation",
		rule:      `-A X ! ! -s 1.2.3.4 -j ACCEPT`,
		nonStrict: true,
		err:       `two "!" in a row`,
	}, {
		name:      "unterminated quote",
		rule:      `-A X -m comment --comment "oops -j ACCEPT`,
		nonStrict: true,
		err:       `unterminated quote`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseRule(tc.rule, !tc.nonStrict)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error containing %q, got %v (rule %+v)", tc.err, err, got)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			tc.want.Raw = tc.rule
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("wrong parse (-want +got):\n%s", diff)
			}
		})
	}
}

func TestIPTablesValue(t *testing.T) {
	for _, tc := range []struct {
		v     IPTablesValue
		cmp   string
		match bool
		str   string
	}{
		{IPTablesValue{Value: "tcp"}, "tcp", true, `"tcp"`},
		{IPTablesValue{Value: "tcp"}, "udp", false, `"tcp"`},
		{IPTablesValue{Negated: true, Value: "LOCAL"}, "LOCAL", false, `NOT "LOCAL"`},
		{IPTablesValue{Negated: true, Value: "LOCAL"}, "", true, `NOT "LOCAL"`},
	} {
		if got := tc.v.Matches(tc.cmp); got != tc.match {
			t.Errorf("%v.Matches(%q) = %v, want %v", &tc.v, tc.cmp, got, tc.match)
		}
		if got := tc.v.String(); got != tc.str {
			t.Errorf("String() = %q, want %q", got, tc.str)
		}
	}
}

func TestSplitAndJoinWords(t *testing.T) {
	for _, words := range [][]string{
		{"-A", "X", "--comment", "a b"},
		{"--comment", `say "hi"`, `back\slash`, ""},
		{"plain", "words"},
		{"tab\there", "new\nline"},
	} {
		joined := joinWords(words)
		got, err := splitWords(joined)
		if err != nil {
			t.Fatalf("splitWords(%q): %v", joined, err)
		}
		if !reflect.DeepEqual(got, words) {
			t.Errorf("round trip of %q via %q gave %q", words, joined, got)
		}
	}
}

func mustParseRule(t testing.TB, rule string) *Rule {
	t.Helper()
	r, err := ParseRule(rule, false)
	if err != nil {
		t.Fatalf("bad test rule %q: %v", rule, err)
	}
	return r
}

func TestParseIPTablesDump(t *testing.T) {
	for _, tc := range []struct {
		name  string
		input string
		want  func(t *testing.T) *IPTablesDump
		// For errors: a substring and the line number.
		err  string
		line int
	}{{
		name: "iptables-save output with policies, counters, comments and blank lines",
		input: `# Generated by iptables-save v1.8.9 (nf_tables) on Wed Nov 25 23:41:46 2026
*nat
:PREROUTING ACCEPT [12:720]
:POSTROUTING ACCEPT [0:0]

:KUBE-SERVICES - [0:0]
  -A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
COMMIT
# Completed on Wed Nov 25 23:41:46 2026
*filter
:INPUT DROP [1:2]
COMMIT
`,
		want: func(t *testing.T) *IPTablesDump {
			return &IPTablesDump{Tables: []Table{{
				Name: "nat",
				Chains: []Chain{
					{Name: "PREROUTING", Policy: "ACCEPT", Packets: 12, Bytes: 720, Rules: []*Rule{
						mustParseRule(t, `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`),
					}},
					{Name: "POSTROUTING", Policy: "ACCEPT"},
					{Name: "KUBE-SERVICES", Rules: []*Rule{
						mustParseRule(t, `-A KUBE-SERVICES -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`),
					}},
				},
			}, {
				Name:   "filter",
				Chains: []Chain{{Name: "INPUT", Policy: "DROP", Packets: 1, Bytes: 2}},
			}}}
		},
	}, {
		name: "restore input with deletions (before and after rules)",
		input: `*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-B - [0:0]
-X KUBE-SVC-A
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-X KUBE-SEP-B
COMMIT
`,
		want: func(t *testing.T) *IPTablesDump {
			return &IPTablesDump{Tables: []Table{{
				Name: "nat",
				Chains: []Chain{
					{Name: "KUBE-SERVICES", Rules: []*Rule{mustParseRule(t, `-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`)}},
					{Name: "KUBE-SVC-A", Deleted: true},
					{Name: "KUBE-SEP-B", Deleted: true},
				},
			}}}
		},
	}, {
		name: "insert, delete, flush, new chain, policy, zero, redeclare",
		input: `*filter
:INPUT ACCEPT [5:5]
:A - [0:0]
-A A -j ACCEPT
-I A -s 1.1.1.1 -j DROP
-I A 2 -m comment --comment "two words" -j RETURN
-A A -j REJECT
-D A -j REJECT
-D A 1
-N B
-A B -j ACCEPT
-F B
-P INPUT DROP
-Z INPUT
:C - [0:0]
-A C -j ACCEPT
:C - [0:0]
-A C -j DROP
COMMIT
`,
		want: func(t *testing.T) *IPTablesDump {
			return &IPTablesDump{Tables: []Table{{
				Name: "filter",
				Chains: []Chain{
					{Name: "INPUT", Policy: "DROP"},
					{Name: "A", Rules: []*Rule{
						mustParseRule(t, `-A A -m comment --comment "two words" -j RETURN`),
						mustParseRule(t, `-A A -j ACCEPT`),
					}},
					{Name: "B"},
					{Name: "C", Rules: []*Rule{mustParseRule(t, `-A C -j DROP`)}},
				},
			}}}
		},
	}, {
		name:  "empty input",
		input: "\n# nothing\n",
		want:  func(t *testing.T) *IPTablesDump { return &IPTablesDump{} },
	}, {
		name:  "no COMMIT line",
		input: "*filter\n:A - [0:0]\n-A A -j ACCEPT\n",
		err:   "no COMMIT line?", line: 3,
	}, {
		name:  "second table without COMMIT",
		input: "*filter\nCOMMIT\n*nat\n:A - [0:0]\n\n",
		err:   "no COMMIT line?", line: 5,
	}, {
		name:  "junk instead of a table",
		input: "*filter\nCOMMIT\n*nat\nCOMMIT\njunk\n",
		err:   `table 3 starts with "junk"`, line: 5,
	}, {
		name:  "table header inside a table",
		input: "*filter\n*nat\nCOMMIT\n",
		err:   "starts before the previous table's COMMIT", line: 2,
	}, {
		name:  "add to undeclared chain",
		input: "*filter\n:A - [0:0]\n-A KUBE-FORWARD -j ACCEPT\nCOMMIT\n",
		err:   `no such chain "KUBE-FORWARD"`, line: 3,
	}, {
		name:  "add to deleted chain",
		input: "*filter\n:A - [0:0]\n-X A\n-A A -j ACCEPT\nCOMMIT\n",
		err:   `cannot add rules to deleted chain "A"`, line: 4,
	}, {
		name:  "delete non-empty chain",
		input: "*filter\n:KUBE-FORWARD - [0:0]\n-A KUBE-FORWARD -j ACCEPT\n-X KUBE-FORWARD\nCOMMIT\n",
		err:   `cannot delete chain "KUBE-FORWARD" after adding rules`, line: 4,
	}, {
		name:  "delete undeclared chain",
		input: "*filter\n-X NOPE\nCOMMIT\n",
		err:   `no such chain "NOPE"`, line: 2,
	}, {
		name:  "unknown command",
		input: "*filter\n:KUBE-FORWARD - [0:0]\n-Q KUBE-FORWARD -j ACCEPT\nCOMMIT\n",
		err:   `"-Q KUBE-FORWARD`, line: 3,
	}, {
		name:  "bad rule",
		input: "*filter\n:A - [0:0]\n-A A ! -j ACCEPT\nCOMMIT\n",
		err:   `cannot negate parameter "-j"`, line: 3,
	}, {
		name:  "unterminated quote",
		input: "*filter\n:A - [0:0]\n-A A -m comment --comment \"x -j ACCEPT\nCOMMIT\n",
		err:   `unterminated quote`, line: 3,
	}, {
		name:  "bad declaration",
		input: "*filter\n:A\nCOMMIT\n",
		err:   `bad chain declaration`, line: 2,
	}, {
		name:  "bad counters",
		input: "*filter\n:A - [x:0]\nCOMMIT\n",
		err:   `bad counters`, line: 2,
	}, {
		name:  "delete a rule that is not there",
		input: "*filter\n:A - [0:0]\n-D A -j ACCEPT\nCOMMIT\n",
		err:   `does a matching rule exist`, line: 3,
	}, {
		name:  "insert past the end",
		input: "*filter\n:A - [0:0]\n-I A 3 -j ACCEPT\nCOMMIT\n",
		err:   `cannot insert rule at position 3`, line: 3,
	}, {
		name:  "new chain that exists",
		input: "*filter\n:A - [0:0]\n-N A\nCOMMIT\n",
		err:   `chain "A" already exists`, line: 3,
	}, {
		name:  "garbage line",
		input: "*filter\nhello\nCOMMIT\n",
		err:   `cannot parse "hello"`, line: 2,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseIPTablesDump(tc.input)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("want error containing %q, got %v", tc.err, err)
				}
				var pErr iptables.ParseError
				if !errors.As(err, &pErr) {
					t.Fatalf("error %v is not an iptables.ParseError", err)
				}
				if pErr.Line() != tc.line {
					t.Errorf("error %q reports line %d, want %d", err, pErr.Line(), tc.line)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if diff := cmp.Diff(tc.want(t), got); diff != "" {
				t.Errorf("wrong dump (-want +got):\n%s", diff)
			}
			// What String prints must parse back to the same dump.
			again, err := ParseIPTablesDump(got.String())
			if err != nil {
				t.Fatalf("re-parsing String() output: %v\n%s", err, got.String())
			}
			if diff := cmp.Diff(got, again); diff != "" {
				t.Errorf("String() did not round-trip (-first +second):\n%s", diff)
			}
		})
	}
}

func TestDumpString(t *testing.T) {
	input := `*nat
:PREROUTING ACCEPT [1:2]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-X KUBE-SVC-A
COMMIT
`
	dump, err := ParseIPTablesDump(input)
	if err != nil {
		t.Fatal(err)
	}
	if got := dump.String(); got != input {
		t.Errorf("String() =\n%s\nwant\n%s", got, input)
	}
	if _, err := dump.GetChain("nat", "NOPE"); !iptables.IsNotFoundError(err) {
		t.Errorf("GetChain of a missing chain: want a not-found error, got %v", err)
	}
	if _, err := dump.GetTable("raw"); err == nil {
		t.Errorf("GetTable of a missing table: want an error")
	}
}

// bigDump builds iptables-restore input shaped like kube-proxy's for n services,
// about 10 lines per service.
func bigDump(n int) string {
	var b strings.Builder
	b.WriteString("*filter\n:KUBE-SERVICES - [0:0]\n:KUBE-FORWARD - [0:0]\n")
	b.WriteString("-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP\n")
	b.WriteString("COMMIT\n*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n:KUBE-POSTROUTING - [0:0]\n")
	for i := range n {
		fmt.Fprintf(&b, ":KUBE-SVC-%d - [0:0]\n:KUBE-SEP-%d - [0:0]\n", i, i)
	}
	b.WriteString("-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000\n")
	b.WriteString("-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN\n")
	for i := range n {
		ip := fmt.Sprintf("172.%d.%d.%d", 16+i/65536, (i/256)%256, i%256)
		fmt.Fprintf(&b, "-A KUBE-SERVICES -m comment --comment \"ns%d/svc%d:p80 cluster IP\" -m tcp -p tcp -d %s --dport 80 -j KUBE-SVC-%d\n", i, i, ip, i)
		fmt.Fprintf(&b, "-A KUBE-SVC-%d -m comment --comment \"ns%d/svc%d:p80 cluster IP\" -m tcp -p tcp -d %s --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ\n", i, i, i, ip)
		fmt.Fprintf(&b, "-A KUBE-SVC-%d -m comment --comment ns%d/svc%d:p80 -m recent --name KUBE-SEP-%d --rcheck --seconds 10800 --reap -j KUBE-SEP-%d\n", i, i, i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SVC-%d -m comment --comment ns%d/svc%d:p80 -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-%d\n", i, i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SVC-%d -m comment --comment ns%d/svc%d:p80 -j KUBE-SEP-%d\n", i, i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SEP-%d -m comment --comment ns%d/svc%d:p80 -s 10.180.0.1 -j KUBE-MARK-MASQ\n", i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SEP-%d -m comment --comment ns%d/svc%d:p80 -m recent --name KUBE-SEP-%d --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.1:80\n", i, i, i, i)
		fmt.Fprintf(&b, "-A KUBE-SEP-%d -m comment --comment ns%d/svc%d:p80 -m tcp -p tcp -j DNAT --to-destination 10.180.0.2:80\n", i, i, i)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// BenchmarkParseIPTablesDump parses a dump of about 100k lines.
func BenchmarkParseIPTablesDump(b *testing.B) {
	data := bigDump(10000)
	b.SetBytes(int64(len(data)))
	b.ReportMetric(float64(strings.Count(data, "\n")), "lines")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseIPTablesDump(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFakeRestore measures a full noflush restore of about 100k lines into the
// fake, as a proxier test at 10k services does per sync.
func BenchmarkFakeRestore(b *testing.B) {
	data := []byte(bigDump(10000))
	f := NewFake()
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if err := f.RestoreAll(data, iptables.NoFlushTables, iptables.NoRestoreCounters); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzParseIPTablesDump(f *testing.F) {
	f.Add(bigDump(2))
	f.Add("*nat\n:A - [0:0]\n-X A\nCOMMIT\n")
	f.Add("*filter\n:A - [0:0]\n-I A 1 -m comment --comment \"a \\\" b\" -j DROP\n-D A 1\nCOMMIT\n")
	f.Add("*filter\n:INPUT ACCEPT [1:2]\n-P INPUT DROP\n-F\n-X\n-Z\nCOMMIT\n")
	f.Add("*x\n-A\nCOMMIT")
	f.Add("\"")
	f.Fuzz(func(t *testing.T, data string) {
		dump, err := ParseIPTablesDump(data)
		if err != nil {
			var pErr iptables.ParseError
			if !errors.As(err, &pErr) || pErr.Line() < 1 {
				t.Fatalf("error without a line number: %v", err)
			}
			return
		}
		// Whatever parses must print as something that parses to the same dump.
		again, err := ParseIPTablesDump(dump.String())
		if err != nil {
			t.Fatalf("String() output does not parse: %v\n%s", err, dump.String())
		}
		if again.String() != dump.String() {
			t.Fatalf("String() not stable:\n%s\nvs\n%s", dump.String(), again.String())
		}
	})
}

func FuzzSplitWords(f *testing.F) {
	f.Add(`-A X -m comment --comment "a \"b\" c" -j ACCEPT`)
	f.Add(`a"b c"d "" "\\" x`)
	f.Add(`"unterminated`)
	f.Fuzz(func(t *testing.T, line string) {
		words, err := splitWords(line)
		if err != nil {
			return
		}
		again, err := splitWords(joinWords(words))
		if err != nil {
			t.Fatalf("joinWords(%q) = %q does not split: %v", words, joinWords(words), err)
		}
		if !reflect.DeepEqual(words, again) && !(len(words) == 0 && len(again) == 0) {
			t.Fatalf("split(join(%q)) = %q", words, again)
		}
	})
}
