package trace

import (
	"fmt"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// NFTables is a parsed nftables ruleset: every table of every family that
// was read. Base chains of all of them are run on their hooks in priority
// order, as the kernel does.
type NFTables struct {
	Tables []*NFTTable
	// Owner is the table kube-proxy owns ("kube-proxy"); other tables are
	// foreign.
	Owner string
}

// NFTTable is one table.
type NFTTable struct {
	Family string // ip, ip6, inet
	Name   string
	Chains map[string]*NFTChain
	Sets   map[string]*NFTSet
}

// NFTChain is one chain; Hook is empty for a regular chain.
type NFTChain struct {
	Name     string
	Type     string // filter, nat, route
	Hook     string
	Priority int
	Policy   string
	Rules    []*NFTRule
}

// NFTRule is one compiled rule.
type NFTRule struct {
	// Text is the rule as nft or knftables wrote it (for JSON input, a
	// rendering of its expressions).
	Text    string
	Comment string
	stmts   []nStmt
}

// NFTSet is a set, map or verdict map.
type NFTSet struct {
	Name   string
	IsMap  bool
	Types  string
	exact  map[string]*nElem
	ranged []*nElem
	count  int
}

type nElem struct {
	key   []nAtom
	value string // map data: "goto chain", "10.0.0.1 . 80"
}

// nAtom is one value of a set element or a literal: exact, or an address or
// integer range (prefixes are ranges).
type nAtom struct {
	s        string
	isAddr   bool
	alo, ahi netip.Addr
	isInt    bool
	ilo, ihi uint64
}

func (a nAtom) matches(d datum) bool {
	switch {
	case a.isAddr:
		return d.a.IsValid() && d.a.Compare(a.alo) >= 0 && d.a.Compare(a.ahi) <= 0
	case a.isInt:
		return d.isNum && d.n >= a.ilo && d.n <= a.ihi
	}
	return a.s == d.s
}

// datum is the value of a packet field.
type datum struct {
	s     string
	a     netip.Addr
	n     uint64
	isNum bool
}

func addrDatum(a netip.Addr) datum { return datum{s: a.String(), a: a} }
func numDatum(n uint64) datum      { return datum{s: strconv.FormatUint(n, 10), n: n, isNum: true} }
func strDatum(s string) datum      { return datum{s: s} }

// parseAtom reads one literal: address, prefix, address or integer range,
// integer (decimal or 0x), or a word.
func parseAtom(s string) nAtom {
	if a, err := netip.ParseAddr(s); err == nil {
		return nAtom{s: a.String()}
	}
	if strings.Contains(s, "/") {
		if p, err := netip.ParsePrefix(s); err == nil {
			return prefixAtom(p)
		}
	}
	if lo, hi, ok := strings.Cut(s, "-"); ok {
		if a, err := netip.ParseAddr(lo); err == nil {
			if b, err := netip.ParseAddr(hi); err == nil {
				return nAtom{s: s, isAddr: true, alo: a, ahi: b}
			}
		}
		if a, err := strconv.ParseUint(lo, 0, 64); err == nil {
			if b, err := strconv.ParseUint(hi, 0, 64); err == nil {
				return nAtom{s: s, isInt: true, ilo: a, ihi: b}
			}
		}
	}
	if n, err := strconv.ParseUint(s, 0, 64); err == nil {
		return nAtom{s: strconv.FormatUint(n, 10)}
	}
	return nAtom{s: strings.Trim(s, `"`)}
}

func prefixAtom(p netip.Prefix) nAtom {
	p = p.Masked()
	lo := p.Addr()
	hi := lastAddr(p)
	return nAtom{s: p.String(), isAddr: true, alo: lo, ahi: hi}
}

func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Addr().AsSlice()
	bits := p.Bits()
	for i := range b {
		for j := 0; j < 8; j++ {
			if i*8+j >= bits {
				b[i] |= 0x80 >> j
			}
		}
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

func (a nAtom) exact() bool { return !a.isAddr && !a.isInt }

func keyString(parts []string) string { return strings.Join(parts, " . ") }

func (s *NFTSet) add(e *nElem) {
	s.count++
	exact := true
	for _, a := range e.key {
		if !a.exact() {
			exact = false
		}
	}
	if exact {
		if s.exact == nil {
			s.exact = map[string]*nElem{}
		}
		parts := make([]string, len(e.key))
		for i, a := range e.key {
			parts[i] = a.s
		}
		s.exact[keyString(parts)] = e
		return
	}
	s.ranged = append(s.ranged, e)
}

func (s *NFTSet) remove(key []nAtom) {
	parts := make([]string, len(key))
	for i, a := range key {
		parts[i] = a.s
	}
	k := keyString(parts)
	if _, ok := s.exact[k]; ok {
		delete(s.exact, k)
		s.count--
		return
	}
	for i, e := range s.ranged {
		if len(e.key) == len(key) {
			same := true
			for j := range key {
				if e.key[j].s != key[j].s {
					same = false
				}
			}
			if same {
				s.ranged = slices.Delete(s.ranged, i, i+1)
				s.count--
				return
			}
		}
	}
}

func (s *NFTSet) flush() {
	s.exact, s.ranged, s.count = nil, nil, 0
}

func (s *NFTSet) lookup(key []datum) *nElem {
	if len(s.exact) > 0 {
		parts := make([]string, len(key))
		for i, d := range key {
			parts[i] = d.s
		}
		if e := s.exact[keyString(parts)]; e != nil {
			return e
		}
	}
	for _, e := range s.ranged {
		if len(e.key) != len(key) {
			continue
		}
		ok := true
		for i := range key {
			if !e.key[i].matches(key[i]) {
				ok = false
				break
			}
		}
		if ok {
			return e
		}
	}
	return nil
}

// Expressions and statements.

type nExprKind int

const (
	eField nExprKind = iota
	eNumgen
	eConcat
	eBitop
)

type nExpr struct {
	kind        nExprKind
	field       string // saddr daddr dport l4proto mark iifname oifname fib-daddr fib-saddr ctstate ctstatus nfproto
	mod, offset uint64
	parts       []nExpr
	op          string // & | ^
	operand     uint64
	// proto is the protocol a tcp/udp/sctp header field depends on.
	proto string
}

type nStmtKind int

const (
	sMatch nStmtKind = iota
	sVmap
	sVerdict
	sDNAT
	sMasq
	sMarkSet
	sSetUpdate
	sNoop
	sUnknown
)

type nStmt struct {
	kind nStmtKind
	left nExpr
	neg  bool
	// flags marks a bitmask match ("ct state new,established"): any listed
	// flag matches.
	flags []string
	// Right side: literal atoms (any matches) or a named set.
	atoms   []nAtom
	setName string
	// anonymous vmap/map: literal keys to values.
	anon []*nElem
	// verdict: "accept", "drop", "reject", "return", "continue", "jump X",
	// "goto X".
	verdict string
	// dnat: fixed address and port, or a map from a key.
	dnatAddr netip.Addr
	dnatPort uint16
	// mark set: mark = (mark op operand) or operand.
	markOp      string
	markOperand uint32
	// set update: the set and the key.
	reason string
}

// evaluation

type nftWalk struct {
	nft    *NFTables
	pk     *Packet
	node   *Node
	paths  int
	steps  int
	family string // ip or ip6
	// cur is the table of the rule being evaluated; sets are looked up in
	// it.
	cur *NFTTable
}

// nftBranch is one way a rule evaluation can go.
type nftBranch struct {
	s       pstate
	matched bool   // false: the rule did not match (continue with the next rule)
	verdict string // when matched: "" (no verdict), accept, drop, reject, return, continue, jump X, goto X, unknown
}

func (w *nftWalk) fork() error {
	w.paths++
	if w.paths > maxPaths {
		return errTooComplex
	}
	return nil
}

func (w *nftWalk) field(f string, s *pstate) (datum, bool) {
	switch f {
	case "saddr":
		return addrDatum(s.src), true
	case "daddr":
		return addrDatum(s.dst), true
	case "dport":
		return numDatum(uint64(s.dport)), true
	case "l4proto":
		return strDatum(w.pk.Protocol), true
	case "mark":
		return numDatum(uint64(s.mark)), true
	case "iifname":
		return strDatum(s.iif), true
	case "fib-daddr":
		if w.node.isLocal(s.dst) {
			return strDatum("local"), true
		}
		return strDatum("unicast"), true
	case "fib-saddr":
		if w.node.isLocal(s.src) {
			return strDatum("local"), true
		}
		return strDatum("unicast"), true
	case "nfproto":
		if w.family == "ip6" {
			return strDatum("ipv6"), true
		}
		return strDatum("ipv4"), true
	}
	return datum{}, false
}

// eval evaluates a non-numgen expression to its parts.
func (w *nftWalk) eval(e *nExpr, s *pstate) ([]datum, string) {
	switch e.kind {
	case eField:
		d, ok := w.field(e.field, s)
		if !ok {
			return nil, fmt.Sprintf("packet field %q not modelled", e.field)
		}
		return []datum{d}, ""
	case eConcat:
		out := make([]datum, 0, len(e.parts))
		for i := range e.parts {
			d, reason := w.eval(&e.parts[i], s)
			if reason != "" {
				return nil, reason
			}
			out = append(out, d...)
		}
		return out, ""
	case eBitop:
		d, reason := w.eval(&e.parts[0], s)
		if reason != "" {
			return nil, reason
		}
		if len(d) != 1 || !d[0].isNum {
			return nil, "bit operation on a non-integer"
		}
		v := d[0].n
		switch e.op {
		case "&":
			v &= e.operand
		case "|":
			v |= e.operand
		case "^":
			v ^= e.operand
		}
		return []datum{numDatum(v)}, ""
	}
	return nil, "numgen used where a packet field was expected"
}

// ctFlags are the conntrack state / status bits of the traced packet.
func (w *nftWalk) ctFlags(field string, s *pstate) []string {
	if field == "ctstate" {
		if w.pk.Invalid {
			return []string{"invalid"}
		}
		return []string{"new"}
	}
	if s.dnatted {
		return []string{"dnat"}
	}
	return nil
}

func (w *nftWalk) setLookup(name string, key []datum) (*nElem, string) {
	set := w.set(name)
	if set == nil {
		return nil, fmt.Sprintf("set or map @%s is not in the ruleset", name)
	}
	return set.lookup(key), ""
}

func (w *nftWalk) set(name string) *NFTSet {
	if w.cur == nil {
		return nil
	}
	return w.cur.Sets[name]
}

func atomsMatch(atoms []nAtom, key []datum) bool {
	if len(key) != 1 {
		return false
	}
	for _, a := range atoms {
		if a.matches(key[0]) {
			return true
		}
	}
	return false
}

func anonLookup(elems []*nElem, key []datum) *nElem {
	for _, e := range elems {
		if len(e.key) != len(key) {
			continue
		}
		ok := true
		for i := range key {
			if !e.key[i].matches(key[i]) {
				ok = false
				break
			}
		}
		if ok {
			return e
		}
	}
	return nil
}

// numgenValues enumerates a numgen expression's values.
func numgenValues(e *nExpr) ([]uint64, string) {
	if e.mod == 0 || e.mod > 1<<16 {
		return nil, fmt.Sprintf("numgen modulus %d not modelled", e.mod)
	}
	v := make([]uint64, e.mod)
	for i := range v {
		v[i] = uint64(i) + e.offset
	}
	return v, ""
}

// evalRule evaluates one rule for s and returns the ways it can go.
func (w *nftWalk) evalRule(r *NFTRule, s pstate, st Step) ([]nftBranch, error) {
	cur := []pstate{s}
	var out []nftBranch
	for i := range r.stmts {
		stmt := &r.stmts[i]
		var next []pstate
		for _, s := range cur {
			bs, err := w.evalStmt(stmt, s, st)
			if err != nil {
				return nil, err
			}
			for _, b := range bs {
				if !b.matched || b.verdict != "" {
					out = append(out, b)
				} else {
					next = append(next, b.s)
				}
			}
		}
		cur = next
		if len(cur) == 0 {
			break
		}
	}
	for _, s := range cur {
		out = append(out, nftBranch{s: s, matched: true})
	}
	return out, nil
}

func (w *nftWalk) unknownBranch(s pstate, reason string) []nftBranch {
	s.reason = reason
	return []nftBranch{{s: s, matched: true, verdict: "unknown"}}
}

func (w *nftWalk) evalStmt(stmt *nStmt, s pstate, st Step) ([]nftBranch, error) {
	one := func(matched bool, verdict string) []nftBranch {
		return []nftBranch{{s: s, matched: matched, verdict: verdict}}
	}
	switch stmt.kind {
	case sNoop:
		return one(true, ""), nil
	case sUnknown:
		return w.unknownBranch(s, stmt.reason), nil
	case sVerdict:
		return one(true, stmt.verdict), nil
	case sMasq:
		s.masq = true
		return one(true, "accept"), nil
	case sMarkSet:
		switch stmt.markOp {
		case "|":
			s.mark |= stmt.markOperand
		case "^":
			s.mark ^= stmt.markOperand
		case "&":
			s.mark &= stmt.markOperand
		default:
			s.mark = stmt.markOperand
		}
		return one(true, ""), nil
	case sSetUpdate:
		s.affSet = append(s.affSet, "@"+stmt.setName)
		return one(true, ""), nil
	case sMatch:
		if stmt.left.kind == eNumgen {
			return w.numgenMatch(stmt, s)
		}
		if stmt.left.kind == eField && (stmt.left.field == "ctstate" || stmt.left.field == "ctstatus") {
			have := w.ctFlags(stmt.left.field, &s)
			m := false
			for _, f := range stmt.flags {
				if slices.Contains(have, f) {
					m = true
				}
			}
			return one(m != stmt.neg, ""), nil
		}
		key, reason := w.eval(&stmt.left, &s)
		if reason != "" {
			return w.unknownBranch(s, reason), nil
		}
		var m bool
		switch {
		case stmt.setName != "":
			e, reason := w.setLookup(stmt.setName, key)
			if reason != "" {
				return w.unknownBranch(s, reason), nil
			}
			m = e != nil
			if m && strings.HasPrefix(stmt.setName, "affinity-") && !stmt.neg {
				s.affHit = "@" + stmt.setName
			}
		case stmt.left.field == "iifname" || stmt.left.field == "oifname":
			for _, a := range stmt.atoms {
				if ifaceMatch(a.s, "*", key[0].s) {
					m = true
				}
			}
		default:
			m = atomsMatch(stmt.atoms, key)
		}
		return one(m != stmt.neg, ""), nil
	case sVmap:
		if stmt.left.kind == eNumgen {
			return w.numgenMap(stmt, s, func(s pstate, e *nElem) nftBranch {
				return nftBranch{s: s, matched: true, verdict: e.value}
			})
		}
		key, reason := w.eval(&stmt.left, &s)
		if reason != "" {
			return w.unknownBranch(s, reason), nil
		}
		var e *nElem
		if stmt.setName != "" {
			var reason string
			if e, reason = w.setLookup(stmt.setName, key); reason != "" {
				return w.unknownBranch(s, reason), nil
			}
		} else {
			e = anonLookup(stmt.anon, key)
		}
		if e == nil {
			return one(false, ""), nil
		}
		s.lookup = fmt.Sprintf("vmap %s: %s -> %s", mapName(stmt), datumsString(key), e.value)
		return []nftBranch{{s: s, matched: true, verdict: e.value}}, nil
	case sDNAT:
		if stmt.setName == "" && stmt.anon == nil {
			port := stmt.dnatPort
			if port == 0 {
				port = s.dport
			}
			s.dst, s.dport, s.dnatted = stmt.dnatAddr, port, true
			s.dnat = hostPort(s.dst, s.dport)
			s.endpoint = s.dnat
			return one(true, "accept"), nil
		}
		apply := func(s pstate, e *nElem) nftBranch {
			f := splitDots(e.value)
			if len(f) != 2 {
				s.reason = fmt.Sprintf("dnat map value %q is not address . port", e.value)
				return nftBranch{s: s, matched: true, verdict: "unknown"}
			}
			a, err1 := netip.ParseAddr(f[0])
			p, err2 := strconv.ParseUint(f[1], 10, 16)
			if err1 != nil || err2 != nil {
				s.reason = fmt.Sprintf("dnat map value %q is not address . port", e.value)
				return nftBranch{s: s, matched: true, verdict: "unknown"}
			}
			s.dst, s.dport, s.dnatted = a, uint16(p), true
			s.dnat = hostPort(a, uint16(p))
			s.endpoint = s.dnat
			return nftBranch{s: s, matched: true, verdict: "accept"}
		}
		if stmt.left.kind == eNumgen {
			return w.numgenMap(stmt, s, apply)
		}
		key, reason := w.eval(&stmt.left, &s)
		if reason != "" {
			return w.unknownBranch(s, reason), nil
		}
		var e *nElem
		if stmt.setName != "" {
			if e, reason = w.setLookup(stmt.setName, key); reason != "" {
				return w.unknownBranch(s, reason), nil
			}
		} else {
			e = anonLookup(stmt.anon, key)
		}
		if e == nil {
			return one(false, ""), nil
		}
		return []nftBranch{apply(s, e)}, nil
	}
	return w.unknownBranch(s, "statement not modelled"), nil
}

func mapName(stmt *nStmt) string {
	if stmt.setName != "" {
		return "@" + stmt.setName
	}
	return "{...}"
}

func datumsString(ds []datum) string {
	parts := make([]string, len(ds))
	for i, d := range ds {
		parts[i] = d.s
	}
	return keyString(parts)
}

func splitDots(v string) []string {
	f := strings.Fields(v)
	out := f[:0]
	for _, x := range f {
		if x != "." {
			out = append(out, x)
		}
	}
	return out
}

// numgenMatch: "numgen random mod N [offset O] [!=] V|{...}" matches with
// the share of values that satisfy it.
func (w *nftWalk) numgenMatch(stmt *nStmt, s pstate) ([]nftBranch, error) {
	vals, reason := numgenValues(&stmt.left)
	if reason != "" {
		return w.unknownBranch(s, reason), nil
	}
	hit := 0
	for _, v := range vals {
		if atomsMatch(stmt.atoms, []datum{numDatum(v)}) != stmt.neg {
			hit++
		}
	}
	p := float64(hit) / float64(len(vals))
	switch hit {
	case 0:
		return []nftBranch{{s: s, matched: false}}, nil
	case len(vals):
		return []nftBranch{{s: s, matched: true}}, nil
	}
	if err := w.fork(); err != nil {
		return nil, err
	}
	miss := s.clone()
	miss.prob *= 1 - p
	s.prob *= p
	s.slot = fmt.Sprintf("numgen random mod %d: %d of %d values", stmt.left.mod, hit, len(vals))
	s.note = fmt.Sprintf("numgen: taken with probability %.4g", p)
	return []nftBranch{{s: miss, matched: false}, {s: s, matched: true}}, nil
}

// numgenMap forks over every slot of a numgen-keyed map; a slot with no
// element makes the lookup fail, which ends the rule without a match.
func (w *nftWalk) numgenMap(stmt *nStmt, s pstate, apply func(pstate, *nElem) nftBranch) ([]nftBranch, error) {
	vals, reason := numgenValues(&stmt.left)
	if reason != "" {
		return w.unknownBranch(s, reason), nil
	}
	var set *NFTSet
	if stmt.setName != "" {
		if set = w.set(stmt.setName); set == nil {
			return w.unknownBranch(s, fmt.Sprintf("map @%s is not in the ruleset", stmt.setName)), nil
		}
	}
	out := make([]nftBranch, 0, len(vals))
	p := 1 / float64(len(vals))
	for _, v := range vals {
		if err := w.fork(); err != nil {
			return nil, err
		}
		b := s.clone()
		b.prob *= p
		key := []datum{numDatum(v)}
		var e *nElem
		if set != nil {
			e = set.lookup(key)
		} else {
			e = anonLookup(stmt.anon, key)
		}
		if e == nil {
			b.note = fmt.Sprintf("numgen slot %d of %d in %s is empty: the lookup fails and the rule does not match", v, len(vals), mapName(stmt))
			out = append(out, nftBranch{s: b, matched: false})
			continue
		}
		b.slot = fmt.Sprintf("numgen random mod %d: slot %d of %s", stmt.left.mod, v, mapName(stmt))
		b.lookup = fmt.Sprintf("%s[%d] -> %s", mapName(stmt), v, e.value)
		out = append(out, apply(b, e))
	}
	return out, nil
}

type nftRes struct {
	s       pstate
	verdict string // "" returned / fell off; accept, drop, reject, unknown
}

func (w *nftWalk) runChain(hook string, t *NFTTable, ch *NFTChain, s pstate, depth int) ([]nftRes, error) {
	if depth > maxDepth {
		s.reason = fmt.Sprintf("chains nested deeper than %d at %s", maxDepth, ch.Name)
		return []nftRes{{s, "unknown"}}, nil
	}
	return w.runRules(hook, t, ch, 0, s, depth)
}

func (w *nftWalk) runRules(hook string, t *NFTTable, ch *NFTChain, i int, s pstate, depth int) ([]nftRes, error) {
	var out []nftRes
	foreign := t.Name != w.nft.Owner
	svc, ep := annotateNFTName(ch.Name)
	for i < len(ch.Rules) {
		if w.steps++; w.steps > maxSteps {
			return nil, errTooComplex
		}
		r := ch.Rules[i]
		w.cur = t
		step := Step{Hook: hook, Table: t.Family + " " + t.Name, Chain: ch.Name, Rule: r.Text, Service: svc, Endpoint: ep, Foreign: foreign}
		bs, err := w.evalRule(r, s, step)
		if err != nil {
			return nil, err
		}
		// The first branch that goes on to the next rule is followed in
		// this loop; the others recurse.
		var cont *pstate
		for bi := range bs {
			b := bs[bi]
			if !b.matched {
				if b.s.note != "" {
					b.s.path = append(b.s.path, Step{Hook: hook, Table: step.Table, Chain: ch.Name, Rule: r.Text, Note: b.s.note, Foreign: foreign})
					b.s.note = ""
				}
				if cont == nil {
					c := b.s
					cont = &c
					continue
				}
				rest, err := w.runRules(hook, t, ch, i+1, b.s, depth)
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
				continue
			}
			st := step
			st.Lookup, st.Note = b.s.lookup, b.s.note
			b.s.lookup, b.s.note = "", ""
			if vs, vep := annotateNFTName(strings.TrimPrefix(strings.TrimPrefix(b.verdict, "goto "), "jump ")); vs != "" && st.Service == "" {
				st.Service, st.Endpoint = vs, vep
			}
			b.s.step(st)
			verdict := b.verdict
			switch {
			case verdict == "" || verdict == "continue":
				if cont == nil {
					c := b.s
					cont = &c
					continue
				}
				rest, err := w.runRules(hook, t, ch, i+1, b.s, depth)
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
			case verdict == "accept" || verdict == "drop" || verdict == "unknown":
				out = append(out, nftRes{b.s, verdict})
			case strings.HasPrefix(verdict, "reject"):
				out = append(out, nftRes{b.s, "reject"})
			case verdict == "return":
				out = append(out, nftRes{b.s, ""})
			case strings.HasPrefix(verdict, "jump ") || strings.HasPrefix(verdict, "goto "):
				target := verdict[5:]
				sub := t.Chains[target]
				if sub == nil {
					b.s.reason = fmt.Sprintf("%s to chain %s that is not in table %s", verdict[:4], target, t.Name)
					out = append(out, nftRes{b.s, "unknown"})
					continue
				}
				res, err := w.runChain(hook, t, sub, b.s, depth+1)
				if err != nil {
					return nil, err
				}
				for _, sr := range res {
					if sr.verdict != "" || strings.HasPrefix(verdict, "goto ") {
						out = append(out, sr)
						continue
					}
					if err := w.fork(); err != nil {
						return nil, err
					}
					rest, err := w.runRules(hook, t, ch, i+1, sr.s, depth)
					if err != nil {
						return nil, err
					}
					out = append(out, rest...)
				}
			default:
				b.s.reason = fmt.Sprintf("verdict %q not modelled", verdict)
				out = append(out, nftRes{b.s, "unknown"})
			}
		}
		if cont == nil {
			return out, nil
		}
		s = *cont
		i++
	}
	return append(out, nftRes{s, ""}), nil
}

// Mode is "nftables".
func (nft *NFTables) Mode() string { return "nftables" }

type baseChain struct {
	t  *NFTTable
	ch *NFTChain
}

// baseChains returns the base chains on hook for family, by priority.
func (nft *NFTables) baseChains(family, hook string) []baseChain {
	var out []baseChain
	for _, t := range nft.Tables {
		if t.Family != family && t.Family != "inet" {
			continue
		}
		for _, ch := range t.Chains {
			if ch.Hook == hook {
				out = append(out, baseChain{t, ch})
			}
		}
	}
	slices.SortStableFunc(out, func(a, b baseChain) int {
		if a.ch.Priority != b.ch.Priority {
			return a.ch.Priority - b.ch.Priority
		}
		if c := strings.Compare(a.t.Name, b.t.Name); c != 0 {
			return c
		}
		return strings.Compare(a.ch.Name, b.ch.Name)
	})
	return out
}

// Trace follows pk through the ruleset.
func (nft *NFTables) Trace(pk Packet, node *Node) (*Result, error) {
	if err := pk.validate(); err != nil {
		return nil, err
	}
	if node == nil {
		node = &Node{}
	}
	family := "ip"
	if !pk.Dst.Unmap().Is4() {
		family = "ip6"
	}
	w := &nftWalk{nft: nft, pk: &pk, node: node, family: family}
	var finals []final
	hook := func(states []pstate, hookName string) ([]pstate, error) {
		for _, bc := range nft.baseChains(family, hookName) {
			var next []pstate
			for _, st := range states {
				// nat chains see only a new connection's first packet, and
				// not again once it loops back through lo.
				if bc.ch.Type == "nat" && (pk.Invalid || st.fromLoopRtn) {
					next = append(next, st)
					continue
				}
				res, err := w.runChain(hookName, bc.t, bc.ch, st, 0)
				if err != nil {
					return nil, err
				}
				for _, r := range res {
					switch r.verdict {
					case "", "accept":
						if r.verdict == "" && bc.ch.Policy == "drop" {
							r.s.path = append(r.s.path, Step{Hook: hookName, Table: bc.t.Family + " " + bc.t.Name, Chain: bc.ch.Name, Note: "chain policy drop", Foreign: bc.t.Name != nft.Owner})
							finals = append(finals, final{r.s, Drop})
							continue
						}
						next = append(next, r.s)
					case "drop":
						finals = append(finals, final{r.s, Drop})
					case "reject":
						finals = append(finals, final{r.s, Reject})
					default:
						finals = append(finals, final{r.s, Unknown})
					}
				}
			}
			states = next
		}
		return states, nil
	}
	// nft names its hooks in lower case.
	states, err := walkHooks(&pk, node, func(states []pstate, hookName string) ([]pstate, error) {
		return hook(states, strings.ToLower(hookName))
	})
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		finals = append(finals, final{st, Accept})
	}
	return buildResult(nft.Mode(), pk, finals, w.paths)
}

// priorityNames are nft's named chain priorities (for the ip, ip6 and inet
// families).
var priorityNames = map[string]int{"raw": -300, "mangle": -150, "dstnat": -100, "filter": 0, "security": 50, "srcnat": 100}

// parsePriority reads "-110", "dstnat", "dstnat - 10", "filter+5".
func parsePriority(s string) (int, error) {
	s = strings.ReplaceAll(s, " ", "")
	if n, err := strconv.Atoi(s); err == nil {
		return n, nil
	}
	for name, base := range priorityNames {
		if rest, ok := strings.CutPrefix(s, name); ok {
			if rest == "" {
				return base, nil
			}
			n, err := strconv.Atoi(rest)
			if err != nil {
				return 0, fmt.Errorf("bad priority %q", s)
			}
			return base + n, nil
		}
	}
	return 0, fmt.Errorf("bad priority %q", s)
}

func parseUint32(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil {
		return 0, err
	}
	if v > math.MaxUint32 {
		return 0, fmt.Errorf("out of range")
	}
	return uint32(v), nil
}
