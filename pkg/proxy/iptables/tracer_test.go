//go:build linux

package iptables

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file is a packet tracer: it evaluates a ruleset (iptables-save text)
// for one packet, following the netfilter hooks a real packet would cross,
// and reports every possible outcome with its probability. Tests assert
// behaviour through it instead of comparing rule text.
//
// It is strict on purpose: a match or target it does not understand is an
// error, never silently ignored, so a rule the tracer cannot judge fails the
// test instead of passing it.

// ruleset is tables -> chains -> rules, as parsed from iptables-save text.
type ruleset map[string]map[string][]tRule

// tRule is one rule split into words ("-A CHAIN" removed).
type tRule struct {
	chain string
	words []string
	raw   string
}

// splitWords splits a rule line into words, honouring double quotes.
func splitWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord, inQuote := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case inQuote && c == '\\' && i+1 < len(line):
			i++
			cur.WriteByte(line[i])
		case c == '"':
			inQuote = !inQuote
			inWord = true
		case !inQuote && (c == ' ' || c == '\t'):
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

// parseRuleset reads iptables-save (or restore) text. Builtin chains get an
// entry even if empty.
func parseRuleset(text string) (ruleset, error) {
	rs := ruleset{}
	var table map[string][]tRule
	for n, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			if rs[name] == nil {
				rs[name] = map[string][]tRule{}
			}
			table = rs[name]
		case line == "COMMIT":
			table = nil
		case strings.HasPrefix(line, ":"):
			if table == nil {
				return nil, fmt.Errorf("line %d: chain outside table", n+1)
			}
			name := strings.Fields(line[1:])[0]
			table[name] = []tRule{} // a declaration flushes, as in a restore
		case strings.HasPrefix(line, "-A "):
			if table == nil {
				return nil, fmt.Errorf("line %d: rule outside table", n+1)
			}
			words, err := splitWords(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", n+1, err)
			}
			if len(words) < 2 {
				return nil, fmt.Errorf("line %d: short rule", n+1)
			}
			table[words[1]] = append(table[words[1]], tRule{chain: words[1], words: words[2:], raw: line})
		case strings.HasPrefix(line, "-X "):
			if table == nil {
				return nil, fmt.Errorf("line %d: delete outside table", n+1)
			}
			delete(table, strings.TrimSpace(line[3:]))
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", n+1, line)
		}
	}
	return rs, nil
}

// ingress says where a packet comes from.
type ingress int

const (
	fromPod      ingress = iota // a pod on this node, through its interface
	fromExternal                // another host, through the node's uplink
	fromHost                    // a process in the node's own network namespace
)

func (i ingress) String() string {
	return [...]string{"pod", "external", "host"}[i]
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
	rs ruleset
	// local are the node's addresses (addrtype LOCAL); loopback is always local.
	local []netip.Addr
	// recent holds -m recent lists: name -> source addresses.
	recent map[string]map[netip.Addr]bool
}

func newTracer(rs ruleset, nodeIPs ...string) *tracer {
	t := &tracer{rs: rs, recent: map[string]map[netip.Addr]bool{}}
	for _, ip := range nodeIPs {
		t.local = append(t.local, netip.MustParseAddr(ip))
	}
	return t
}

func (t *tracer) isLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	return slices.Contains(t.local, a)
}

// pstate is the evolving state of one path of a packet.
type pstate struct {
	src, dst  netip.Addr
	dport     int
	mark      uint32
	dnat      string
	dnatted   bool
	masq      bool
	prob      float64
	recentSet []string
	trace     []string
	// iif is the input interface; empty in OUTPUT (as for the kernel).
	iif string
}

func (s pstate) clone() pstate {
	s.recentSet = slices.Clone(s.recentSet)
	s.trace = slices.Clone(s.trace)
	return s
}

// result of walking a chain: a state plus a terminal verdict ("" = fell off
// the end or RETURNed).
type walkResult struct {
	s       pstate
	verdict string
}

const maxDepth = 32

func (t *tracer) walk(pk *packet, table, chain string, s pstate, depth int) ([]walkResult, error) {
	if depth > maxDepth {
		return nil, fmt.Errorf("chain recursion too deep at %s/%s", table, chain)
	}
	rules, ok := t.rs[table][chain]
	if !ok {
		return nil, fmt.Errorf("jump to missing chain %s/%s", table, chain)
	}
	return t.walkFrom(pk, table, rules, 0, s, depth)
}

func (t *tracer) walkFrom(pk *packet, table string, rules []tRule, i int, s pstate, depth int) ([]walkResult, error) {
	var out []walkResult
	for ; i < len(rules); i++ {
		r := rules[i]
		p, target, targetArgs, recentSet, err := t.match(pk, &s, r)
		if err != nil {
			return nil, fmt.Errorf("%s/%s: %q: %w", table, r.chain, r.raw, err)
		}
		if p == 0 {
			continue
		}
		if p < 1 {
			// Branch: the non-matching share continues with the next rule.
			miss := s.clone()
			miss.prob *= 1 - p
			rest, err := t.walkFrom(pk, table, rules, i+1, miss, depth)
			if err != nil {
				return nil, err
			}
			out = append(out, rest...)
			s.prob *= p
		}
		s.trace = append(s.trace, r.raw)
		if recentSet != "" {
			s.recentSet = append(s.recentSet, recentSet)
		}
		switch target {
		case "":
			continue
		case "ACCEPT", "DROP", "REJECT":
			return append(out, walkResult{s, target}), nil
		case "RETURN":
			return append(out, walkResult{s, ""}), nil
		case "DNAT":
			if table != "nat" {
				return nil, fmt.Errorf("DNAT outside nat: %q", r.raw)
			}
			to := flagValue(targetArgs, "--to-destination")
			ap, err := netip.ParseAddrPort(to)
			if err != nil {
				return nil, fmt.Errorf("bad DNAT destination in %q: %w", r.raw, err)
			}
			s.dnat, s.dnatted = to, true
			s.dst, s.dport = ap.Addr(), int(ap.Port())
			return append(out, walkResult{s, "ACCEPT"}), nil
		case "MASQUERADE":
			for _, a := range targetArgs {
				if a != "--random-fully" {
					return nil, fmt.Errorf("unknown MASQUERADE option %q", a)
				}
			}
			s.masq = true
			return append(out, walkResult{s, "ACCEPT"}), nil
		case "MARK":
			if err := applyMark(&s, targetArgs); err != nil {
				return nil, fmt.Errorf("%q: %w", r.raw, err)
			}
			continue
		default:
			if len(targetArgs) > 0 {
				return nil, fmt.Errorf("arguments to chain jump in %q", r.raw)
			}
			sub, err := t.walk(pk, table, target, s, depth+1)
			if err != nil {
				return nil, err
			}
			for _, res := range sub {
				if res.verdict != "" {
					out = append(out, res)
					continue
				}
				rest, err := t.walkFrom(pk, table, rules, i+1, res.s, depth)
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
			}
			return out, nil
		}
	}
	return append(out, walkResult{s, ""}), nil
}

func flagValue(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

func parseMark(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err
}

func applyMark(s *pstate, args []string) error {
	if len(args) != 2 {
		return fmt.Errorf("MARK wants one option, got %v", args)
	}
	switch args[0] {
	case "--or-mark":
		v, err := parseMark(args[1])
		if err != nil {
			return err
		}
		s.mark |= v
	case "--xor-mark":
		v, err := parseMark(args[1])
		if err != nil {
			return err
		}
		s.mark ^= v
	case "--set-xmark":
		val, mask, _ := strings.Cut(args[1], "/")
		v, err := parseMark(val)
		if err != nil {
			return err
		}
		m := uint32(math.MaxUint32)
		if mask != "" {
			if m, err = parseMark(mask); err != nil {
				return err
			}
		}
		s.mark = (s.mark &^ m) ^ v
	default:
		return fmt.Errorf("unknown MARK option %q", args[0])
	}
	return nil
}

// match evaluates a rule's matches for the packet. It returns the
// probability that the rule matches (0, 1, or a statistic's share), the
// target and the target's arguments. Side effects of matches that always
// apply when the rule matches (-m recent --set) are applied to s.
func (t *tracer) match(pk *packet, s *pstate, r tRule) (float64, string, []string, string, error) {
	w := r.words
	prob := 1.0
	matched := true
	var recentName string
	var recentSet bool
	for i := 0; i < len(w); i++ {
		neg := false
		if w[i] == "!" {
			neg = true
			i++
			if i >= len(w) {
				return 0, "", nil, "", fmt.Errorf("dangling !")
			}
		}
		opt := w[i]
		val := ""
		needVal := func() error {
			if i+1 >= len(w) {
				return fmt.Errorf("%s needs a value", opt)
			}
			i++
			val = w[i]
			return nil
		}
		res := true
		switch opt {
		case "-j":
			if neg {
				return 0, "", nil, "", fmt.Errorf("negated -j")
			}
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			if !matched {
				return 0, val, w[i+1:], "", nil
			}
			return prob, val, w[i+1:], setName(recentName, recentSet), nil
		case "-m":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			switch val {
			case "comment", "tcp", "udp", "sctp", "conntrack", "addrtype", "mark", "statistic", "recent", "nfacct":
			default:
				return 0, "", nil, "", fmt.Errorf("unknown match module %q", val)
			}
			continue
		case "--comment", "--nfacct-name", "--mode", "--seconds", "--reject-with":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			if opt == "--mode" && val != "random" {
				return 0, "", nil, "", fmt.Errorf("unknown statistic mode %q", val)
			}
			continue
		case "--reap", "--rsource":
			continue
		case "--mask":
			// iptables-save spells out -m recent's default full mask.
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			if val != "255.255.255.255" && val != "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" {
				return 0, "", nil, "", fmt.Errorf("recent --mask %q not modelled", val)
			}
			continue
		case "-p":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			res = val == pk.proto
		case "-s", "-d":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			pfx, err := parsePrefix(val)
			if err != nil {
				return 0, "", nil, "", err
			}
			addr := s.src
			if opt == "-d" {
				addr = s.dst
			}
			res = pfx.Contains(addr)
		case "--dport", "--sport":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			if opt == "--sport" {
				return 0, "", nil, "", fmt.Errorf("--sport not modelled")
			}
			port, err := strconv.Atoi(val)
			if err != nil {
				return 0, "", nil, "", fmt.Errorf("bad port %q", val)
			}
			res = port == s.dport
		case "-i", "-o":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			iface := s.iif
			if opt == "-o" {
				return 0, "", nil, "", fmt.Errorf("-o not modelled")
			}
			if p, ok := strings.CutSuffix(val, "+"); ok {
				res = iface != "" && strings.HasPrefix(iface, p)
			} else {
				res = iface == val
			}
		case "--src-type", "--dst-type":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			if val != "LOCAL" {
				return 0, "", nil, "", fmt.Errorf("addrtype %q not modelled", val)
			}
			addr := s.src
			if opt == "--dst-type" {
				addr = s.dst
			}
			res = t.isLocal(addr)
		case "--ctstate":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			states := map[string]bool{}
			if pk.invalid {
				states["INVALID"] = true
			} else {
				states["NEW"] = true
			}
			if s.dnatted {
				states["DNAT"] = true
			}
			res = false
			for _, st := range strings.Split(val, ",") {
				switch st {
				case "NEW", "INVALID", "DNAT", "RELATED", "ESTABLISHED":
				default:
					return 0, "", nil, "", fmt.Errorf("ctstate %q not modelled", st)
				}
				if states[st] {
					res = true
				}
			}
		case "--mark":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			v, m, _ := strings.Cut(val, "/")
			value, err := parseMark(v)
			if err != nil {
				return 0, "", nil, "", err
			}
			mask := uint32(math.MaxUint32)
			if m != "" {
				if mask, err = parseMark(m); err != nil {
					return 0, "", nil, "", err
				}
			}
			res = s.mark&mask == value
		case "--probability":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			p, err := strconv.ParseFloat(val, 64)
			if err != nil || p <= 0 || p > 1 {
				return 0, "", nil, "", fmt.Errorf("bad probability %q", val)
			}
			prob *= p
			continue
		case "--name":
			if err := needVal(); err != nil {
				return 0, "", nil, "", err
			}
			recentName = val
			continue
		case "--set":
			recentSet = true
			continue
		case "--rcheck":
			res = recentName != "" && t.recent[recentName][s.src]
		default:
			return 0, "", nil, "", fmt.Errorf("unknown option %q", opt)
		}
		if neg {
			res = !res
		}
		if !res {
			matched = false
		}
	}
	// No -j: a rule that only counts (or documents).
	if !matched {
		return 0, "", nil, "", nil
	}
	return prob, "", nil, setName(recentName, recentSet), nil
}

// setName is the -m recent list a matching rule adds the source to, if any.
func setName(name string, set bool) string {
	if set {
		return name
	}
	return ""
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, fmt.Errorf("bad CIDR %q: %w", s, err)
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address %q: %w", s, err)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// trace follows pk through the hooks and returns its possible outcomes,
// merged by (verdict, dnat, masq) and sorted by DNAT target.
func (t *tracer) trace(pk packet) ([]outcome, error) {
	src, err := netip.ParseAddr(pk.src)
	if err != nil {
		return nil, err
	}
	dst, err := netip.ParseAddr(pk.dst)
	if err != nil {
		return nil, err
	}
	s := pstate{src: src, dst: dst, dport: pk.dport, prob: 1, iif: pk.iif}
	var finals []pstate
	var verdicts []string

	// hook runs a builtin chain over every state, keeping survivors and
	// recording terminal drops/rejects.
	hook := func(states []pstate, table, chain string) ([]pstate, error) {
		var next []pstate
		for _, st := range states {
			if _, ok := t.rs[table][chain]; !ok {
				return nil, fmt.Errorf("builtin chain %s/%s missing from the ruleset", table, chain)
			}
			res, err := t.walk(&pk, table, chain, st, 0)
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				if r.verdict == "" && pk.dropPolicy && table == "filter" && (chain == "INPUT" || chain == "FORWARD") {
					r.verdict = "DROP"
				}
				switch r.verdict {
				case "DROP", "REJECT":
					finals = append(finals, r.s)
					verdicts = append(verdicts, r.verdict)
				default:
					next = append(next, r.s)
				}
			}
		}
		return next, nil
	}
	// nat chains see only the first packet of a connection; INVALID
	// packets have no connection and skip nat entirely.
	natHook := func(states []pstate, chain string) ([]pstate, error) {
		if pk.invalid {
			return states, nil
		}
		return hook(states, "nat", chain)
	}

	states := []pstate{s}
	if pk.from == fromHost {
		states[0].iif = ""
		if states, err = natHook(states, "OUTPUT"); err != nil {
			return nil, err
		}
		if states, err = hook(states, "filter", "OUTPUT"); err != nil {
			return nil, err
		}
		if states, err = natHook(states, "POSTROUTING"); err != nil {
			return nil, err
		}
		// Locally destined packets come back in through lo to INPUT.
		var local, remote []pstate
		for _, st := range states {
			if t.isLocal(st.dst) {
				st.iif = "lo"
				local = append(local, st)
			} else {
				remote = append(remote, st)
			}
		}
		if local, err = hook(local, "filter", "INPUT"); err != nil {
			return nil, err
		}
		states = append(remote, local...)
	} else {
		if states, err = natHook(states, "PREROUTING"); err != nil {
			return nil, err
		}
		var local, fwd []pstate
		for _, st := range states {
			if t.isLocal(st.dst) {
				local = append(local, st)
			} else {
				fwd = append(fwd, st)
			}
		}
		if local, err = hook(local, "filter", "INPUT"); err != nil {
			return nil, err
		}
		if fwd, err = hook(fwd, "filter", "FORWARD"); err != nil {
			return nil, err
		}
		if fwd, err = natHook(fwd, "POSTROUTING"); err != nil {
			return nil, err
		}
		states = append(local, fwd...)
	}
	for _, st := range states {
		finals = append(finals, st)
		verdicts = append(verdicts, "ACCEPT")
	}

	merged := map[string]*outcome{}
	var keys []string
	for i, st := range finals {
		o := outcome{verdict: verdicts[i], dnat: st.dnat, masq: st.masq, prob: st.prob, recentSet: st.recentSet, trace: st.trace}
		if o.verdict != "ACCEPT" {
			o.masq = false
		}
		k := o.String()
		if m, ok := merged[k]; ok {
			m.prob += o.prob
			continue
		}
		merged[k] = &o
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]outcome, 0, len(keys))
	total := 0.0
	for _, k := range keys {
		out = append(out, *merged[k])
		total += merged[k].prob
	}
	if math.Abs(total-1) > 1e-6 {
		return nil, fmt.Errorf("outcome probabilities sum to %v, not 1: %v", total, out)
	}
	return out, nil
}

// remember records the -m recent --set effects of an outcome, as the kernel
// would after the packet went that way.
func (t *tracer) remember(src string, o outcome) {
	a := netip.MustParseAddr(src)
	for _, name := range o.recentSet {
		if t.recent[name] == nil {
			t.recent[name] = map[netip.Addr]bool{}
		}
		t.recent[name][a] = true
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
