//go:build linux

package iptables

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// This file adapts the product's packet tracer (pkg/proxy/trace) to the
// iptables tests: a ruleset is iptables-save text (the fake's dump or the
// kernel's), and every outcome the tracer reports is checked here. Tests
// assert behaviour through it instead of comparing rule text.
//
// It is strict on purpose: a rule the tracer reports as not modelled
// (UNKNOWN) is an error, so a rule it cannot judge fails the test instead
// of passing it.

// ruleset is tables -> chains -> rules, as parsed from iptables-save text.
type ruleset map[string]map[string][]tRule

// tRule is one rule split into words ("-A CHAIN" removed).
type tRule struct {
	chain string
	words []string
	raw   string
}

// splitWords splits a rule line into words, honouring double quotes.
func splitWords(line string) ([]string, error) { return trace.SplitIPTablesWords(line) }

// parseRuleset reads iptables-save (or restore) text.
func parseRuleset(text string) (ruleset, error) {
	ipt, err := trace.ParseIPTablesSave(text)
	if err != nil {
		return nil, err
	}
	rs := ruleset{}
	for table, chains := range ipt.Tables {
		rs[table] = map[string][]tRule{}
		for name, ch := range chains {
			rules := []tRule{}
			for _, r := range ch.Rules {
				rules = append(rules, tRule{chain: name, words: r.Words, raw: r.Raw})
			}
			rs[table][name] = rules
		}
	}
	return rs, nil
}

// text renders rs back into iptables-save text for the tracer.
func (rs ruleset) text() string {
	var b strings.Builder
	for table, chains := range rs {
		fmt.Fprintf(&b, "*%s\n", table)
		for name := range chains {
			policy := "-"
			if strings.ToUpper(name) == name && !strings.Contains(name, "-") {
				policy = "ACCEPT"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", name, policy)
		}
		for _, rules := range chains {
			for _, r := range rules {
				b.WriteString(r.raw + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// ingress says where a packet comes from.
type ingress int

const (
	fromPod      ingress = iota // a pod on this node, through its interface
	fromExternal                // another host, through the node's uplink
	fromHost                    // a process in the node's own network namespace
)

func (i ingress) String() string { return i.origin().String() }

func (i ingress) origin() trace.Origin {
	return [...]trace.Origin{trace.FromPod, trace.FromExternal, trace.FromHost}[i]
}

// packet is what is traced.
type packet struct {
	from  ingress
	iif   string // input interface for fromPod/fromExternal
	src   string
	dst   string
	proto string // "tcp", "udp", "sctp"
	dport int
	// invalid marks a packet conntrack considers INVALID.
	invalid bool
	// dropPolicy gives filter INPUT and FORWARD a DROP policy, as on a
	// locked-down node, so only explicit ACCEPTs let the packet through.
	dropPolicy bool
}

// outcome is one possible fate of a packet.
type outcome struct {
	verdict string // ACCEPT, DROP, REJECT
	dnat    string // "ip:port" when DNATed (IPv6 bracketed)
	masq    bool
	prob    float64
	// recentSet lists the -m recent names the packet's source was added to.
	recentSet []string
	trace     []string
}

func (o outcome) String() string {
	s := o.verdict
	if o.dnat != "" {
		s += " dnat=" + o.dnat
	}
	if o.masq {
		s += " masq"
	}
	return s
}

// tracer evaluates packets against a ruleset.
type tracer struct {
	ipt  *trace.IPTables
	err  error
	node trace.Node
}

func newTracer(rs ruleset, nodeIPs ...string) *tracer {
	t := &tracer{node: trace.Node{Recent: map[string][]netip.Addr{}}}
	t.ipt, t.err = trace.ParseIPTablesSave(rs.text())
	for _, ip := range nodeIPs {
		t.node.LocalAddrs = append(t.node.LocalAddrs, netip.MustParseAddr(ip))
	}
	return t
}

// trace follows pk through the hooks and returns its possible outcomes,
// merged by (verdict, dnat, masq) and sorted by them.
func (t *tracer) trace(pk packet) ([]outcome, error) {
	if t.err != nil {
		return nil, t.err
	}
	src, err := netip.ParseAddr(pk.src)
	if err != nil {
		return nil, err
	}
	dst, err := netip.ParseAddr(pk.dst)
	if err != nil {
		return nil, err
	}
	if pk.dport < 0 || pk.dport > 65535 {
		return nil, fmt.Errorf("bad port %d", pk.dport)
	}
	ipt := t.ipt
	if pk.dropPolicy {
		ipt = ipt.WithPolicy("filter", "INPUT", "DROP").WithPolicy("filter", "FORWARD", "DROP")
	}
	res, err := ipt.Trace(trace.Packet{Src: src, Dst: dst, Protocol: pk.proto, Port: uint16(pk.dport),
		From: pk.from.origin(), InInterface: pk.iif, Invalid: pk.invalid}, &t.node)
	if err != nil {
		return nil, err
	}
	if res.HasUnknown() {
		var b strings.Builder
		for _, u := range res.Unknowns {
			fmt.Fprintf(&b, "\n  %s: %q: %s", u.Where, u.Rule, u.Reason)
		}
		return nil, fmt.Errorf("the tracer cannot judge the rules this packet meets:%s", b.String())
	}
	out := make([]outcome, 0, len(res.Outcomes))
	for _, o := range res.Outcomes {
		oc := outcome{verdict: string(o.Verdict), dnat: o.DNAT, masq: o.Masquerade, prob: o.Probability}
		for _, name := range o.AffinitySet {
			oc.recentSet = append(oc.recentSet, strings.TrimPrefix(name, "recent:"))
		}
		for _, st := range o.Path {
			if st.Rule != "" {
				oc.trace = append(oc.trace, st.Rule)
			}
		}
		out = append(out, oc)
	}
	return out, nil
}

// remember records the -m recent --set effects of an outcome, as the kernel
// would after the packet went that way.
func (t *tracer) remember(src string, o outcome) {
	a := netip.MustParseAddr(src)
	for _, name := range o.recentSet {
		if !slices.Contains(t.node.Recent[name], a) {
			t.node.Recent[name] = append(t.node.Recent[name], a)
		}
	}
}

// summary renders outcomes compactly, e.g. "ACCEPT dnat=10.0.0.1:80 masq (50%)".
func summary(outs []outcome) []string {
	var s []string
	for _, o := range outs {
		s = append(s, fmt.Sprintf("%s (%.0f%%)", o.String(), o.prob*100))
	}
	return s
}

func TestSplitWords(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  bool
	}{
		{in: `-A X -j Y`, want: []string{"-A", "X", "-j", "Y"}},
		{in: `-A X -m comment --comment "a b c" -j Y`, want: []string{"-A", "X", "-m", "comment", "--comment", "a b c", "-j", "Y"}},
		{in: `-A X  -s   1.2.3.4`, want: []string{"-A", "X", "-s", "1.2.3.4"}},
		{in: `-A X --comment "unterminated`, err: true},
		{in: `-A X --comment "esc \" q"`, want: []string{"-A", "X", "--comment", `esc " q`}},
	}
	for _, tc := range tests {
		got, err := splitWords(tc.in)
		if (err != nil) != tc.err {
			t.Errorf("splitWords(%q) error = %v, want error %v", tc.in, err, tc.err)
			continue
		}
		if !tc.err && !slices.Equal(got, tc.want) {
			t.Errorf("splitWords(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// The tracer itself must be right, or every behaviour test built on it is
// worthless. These hand-written rulesets check its semantics directly.
func TestTracerSemantics(t *testing.T) {
	base := `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:SVC - [0:0]
:SEP1 - [0:0]
:SEP2 - [0:0]
:MARKQ - [0:0]
:POST - [0:0]
-A PREROUTING -j SVC
-A OUTPUT -j SVC
-A POSTROUTING -j POST
-A POST -m mark ! --mark 0x4000/0x4000 -j RETURN
-A POST -j MARK --xor-mark 0x4000
-A POST -j MASQUERADE --random-fully
-A MARKQ -j MARK --or-mark 0x4000
-A SVC -d 10.0.0.1/32 -p tcp -m tcp --dport 80 ! -s 10.1.0.0/16 -j MARKQ
-A SVC -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -m statistic --mode random --probability 0.2500000000 -j SEP1
-A SVC -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j SEP2
-A SEP1 -p tcp -m tcp -j DNAT --to-destination 10.1.0.5:8080
-A SEP2 -p tcp -m tcp -j DNAT --to-destination 10.1.0.6:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -d 10.9.9.9/32 -j REJECT
-A FORWARD -m conntrack --ctstate INVALID -j DROP
-A INPUT -i eth+ -p udp -j DROP
COMMIT
`
	rs, err := parseRuleset(base)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		pk   packet
		want []string
	}{
		{"probabilities and masquerade of off-cluster source", packet{from: fromExternal, iif: "eth0", src: "192.168.0.1", dst: "10.0.0.1", proto: "tcp", dport: 80},
			[]string{"ACCEPT dnat=10.1.0.5:8080 masq (25%)", "ACCEPT dnat=10.1.0.6:8080 masq (75%)"}},
		{"in-cluster source not masqueraded", packet{from: fromPod, iif: "veth1", src: "10.1.0.9", dst: "10.0.0.1", proto: "tcp", dport: 80},
			[]string{"ACCEPT dnat=10.1.0.5:8080 (25%)", "ACCEPT dnat=10.1.0.6:8080 (75%)"}},
		{"wrong port untouched", packet{from: fromPod, iif: "veth1", src: "10.1.0.9", dst: "10.0.0.1", proto: "tcp", dport: 81},
			[]string{"ACCEPT (100%)"}},
		{"wrong protocol untouched", packet{from: fromPod, iif: "veth1", src: "10.1.0.9", dst: "10.0.0.1", proto: "udp", dport: 80},
			[]string{"ACCEPT (100%)"}},
		{"reject in forward", packet{from: fromPod, iif: "veth1", src: "10.1.0.9", dst: "10.9.9.9", proto: "tcp", dport: 80},
			[]string{"REJECT (100%)"}},
		{"invalid dropped and not NATed", packet{from: fromPod, iif: "veth1", src: "10.1.0.9", dst: "10.0.0.1", proto: "tcp", dport: 80, invalid: true},
			[]string{"DROP (100%)"}},
		{"interface wildcard on input", packet{from: fromExternal, iif: "eth0", src: "192.168.0.1", dst: "127.0.0.1", proto: "udp", dport: 53},
			[]string{"DROP (100%)"}},
		{"host traffic has no input interface", packet{from: fromHost, src: "192.168.0.1", dst: "127.0.0.1", proto: "udp", dport: 53},
			[]string{"ACCEPT (100%)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			outs, err := newTracer(rs, "192.168.0.10").trace(tc.pk)
			if err != nil {
				t.Fatal(err)
			}
			if got := summary(outs); !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// Unknown options must fail loudly.
	for _, bad := range []string{
		"*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m frobnicate -j ACCEPT\nCOMMIT\n",
		"*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING --frob 1 -j ACCEPT\nCOMMIT\n",
		"*nat\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -j NOWHERE\nCOMMIT\n",
	} {
		rs, err := parseRuleset(bad)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := newTracer(rs).trace(packet{from: fromExternal, iif: "eth0", src: "1.1.1.1", dst: "2.2.2.2", proto: "tcp", dport: 1}); err == nil {
			t.Errorf("ruleset %q: expected an error", bad)
		}
	}
}
