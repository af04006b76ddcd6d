//go:build linux

package nftables

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"
)

// The tracer evaluates the ruleset held by a knftables.Fake for one new
// connection, following the netfilter hooks the way the kernel would, and
// reports the verdict, where the packet was DNATed to and whether it was
// masqueraded. Random load-balancing (numgen) forks the trace, so every
// endpoint that could be chosen is reported.

type packet struct {
	src, dst string
	proto    string // tcp, udp, sctp
	dport    int
	iif      string // input interface, for interface-based local detection
	// fromHost means the packet is sent by a host-network process (output
	// path) rather than arriving from a pod or another host.
	fromHost bool
}

type traceResult struct {
	verdict string   // ACCEPT, DROP or REJECT
	dnat    []string // possible "ip:port" destinations, sorted
	masq    bool
}

func (r traceResult) String() string {
	return fmt.Sprintf("%s dnat=%v masq=%v", r.verdict, r.dnat, r.masq)
}

type tracer struct {
	t       testing.TB
	table   *knftables.FakeTable
	nodeIPs []netip.Addr
	trail   []string
}

// pktState is the part of a packet that rules can modify.
type pktState struct {
	dst    netip.Addr
	dport  int
	mark   uint64
	masq   bool
	dnated bool
}

type outcome struct {
	verdict string // "", accept, drop, reject, return
	st      pktState
}

func newTracer(t testing.TB, nft *knftables.Fake, nodeIPs ...string) *tracer {
	t.Helper()
	nft.RLock()
	defer nft.RUnlock()
	if nft.Table == nil {
		t.Fatalf("tracer: fake has no table")
	}
	tr := &tracer{t: t, table: nft.Table}
	for _, ip := range nodeIPs {
		tr.nodeIPs = append(tr.nodeIPs, netip.MustParseAddr(ip))
	}
	return tr
}

func (tr *tracer) isLocal(a netip.Addr) bool {
	if a.IsLoopback() {
		return true
	}
	return slices.Contains(tr.nodeIPs, a)
}

// trace runs pkt through prerouting/input/forward/postrouting (or the output
// path for host-originated packets).
func (tr *tracer) trace(pkt packet) traceResult {
	tr.t.Helper()
	start := pktState{dst: netip.MustParseAddr(pkt.dst), dport: pkt.dport}
	var hooks1, hooks2 []string
	if pkt.fromHost {
		hooks1 = []string{filterOutputPreDNATChain, natOutputChain}
	} else {
		hooks1 = []string{filterPreroutingPreDNATChain, natPreroutingChain}
	}
	states := []outcome{{st: start}}
	states = tr.runHooks(pkt, states, hooks1)
	var finals []outcome
	for _, o := range states {
		if o.verdict == "drop" || o.verdict == "reject" {
			finals = append(finals, o)
			continue
		}
		switch {
		case pkt.fromHost:
			hooks2 = []string{filterOutputChain, natPostroutingChain}
		case tr.isLocal(o.st.dst):
			hooks2 = []string{filterInputChain}
		default:
			hooks2 = []string{filterForwardChain, natPostroutingChain}
		}
		finals = append(finals, tr.runHooks(pkt, []outcome{{st: o.st}}, hooks2)...)
	}

	res := traceResult{}
	verdicts := map[string]bool{}
	for _, o := range finals {
		v := strings.ToUpper(o.verdict)
		if v == "" || v == "RETURN" {
			v = "ACCEPT"
		}
		verdicts[v] = true
		if v == "ACCEPT" && o.st.dnated {
			res.dnat = append(res.dnat, joinHostPort(o.st.dst, o.st.dport))
		}
		if v == "ACCEPT" && o.st.masq {
			res.masq = true
		}
	}
	var vs []string
	for v := range verdicts {
		vs = append(vs, v)
	}
	slices.Sort(vs)
	res.verdict = strings.Join(vs, "|")
	slices.Sort(res.dnat)
	res.dnat = slices.Compact(res.dnat)
	return res
}

func joinHostPort(a netip.Addr, port int) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(port))
}

func (tr *tracer) runHooks(pkt packet, in []outcome, hooks []string) []outcome {
	cur := in
	for _, hook := range hooks {
		var next []outcome
		for _, o := range cur {
			if o.verdict == "drop" || o.verdict == "reject" {
				next = append(next, o)
				continue
			}
			if tr.table.Chains[hook] == nil {
				next = append(next, outcome{st: o.st})
				continue
			}
			for _, r := range tr.runChain(pkt, hook, o.st, 0) {
				if r.verdict == "return" || r.verdict == "accept" {
					r.verdict = ""
				}
				next = append(next, r)
			}
		}
		cur = next
	}
	return cur
}

// runChain evaluates chain; an outcome with verdict "" means "fell off the
// end" (continue in the caller).
func (tr *tracer) runChain(pkt packet, chain string, st pktState, depth int) []outcome {
	if depth > 20 {
		tr.t.Fatalf("tracer: chain recursion too deep at %s", chain)
	}
	ch := tr.table.Chains[chain]
	if ch == nil {
		tr.t.Fatalf("tracer: jump to missing chain %q", chain)
	}
	return tr.runRules(pkt, ch.Rules, 0, st, depth)
}

func (tr *tracer) runRules(pkt packet, rules []*knftables.Rule, i int, st pktState, depth int) []outcome {
	for ; i < len(rules); i++ {
		// "numgen random mod K 0 ..." matches at random: follow both the
		// matching branch and the fall-through.
		if f := strings.Fields(rules[i].Rule); len(f) > 4 && f[0] == "numgen" && f[3] != "" && f[4] != "map" && f[4] != "vmap" {
			matchedRule := &knftables.Rule{Rule: strings.Join(f[5:], " ")}
			outs, _ := tr.runRule(pkt, matchedRule, st, depth)
			var results []outcome
			for _, o := range outs {
				if o.verdict == "" || o.verdict == "continue" {
					results = append(results, tr.runRules(pkt, rules, i+1, o.st, depth)...)
				} else {
					results = append(results, o)
				}
			}
			return append(results, tr.runRules(pkt, rules, i+1, st, depth)...)
		}
		outs, matched := tr.runRule(pkt, rules[i], st, depth)
		if !matched {
			continue
		}
		var results []outcome
		for _, o := range outs {
			if o.verdict == "" || o.verdict == "continue" {
				// Rule matched but had no verdict (e.g. set a mark, or a
				// jump that returned): continue with the next rule.
				results = append(results, tr.runRules(pkt, rules, i+1, o.st, depth)...)
			} else {
				results = append(results, o)
			}
		}
		return results
	}
	return []outcome{{st: st}}
}

// runRule evaluates one rule. It returns matched=false if a match expression
// failed; otherwise the outcomes of its statements.
func (tr *tracer) runRule(pkt packet, rule *knftables.Rule, st pktState, depth int) ([]outcome, bool) {
	toks := tokenize(rule.Rule)
	p := &ruleParser{toks: toks}
	for !p.done() {
		switch {
		case p.accept("ct", "state", "new"):
		case p.accept("ct", "status", "dnat"):
			if !st.dnated {
				return nil, false
			}
		case p.peek("ip", "saddr", ".") || p.peek("ip6", "saddr", "."):
			// ip saddr . ip daddr . meta l4proto . th dport @set
			p.next(8 + 3)
			set := strings.TrimPrefix(p.nextTok(), "@")
			key := []string{pkt.src, st.dst.String(), pkt.proto, strconv.Itoa(st.dport)}
			if !tr.setHas(set, key) {
				return nil, false
			}
		case p.peek("ip", "daddr", ".") || p.peek("ip6", "daddr", "."):
			p.next(2)
			p.expect(".", "meta", "l4proto", ".", "th", "dport", "vmap")
			m := strings.TrimPrefix(p.nextTok(), "@")
			v := tr.mapLookup(m, []string{st.dst.String(), pkt.proto, strconv.Itoa(st.dport)})
			if v == "" {
				return nil, false
			}
			return tr.verdict(pkt, v, st, depth), true
		case p.peek("meta", "l4proto", "."):
			p.expect("meta", "l4proto", ".", "th", "dport", "vmap")
			m := strings.TrimPrefix(p.nextTok(), "@")
			v := tr.mapLookup(m, []string{pkt.proto, strconv.Itoa(st.dport)})
			if v == "" {
				return nil, false
			}
			return tr.verdict(pkt, v, st, depth), true
		case p.peek("ip", "daddr") || p.peek("ip6", "daddr") || p.peek("ip", "saddr") || p.peek("ip6", "saddr"):
			p.next(1)
			field := p.nextTok()
			addr := pkt.src
			if field == "daddr" {
				addr = st.dst.String()
			}
			neg := p.accept("!=")
			if !tr.addrMatch(addr, p) != neg {
				return nil, false
			}
		case p.accept("fib", "daddr", "type", "local"):
			if !tr.isLocal(st.dst) {
				return nil, false
			}
		case p.accept("fib", "saddr", "type", "local"):
			if !tr.isLocal(netip.MustParseAddr(pkt.src)) {
				return nil, false
			}
		case p.peek("meta", "l4proto"):
			p.next(2)
			if p.nextTok() != pkt.proto {
				return nil, false
			}
		case p.peek("iifname"):
			p.next(1)
			neg := p.accept("!=")
			pat := strings.Trim(p.nextTok(), `"`)
			m := pkt.iif == pat || (strings.HasSuffix(pat, "*") && strings.HasPrefix(pkt.iif, strings.TrimSuffix(pat, "*")))
			if m == neg {
				return nil, false
			}
		case p.peek("mark", "and"):
			p.next(2)
			bits := parseHex(tr.t, p.nextTok())
			p.expect("!=", "0")
			if st.mark&bits == 0 {
				return nil, false
			}
		case p.peek("mark", "set", "mark", "or"):
			p.next(4)
			st.mark |= parseHex(tr.t, p.nextTok())
		case p.peek("mark", "set", "mark", "xor"):
			p.next(4)
			st.mark ^= parseHex(tr.t, p.nextTok())
		case p.accept("masquerade", "fully-random"):
			st.masq = true
			return []outcome{{verdict: "accept", st: st}}, true
		case p.peek("counter", "name"):
			p.next(3)
		case p.peek("update"):
			// update @set { ip saddr }: affinity bookkeeping, no verdict
			p.next(2)
			p.expect("{")
			for p.nextTok() != "}" {
			}
		case p.peek("dnat", "to"):
			p.next(2)
			ap := netip.MustParseAddrPort(p.nextTok())
			st.dst, st.dport, st.dnated = ap.Addr(), int(ap.Port()), true
			return []outcome{{verdict: "accept", st: st}}, true
		case p.peek("dnat", "ip", "addr") || p.peek("dnat", "ip6", "addr"):
			p.next(3)
			p.expect(".", "port", "to", "numgen", "random", "mod")
			n, _ := strconv.Atoi(p.nextTok())
			offset := 0
			if p.accept("offset") {
				offset, _ = strconv.Atoi(p.nextTok())
			}
			p.expect("map")
			var outs []outcome
			dnatTo := func(ip, port string) {
				s2 := st
				s2.dport, _ = strconv.Atoi(port)
				s2.dst, s2.dnated = netip.MustParseAddr(ip), true
				outs = append(outs, outcome{verdict: "accept", st: s2})
			}
			if name, ok := strings.CutPrefix(p.nextTok(), "@"); ok {
				// A named endpoint map: every slot the numgen can pick must
				// hold an endpoint; a missing one would make the kernel's
				// lookup fail and the packet go on un-NATed.
				for slot := offset; slot < offset+n; slot++ {
					v := strings.Fields(tr.mapLookup(name, []string{strconv.Itoa(slot)}))
					if len(v) != 2 {
						outs = append(outs, outcome{st: st})
						continue
					}
					dnatTo(v[0], v[1])
				}
				return outs, true
			}
			for {
				p.next(2) // "N :"
				ip := p.nextTok()
				p.expect(".")
				dnatTo(ip, p.nextTok())
				if p.accept("}") {
					break
				}
				p.expect(",")
			}
			return outs, true
		case p.peek("numgen", "random", "mod"):
			p.next(4)
			p.expect("vmap", "{")
			var outs []outcome
			for {
				p.next(2)
				v := p.nextTok() + " " + p.nextTok()
				outs = append(outs, tr.verdict(pkt, v, st, depth)...)
				if p.accept("}") {
					break
				}
				p.expect(",")
			}
			return outs, true
		case p.peek("jump") || p.peek("goto"):
			v := p.nextTok() + " " + p.nextTok()
			return tr.verdict(pkt, v, st, depth), true
		case p.accept("reject"):
			return []outcome{{verdict: "reject", st: st}}, true
		case p.accept("drop"):
			return []outcome{{verdict: "drop", st: st}}, true
		case p.accept("accept"):
			return []outcome{{verdict: "accept", st: st}}, true
		case p.accept("return"):
			return []outcome{{verdict: "return", st: st}}, true
		default:
			tr.t.Fatalf("tracer: cannot parse rule %q at %q", rule.Rule, strings.Join(p.toks[p.i:], " "))
		}
	}
	return []outcome{{st: st}}, true
}

// verdict applies a verdict string such as "goto X", "jump X", "drop".
func (tr *tracer) verdict(pkt packet, v string, st pktState, depth int) []outcome {
	f := strings.Fields(v)
	switch f[0] {
	case "drop", "reject", "accept", "return":
		return []outcome{{verdict: f[0], st: st}}
	case "jump":
		var outs []outcome
		for _, o := range tr.runChain(pkt, f[1], st, depth+1) {
			if o.verdict == "return" || o.verdict == "" {
				o.verdict = "continue"
			}
			outs = append(outs, o)
		}
		return outs
	case "goto":
		// goto does not come back here: falling off the target's end
		// returns to our caller.
		var outs []outcome
		for _, o := range tr.runChain(pkt, f[1], st, depth+1) {
			if o.verdict == "" {
				o.verdict = "return"
			}
			outs = append(outs, o)
		}
		return outs
	}
	tr.t.Fatalf("tracer: unknown verdict %q", v)
	return nil
}

func (tr *tracer) addrMatch(addr string, p *ruleParser) bool {
	a := netip.MustParseAddr(addr)
	tok := p.nextTok()
	switch {
	case strings.HasPrefix(tok, "@"):
		return tr.setHas(tok[1:], []string{a.String()})
	case tok == "{":
		found := false
		for {
			t := p.nextTok()
			if t == "}" {
				break
			}
			if t == "," {
				continue
			}
			if prefixMatch(t, a) {
				found = true
			}
		}
		return found
	default:
		return prefixMatch(tok, a)
	}
}

func prefixMatch(s string, a netip.Addr) bool {
	if strings.Contains(s, "/") {
		return netip.MustParsePrefix(s).Contains(a)
	}
	return netip.MustParseAddr(s) == a
}

func (tr *tracer) setHas(name string, key []string) bool {
	s := tr.table.Sets[name]
	if s == nil {
		tr.t.Fatalf("tracer: missing set %q", name)
	}
	for _, e := range s.Elements {
		if keyEqual(e.Key, key) {
			return true
		}
	}
	return false
}

func (tr *tracer) mapLookup(name string, key []string) string {
	m := tr.table.Maps[name]
	if m == nil {
		tr.t.Fatalf("tracer: missing map %q", name)
	}
	for _, e := range m.Elements {
		if keyEqual(e.Key, key) {
			return strings.Join(e.Value, " ")
		}
	}
	return ""
}

func keyEqual(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] == b[i] {
			continue
		}
		x, err1 := netip.ParseAddr(a[i])
		y, err2 := netip.ParseAddr(b[i])
		if err1 != nil || err2 != nil || x != y {
			return false
		}
	}
	return true
}

func parseHex(t testing.TB, s string) uint64 {
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	if err != nil {
		t.Fatalf("tracer: bad mark %q", s)
	}
	return v
}

func tokenize(rule string) []string {
	var out []string
	for _, f := range strings.Fields(rule) {
		// "{" and "}" and "," are separate tokens in everything we write,
		// but tolerate them glued to neighbours.
		for len(f) > 1 && (f[0] == '{' || f[0] == ',') {
			out = append(out, f[:1])
			f = f[1:]
		}
		var tail []string
		for len(f) > 1 && (f[len(f)-1] == '}' || f[len(f)-1] == ',') {
			tail = append([]string{f[len(f)-1:]}, tail...)
			f = f[:len(f)-1]
		}
		out = append(out, f)
		out = append(out, tail...)
	}
	return out
}

type ruleParser struct {
	toks []string
	i    int
}

func (p *ruleParser) done() bool { return p.i >= len(p.toks) }

func (p *ruleParser) peek(words ...string) bool {
	if p.i+len(words) > len(p.toks) {
		return false
	}
	for j, w := range words {
		if p.toks[p.i+j] != w {
			return false
		}
	}
	return true
}

func (p *ruleParser) accept(words ...string) bool {
	if p.peek(words...) {
		p.i += len(words)
		return true
	}
	return false
}

func (p *ruleParser) expect(words ...string) {
	if !p.accept(words...) {
		panic(fmt.Sprintf("tracer: expected %q at %q", words, p.toks[p.i:]))
	}
}

func (p *ruleParser) next(n int) { p.i += n }

func (p *ruleParser) nextTok() string {
	if p.i >= len(p.toks) {
		panic("tracer: unexpected end of rule")
	}
	p.i++
	return p.toks[p.i-1]
}
