package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Difference is one way a live ruleset differs from what kube-proxy would
// program.
type Difference struct {
	// Where names the table, chain and rule position, or the set.
	Where string `json:"where"`
	// Live and Expected are the rule (or element) as found and as
	// expected; one is empty when the thing is missing on that side.
	Live     string `json:"live,omitempty"`
	Expected string `json:"expected,omitempty"`
}

func (d Difference) String() string {
	switch {
	case d.Live == "":
		return fmt.Sprintf("%s: missing from the live rules: %s", d.Where, d.Expected)
	case d.Expected == "":
		return fmt.Sprintf("%s: in the live rules but not expected: %s", d.Where, d.Live)
	}
	return fmt.Sprintf("%s:\n    live:     %s\n    expected: %s", d.Where, d.Live, d.Expected)
}

// CompareIPTables compares kube-proxy's chains (KUBE-*, canaries aside)
// and the builtin chains' jumps into them, rule by rule, by meaning: the
// order iptables-save prints options in, and how it spells addresses,
// marks and probabilities, do not count. It returns at most limit
// differences (all with limit <= 0).
func CompareIPTables(live, expected *IPTables, limit int) []Difference {
	var out []Difference
	add := func(d Difference) bool {
		out = append(out, d)
		return limit > 0 && len(out) >= limit
	}
	tables := unionKeys(live.Tables, expected.Tables)
	for _, table := range tables {
		lc, ec := live.Tables[table], expected.Tables[table]
		chains := unionKeys(lc, ec)
		for _, chain := range chains {
			owned := iptablesOwned(chain) && !strings.HasSuffix(chain, "-CANARY")
			builtin := strings.ToUpper(chain) == chain && !strings.Contains(chain, "-")
			if !owned && !builtin {
				continue
			}
			l, e := lc[chain], ec[chain]
			where := table + " " + chain
			if owned && l == nil {
				if add(Difference{Where: where, Expected: "chain " + chain}) {
					return out
				}
				continue
			}
			if owned && e == nil {
				if add(Difference{Where: where, Live: "chain " + chain}) {
					return out
				}
				continue
			}
			lr, er := iptComparable(l, builtin), iptComparable(e, builtin)
			for i := 0; i < max(len(lr), len(er)); i++ {
				d := Difference{Where: fmt.Sprintf("%s rule %d", where, i+1)}
				switch {
				case i >= len(lr):
					d.Expected = er[i].Raw
				case i >= len(er):
					d.Live = lr[i].Raw
				case lr[i].canonical() != er[i].canonical():
					d.Live, d.Expected = lr[i].Raw, er[i].Raw
				default:
					continue
				}
				if add(d) {
					return out
				}
				// After one difference in a chain the rest is shifted;
				// one report per chain is what helps.
				break
			}
		}
	}
	return out
}

// iptComparable is the part of a chain kube-proxy owns: all of its own
// chains, and of a builtin chain only the jumps into KUBE-* chains.
func iptComparable(ch *IPTChain, builtin bool) []*IPTRule {
	if ch == nil {
		return nil
	}
	var out []*IPTRule
	for _, r := range ch.Rules {
		if builtin && (!iptablesOwned(r.target) || strings.HasSuffix(r.target, "-CANARY")) {
			continue
		}
		if localhostNodePortCounter(r) {
			continue
		}
		out = append(out, r)
	}
	return out
}

// localhostNodePortCounter reports kube-proxy's rule that counts localhost
// NodePort connections with nfacct. kube-proxy writes it only when the
// kernel has nfnetlink_acct, which --dry-run does not assume; it jumps
// where the NodePort rule after it does, so leaving it out of a comparison
// hides no change of behaviour.
func localhostNodePortCounter(r *IPTRule) bool {
	return r.Chain == "KUBE-NODEPORTS" && wordAfter(r.Words, "--nfacct-name") == "localhost_nps_accepted_pkts"
}

// canonical is the rule's meaning as a string.
func (r *IPTRule) canonical() string {
	if r.unknown != "" {
		w := slices.Clone(r.Words)
		slices.Sort(w)
		return "unknown:" + strings.Join(w, " ")
	}
	var parts []string
	for _, m := range r.matches {
		var s string
		switch m.kind {
		case mProto:
			s = "p=" + m.str
		case mSrc:
			s = "s=" + m.pfx.String()
		case mDst:
			s = "d=" + m.pfx.String()
		case mDport:
			s = fmt.Sprintf("dport=%d-%d", m.lo, m.hi)
		case mIIF:
			s = "i=" + m.str
		case mSrcLocal:
			s = "srctype=LOCAL"
		case mDstLocal:
			s = "dsttype=LOCAL"
		case mCtState:
			st := slices.Clone(m.states)
			slices.Sort(st)
			s = "ctstate=" + strings.Join(st, ",")
		case mMark:
			s = fmt.Sprintf("mark=%#x/%#x", m.value, m.mask)
		case mRecentCheck:
			s = "rcheck"
		// ipvs mode's matches: without them a rule testing another set,
		// or another virtual server, would compare equal.
		case mSet:
			s = "set=" + m.str + ":" + strings.Join(m.states, ",")
		case mPhysdevIsIn:
			s = "physdev-is-in"
		case mIPVS:
			s = "ipvs"
		case mVAddr:
			s = "vaddr=" + m.pfx.String()
		case mVPort:
			s = fmt.Sprintf("vport=%d-%d", m.lo, m.hi)
		case mVProto:
			s = "vproto=" + m.str
		}
		if m.neg {
			s = "!" + s
		}
		parts = append(parts, s)
	}
	slices.Sort(parts)
	if r.prob != 1 {
		parts = append(parts, "prob="+strconv.FormatFloat(r.prob, 'f', 4, 64))
	}
	if r.recentName != "" {
		parts = append(parts, "recent="+r.recentName, "seconds="+wordAfter(r.Words, "--seconds"))
	}
	if r.recentSet {
		parts = append(parts, "recent-set")
	}
	parts = append(parts, "comment="+r.comment, "target="+r.target)
	switch r.target {
	case "MARK":
		v, m, _ := parseMarkMask(r.targetArgs[1])
		switch r.targetArgs[0] {
		case "--or-mark":
			m = v
		case "--xor-mark":
			m = 0
		case "--and-mark":
			v, m = 0, ^v
		}
		parts = append(parts, fmt.Sprintf("xmark=%#x/%#x", v, m))
	case "DNAT":
		parts = append(parts, "to="+flagValue(r.targetArgs, "--to-destination"))
	case "MASQUERADE":
		parts = append(parts, "args="+strings.Join(r.targetArgs, " "))
	}
	return strings.Join(parts, " ")
}

func wordAfter(words []string, w string) string {
	for i := 0; i+1 < len(words); i++ {
		if words[i] == w {
			return words[i+1]
		}
	}
	return ""
}

func unionKeys[V any](a, b map[string]V) []string {
	var out []string
	for k := range a {
		out = append(out, k)
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// CompareNFT compares kube-proxy's table (nft.Owner) of each family
// expected has: its chains with their hooks and rules, and its sets' and
// maps' elements (affinity sets, which the kernel fills, aside). Rules
// compare by meaning, so nft's JSON and knftables' text for the same rule
// are equal, and a numgen lookup ("dnat to numgen random mod N offset B map
// @endpoints-…", or a numgen vmap) compares as the share of packets it sends
// to each target: the map it reads, the slots it uses and their order are
// layout, which kube-proxy's incremental syncs and full syncs lay out
// differently for the same balancing. Such maps are therefore compared only
// through the rules that use them, not element by element. It returns at
// most limit differences (all with limit <= 0).
func CompareNFT(live, expected *NFTables, limit int) []Difference {
	var out []Difference
	add := func(d Difference) bool {
		out = append(out, d)
		return limit > 0 && len(out) >= limit
	}
	owned := func(n *NFTables) map[string]*NFTTable {
		m := map[string]*NFTTable{}
		for _, t := range n.Tables {
			if t.Name == expected.Owner && (t.Family == "ip" || t.Family == "ip6" || t.Family == "inet") {
				m[t.Family+" "+t.Name] = t
			}
		}
		return m
	}
	lt, et := owned(live), owned(expected)
	families := map[string]bool{}
	for _, t := range et {
		families[t.Family] = true
	}
	for _, key := range unionKeys(lt, et) {
		l, e := lt[key], et[key]
		if e == nil && !families[l.Family] {
			// expected covers other families only (one family's dry run).
			continue
		}
		if l == nil {
			if add(Difference{Where: "table " + key, Expected: "table " + key}) {
				return out
			}
			continue
		}
		if e == nil {
			if add(Difference{Where: "table " + key, Live: "table " + key}) {
				return out
			}
			continue
		}
		dispatch := numgenMaps(l)
		for name := range numgenMaps(e) {
			dispatch[name] = true
		}
		for _, name := range unionKeys(l.Chains, e.Chains) {
			lc, ec := l.Chains[name], e.Chains[name]
			where := key + " chain " + name
			switch {
			case lc == nil:
				if add(Difference{Where: where, Expected: "chain " + name}) {
					return out
				}
				continue
			case ec == nil:
				if add(Difference{Where: where, Live: "chain " + name}) {
					return out
				}
				continue
			case lc.Hook != ec.Hook || lc.Priority != ec.Priority || (ec.Hook != "" && lc.Type != ec.Type):
				if add(Difference{Where: where, Live: chainSpec(lc), Expected: chainSpec(ec)}) {
					return out
				}
				continue
			}
			for i := 0; i < max(len(lc.Rules), len(ec.Rules)); i++ {
				d := Difference{Where: fmt.Sprintf("%s rule %d", where, i+1)}
				switch {
				case i >= len(lc.Rules):
					d.Expected = ec.Rules[i].Text
				case i >= len(ec.Rules):
					d.Live = lc.Rules[i].Text
				case lc.Rules[i].canonical(l) != ec.Rules[i].canonical(e):
					d.Live, d.Expected = lc.Rules[i].textWithShares(l), ec.Rules[i].textWithShares(e)
				default:
					continue
				}
				if add(d) {
					return out
				}
				break
			}
		}
		for _, name := range unionKeys(l.Sets, e.Sets) {
			if dispatch[name] {
				continue
			}
			ls, es := l.Sets[name], e.Sets[name]
			where := key + " set " + name
			switch {
			case ls == nil:
				if add(Difference{Where: where, Expected: "set " + name}) {
					return out
				}
				continue
			case es == nil:
				if add(Difference{Where: where, Live: "set " + name}) {
					return out
				}
				continue
			}
			if strings.HasPrefix(name, "affinity-") {
				continue
			}
			le, ee := ls.elements(), es.elements()
			for _, k := range unionKeys(le, ee) {
				lv, lok := le[k]
				ev, eok := ee[k]
				d := Difference{Where: where + " element " + k}
				switch {
				case !lok:
					d.Expected = elemString(k, ev)
				case !eok:
					d.Live = elemString(k, lv)
				case lv != ev:
					d.Live, d.Expected = elemString(k, lv), elemString(k, ev)
				default:
					continue
				}
				if add(d) {
					return out
				}
			}
		}
	}
	return out
}

func chainSpec(c *NFTChain) string {
	if c.Hook == "" {
		return "chain " + c.Name
	}
	return fmt.Sprintf("chain %s { type %s hook %s priority %d }", c.Name, c.Type, c.Hook, c.Priority)
}

func elemString(k, v string) string {
	if v == "" {
		return "{ " + k + " }"
	}
	return "{ " + k + " : " + v + " }"
}

func (s *NFTSet) elements() map[string]string {
	m := make(map[string]string, s.count)
	for k, e := range s.exact {
		m[k] = e.value
	}
	for _, e := range s.ranged {
		parts := make([]string, len(e.key))
		for i, a := range e.key {
			parts[i] = a.s
		}
		m[keyString(parts)] = e.value
	}
	return m
}

// numgenMaps names the maps of t that rules look up by a numgen slot.
func numgenMaps(t *NFTTable) map[string]bool {
	m := map[string]bool{}
	for _, ch := range t.Chains {
		for _, r := range ch.Rules {
			for i := range r.stmts {
				st := &r.stmts[i]
				if (st.kind == sDNAT || st.kind == sVmap) && st.left.kind == eNumgen && st.setName != "" {
					m[st.setName] = true
				}
			}
		}
	}
	return m
}

// canonical is the rule's meaning as a string; t, the rule's table, holds
// the maps its numgen lookups read.
func (r *NFTRule) canonical(t *NFTTable) string {
	parts := make([]string, 0, len(r.stmts))
	for i := range r.stmts {
		if r.stmts[i].kind == sNoop {
			continue
		}
		parts = append(parts, r.stmts[i].canonical(t))
	}
	return strings.Join(parts, "; ")
}

// textWithShares is the rule's text, and for a numgen lookup what it does
// with packets: the map's slots are not compared, so the text alone would
// not show the difference.
func (r *NFTRule) textWithShares(t *NFTTable) string {
	for i := range r.stmts {
		st := &r.stmts[i]
		if (st.kind == sDNAT || st.kind == sVmap) && st.left.kind == eNumgen {
			return r.Text + " [shares: " + numgenShares(st, t) + "]"
		}
	}
	return r.Text
}

// numgenShares is what a numgen-keyed lookup does with packets: the share
// (a reduced fraction) of them that goes to each map value, "-" for the
// share that finds an empty slot (the lookup fails and the rule does not
// match). Which slots hold which value, and where the slots start, do not
// show.
func numgenShares(st *nStmt, t *NFTTable) string {
	vals, reason := numgenValues(&st.left)
	if reason != "" {
		return "?" + reason
	}
	var set *NFTSet
	if st.setName != "" {
		if set = t.Sets[st.setName]; set == nil {
			return "?no map"
		}
	}
	counts := map[string]uint64{}
	for _, v := range vals {
		key := []datum{numDatum(v)}
		var e *nElem
		if set != nil {
			e = set.lookup(key)
		} else {
			e = anonLookup(st.anon, key)
		}
		if e == nil {
			counts["-"]++
		} else {
			counts[e.value]++
		}
	}
	return sharesString(counts, uint64(len(vals)))
}

// sharesString spells counts out of n as sorted, reduced fractions.
func sharesString(counts map[string]uint64, n uint64) string {
	parts := make([]string, 0, len(counts))
	for v, c := range counts {
		g := gcd(c, n)
		parts = append(parts, fmt.Sprintf("%s=%d/%d", v, c/g, n/g))
	}
	slices.Sort(parts)
	return "{" + strings.Join(parts, ",") + "}"
}

func gcd(a, b uint64) uint64 {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

func (e *nExpr) canonical() string {
	switch e.kind {
	case eField:
		return e.field
	case eNumgen:
		return fmt.Sprintf("numgen(%d+%d)", e.mod, e.offset)
	case eConcat:
		p := make([]string, len(e.parts))
		for i := range e.parts {
			p[i] = e.parts[i].canonical()
		}
		return strings.Join(p, ".")
	case eBitop:
		return fmt.Sprintf("(%s%s%d)", e.parts[0].canonical(), e.op, e.operand)
	}
	return "?"
}

func (st *nStmt) canonical(t *NFTTable) string {
	switch st.kind {
	case sMatch:
		if st.left.kind == eNumgen {
			// The share of packets that match, not which numbers do.
			vals, reason := numgenValues(&st.left)
			if reason != "" {
				return "match numgen ?" + reason
			}
			hit := uint64(0)
			for _, v := range vals {
				if atomsMatch(st.atoms, []datum{numDatum(v)}) != st.neg {
					hit++
				}
			}
			return "match numgen " + sharesString(map[string]uint64{"hit": hit}, uint64(len(vals)))
		}
		neg := "=="
		if st.neg {
			neg = "!="
		}
		rhs := "@" + st.setName
		if st.setName == "" {
			if len(st.flags) > 0 {
				f := slices.Clone(st.flags)
				slices.Sort(f)
				rhs = strings.Join(f, ",")
			} else {
				rhs = atomsCanonical(st.atoms)
			}
		}
		return "match " + st.left.canonical() + neg + rhs
	case sVmap:
		if st.left.kind == eNumgen {
			return "vmap numgen " + numgenShares(st, t)
		}
		return "vmap " + st.left.canonical() + " " + mapCanonical(st)
	case sVerdict:
		return st.verdict
	case sDNAT:
		if st.setName == "" && st.anon == nil {
			return fmt.Sprintf("dnat %s:%d", st.dnatAddr, st.dnatPort)
		}
		if st.left.kind == eNumgen {
			return "dnat numgen " + numgenShares(st, t)
		}
		return "dnat " + st.left.canonical() + " " + mapCanonical(st)
	case sMasq:
		return "masquerade"
	case sMarkSet:
		return fmt.Sprintf("mark set %s %d", st.markOp, st.markOperand)
	case sSetUpdate:
		return "update @" + st.setName
	case sUnknown:
		return "unknown " + st.reason
	}
	return "noop"
}

func mapCanonical(st *nStmt) string {
	if st.setName != "" {
		return "@" + st.setName
	}
	p := make([]string, len(st.anon))
	for i, e := range st.anon {
		k := make([]string, len(e.key))
		for j, a := range e.key {
			k[j] = a.s
		}
		p[i] = keyString(k) + ":" + e.value
	}
	slices.Sort(p)
	return "{" + strings.Join(p, ",") + "}"
}

// atomsCanonical sorts a literal set and drops elements another element
// covers, as nft merges them when it loads an interval set.
func atomsCanonical(atoms []nAtom) string {
	var keep []string
	for i, a := range atoms {
		lo, hi := a.alo, a.ahi
		if !a.isAddr {
			ad, err := netip.ParseAddr(a.s)
			if err != nil {
				keep = append(keep, a.s)
				continue
			}
			lo, hi = ad, ad
		}
		covered := false
		for j, b := range atoms {
			if i == j || !b.isAddr {
				continue
			}
			inside := b.alo.Compare(lo) <= 0 && b.ahi.Compare(hi) >= 0
			same := b.alo == lo && b.ahi == hi
			// Of two equal elements, the first one stays.
			if inside && (!same || j < i) {
				covered = true
				break
			}
		}
		if !covered {
			keep = append(keep, a.s)
		}
	}
	slices.Sort(keep)
	return "{" + strings.Join(keep, ",") + "}"
}
