package trace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// ParseNFTScript reads an nft script of "add/insert/flush/delete
// table|chain|rule|set|map|element" commands, as knftables' Fake.Dump()
// and kube-proxy's nftables --dry-run write them, applying the commands in
// order. owner is the name of kube-proxy's table ("kube-proxy"). A command
// it cannot read is an error; a rule it cannot model is kept and reported
// when a packet reaches it.
func ParseNFTScript(text, owner string) (*NFTables, error) {
	nft := &NFTables{Owner: owner}
	tables := map[string]*NFTTable{}
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		if err := nft.scriptLine(tables, line); err != nil {
			return nil, fmt.Errorf("line %d: %w: %q", lineNo, err, line)
		}
	}
	return nft, nil
}

func (nft *NFTables) table(tables map[string]*NFTTable, family, name string, create bool) *NFTTable {
	k := family + " " + name
	t := tables[k]
	if t == nil && create {
		t = &NFTTable{Family: family, Name: name, Chains: map[string]*NFTChain{}, Sets: map[string]*NFTSet{}}
		tables[k] = t
		nft.Tables = append(nft.Tables, t)
	}
	return t
}

func (nft *NFTables) dropTable(tables map[string]*NFTTable, t *NFTTable) {
	delete(tables, t.Family+" "+t.Name)
	for i, x := range nft.Tables {
		if x == t {
			nft.Tables = append(nft.Tables[:i], nft.Tables[i+1:]...)
			break
		}
	}
}

func (nft *NFTables) scriptLine(tables map[string]*NFTTable, line string) error {
	f := strings.SplitN(line, " ", 6)
	if len(f) < 4 {
		if len(f) >= 2 && f[0] == "flush" && f[1] == "ruleset" {
			for _, t := range nft.Tables {
				delete(tables, t.Family+" "+t.Name)
			}
			nft.Tables = nil
			return nil
		}
		if len(f) == 4 || (len(f) >= 3 && f[1] == "table") {
			// "add table ip name"
		} else {
			return fmt.Errorf("short command")
		}
	}
	verb, obj, family := f[0], f[1], f[2]
	switch family {
	case "ip", "ip6", "inet", "arp", "bridge", "netdev":
	default:
		return fmt.Errorf("unknown family %q", family)
	}
	tname := ""
	if len(f) > 3 {
		tname = f[3]
	}
	rest := ""
	if len(f) > 4 {
		rest = f[4]
	}
	if len(f) > 5 {
		rest += " " + f[5]
	}
	if obj == "table" {
		tname, _, _ = strings.Cut(tname, " ")
		switch verb {
		case "add", "create":
			nft.table(tables, family, tname, true)
		case "delete", "destroy":
			if t := nft.table(tables, family, tname, false); t != nil {
				nft.dropTable(tables, t)
			}
		case "flush":
			if t := nft.table(tables, family, tname, false); t != nil {
				for _, ch := range t.Chains {
					ch.Rules = nil
				}
				for _, s := range t.Sets {
					s.flush()
				}
			}
		default:
			return fmt.Errorf("unknown verb %q", verb)
		}
		return nil
	}
	create := verb == "add" || verb == "create" || verb == "insert"
	t := nft.table(tables, family, tname, create)
	if t == nil {
		if verb == "delete" || verb == "destroy" || verb == "flush" {
			return nil
		}
		return fmt.Errorf("table %s %s does not exist", family, tname)
	}
	name, spec, _ := strings.Cut(rest, " ")
	switch obj {
	case "chain":
		switch verb {
		case "add", "create":
			ch := t.Chains[name]
			if ch == nil {
				ch = &NFTChain{Name: name, Policy: "accept"}
				t.Chains[name] = ch
			}
			if spec != "" {
				if err := parseChainSpec(ch, spec); err != nil {
					return err
				}
			}
		case "flush":
			if ch := t.Chains[name]; ch != nil {
				ch.Rules = nil
			}
		case "delete", "destroy":
			delete(t.Chains, name)
		default:
			return fmt.Errorf("unknown verb %q", verb)
		}
	case "rule":
		ch := t.Chains[name]
		if ch == nil {
			return fmt.Errorf("rule for chain %q that does not exist", name)
		}
		switch verb {
		case "add", "insert":
			if strings.HasPrefix(spec, "index ") || strings.HasPrefix(spec, "handle ") || strings.HasPrefix(spec, "position ") {
				return fmt.Errorf("rule positions are not supported")
			}
			r := compileNFTText(spec)
			if verb == "insert" {
				ch.Rules = append([]*NFTRule{r}, ch.Rules...)
			} else {
				ch.Rules = append(ch.Rules, r)
			}
		default:
			return fmt.Errorf("%s rule is not supported", verb)
		}
	case "set", "map":
		switch verb {
		case "add", "create":
			s := t.Sets[name]
			if s == nil {
				s = &NFTSet{Name: name, IsMap: obj == "map"}
				t.Sets[name] = s
			}
			if spec != "" {
				s.Types = strings.Trim(spec, "{} ")
			}
		case "flush":
			if s := t.Sets[name]; s != nil {
				s.flush()
			}
		case "delete", "destroy":
			delete(t.Sets, name)
		default:
			return fmt.Errorf("unknown verb %q", verb)
		}
	case "element":
		s := t.Sets[name]
		if s == nil {
			if verb == "delete" || verb == "destroy" {
				return nil
			}
			return fmt.Errorf("element for set %q that does not exist", name)
		}
		body := strings.TrimSpace(spec)
		if !strings.HasPrefix(body, "{") || !strings.HasSuffix(body, "}") {
			return fmt.Errorf("element without braces")
		}
		body = strings.TrimSpace(body[1 : len(body)-1])
		for _, one := range splitTopLevel(body) {
			key, value, _ := strings.Cut(one, " : ")
			if i := strings.Index(key, " comment "); i >= 0 {
				key = key[:i]
			}
			e := &nElem{value: normalizeValue(strings.TrimSpace(value))}
			for _, k := range strings.Split(key, " . ") {
				e.key = append(e.key, parseAtom(strings.TrimSpace(k)))
			}
			switch verb {
			case "add", "create":
				s.add(e)
			case "delete", "destroy":
				s.remove(e.key)
			default:
				return fmt.Errorf("unknown verb %q", verb)
			}
		}
	case "counter", "flowtable", "quota", "limit", "ct":
		// Named objects that do not route packets.
	default:
		return fmt.Errorf("unknown object %q", obj)
	}
	return nil
}

// splitTopLevel splits "a, b : c" element lists on commas.
func splitTopLevel(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// normalizeValue makes a map value comparable: "goto x", "10.0.0.1 . 80".
func normalizeValue(v string) string {
	f := strings.Fields(v)
	for i, x := range f {
		if x == "." {
			continue
		}
		if a, err := netip.ParseAddr(x); err == nil {
			f[i] = a.String()
		} else if n, err := strconv.ParseUint(x, 0, 64); err == nil {
			f[i] = strconv.FormatUint(n, 10)
		}
	}
	return strings.Join(f, " ")
}

func parseChainSpec(ch *NFTChain, spec string) error {
	spec = strings.TrimSpace(spec)
	spec = strings.TrimPrefix(spec, "{")
	spec = strings.TrimSuffix(spec, "}")
	for _, part := range strings.Split(spec, ";") {
		toks := tokenizeNFT(part)
		for i := 0; i < len(toks); i++ {
			switch toks[i] {
			case "type":
				if i+1 < len(toks) {
					ch.Type = toks[i+1]
					i++
				}
			case "hook":
				if i+1 < len(toks) {
					ch.Hook = toks[i+1]
					i++
				}
			case "priority":
				p, err := parsePriority(strings.Join(toks[i+1:], ""))
				if err != nil {
					return err
				}
				ch.Priority = p
				i = len(toks)
			case "policy":
				if i+1 < len(toks) {
					ch.Policy = toks[i+1]
					i++
				}
			case "comment", "device":
				i++
			}
		}
	}
	return nil
}

// tokenizeNFT splits nft text into words; quoted strings stay one word
// (quotes kept), and braces and commas stand alone.
func tokenizeNFT(s string) []string {
	var out []string
	var cur strings.Builder
	flush := func() {
		if cur.Len() > 0 {
			out = append(out, cur.String())
			cur.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				cur.WriteString(s[i:])
				i = len(s)
				continue
			}
			cur.WriteString(s[i : i+j+2])
			i += j + 1
		case c == ' ' || c == '\t':
			flush()
		case c == '{' || c == '}' || c == ',':
			flush()
			out = append(out, string(c))
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return out
}

type nftParser struct {
	toks []string
	i    int
}

func (p *nftParser) done() bool { return p.i >= len(p.toks) }
func (p *nftParser) peek(words ...string) bool {
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
func (p *nftParser) accept(words ...string) bool {
	if p.peek(words...) {
		p.i += len(words)
		return true
	}
	return false
}
func (p *nftParser) next() (string, bool) {
	if p.i >= len(p.toks) {
		return "", false
	}
	p.i++
	return p.toks[p.i-1], true
}

// compileNFTText compiles one rule in nft's text syntax (the subset
// kube-proxy and common firewalls write); what it cannot read becomes an
// unknown statement at that point of the rule.
func compileNFTText(text string) *NFTRule {
	r := &NFTRule{Text: text}
	toks := tokenizeNFT(text)
	// A trailing comment belongs to the rule, not to its expressions.
	if n := len(toks); n >= 2 && toks[n-2] == "comment" {
		r.Comment = strings.Trim(toks[n-1], `"`)
		toks = toks[:n-2]
		r.Text = strings.TrimSpace(text[:strings.LastIndex(text, "comment")])
	}
	p := &nftParser{toks: toks}
	for !p.done() {
		st, err := p.stmt()
		if err != nil {
			r.stmts = append(r.stmts, nStmt{kind: sUnknown, reason: fmt.Sprintf("%v (at %q)", err, strings.Join(p.toks[min(p.i, len(p.toks)):], " "))})
			break
		}
		r.stmts = append(r.stmts, st...)
	}
	return r
}

var verdictWords = map[string]bool{"accept": true, "drop": true, "return": true, "continue": true}

func (p *nftParser) stmt() ([]nStmt, error) {
	tok := p.toks[p.i]
	switch {
	case verdictWords[tok]:
		p.i++
		return []nStmt{{kind: sVerdict, verdict: tok}}, nil
	case tok == "reject":
		p.i++
		if p.accept("with") {
			// "with icmp type port-unreachable", "with tcp reset", ...
			for !p.done() && !verdictWords[p.toks[p.i]] && p.toks[p.i] != "comment" && p.toks[p.i] != "counter" {
				p.i++
			}
		}
		return []nStmt{{kind: sVerdict, verdict: "reject"}}, nil
	case tok == "jump" || tok == "goto":
		p.i++
		target, ok := p.next()
		if !ok {
			return nil, fmt.Errorf("%s without a chain", tok)
		}
		return []nStmt{{kind: sVerdict, verdict: tok + " " + target}}, nil
	case tok == "counter":
		p.i++
		if p.accept("name") {
			p.next()
		} else if p.accept("packets") {
			p.next()
			if p.accept("bytes") {
				p.next()
			}
		}
		return []nStmt{{kind: sNoop}}, nil
	case tok == "log":
		p.i++
		for p.accept("prefix") || p.accept("level") || p.accept("flags") || p.accept("group") {
			p.next()
		}
		return []nStmt{{kind: sNoop}}, nil
	case tok == "comment":
		p.i++
		p.next()
		return []nStmt{{kind: sNoop}}, nil
	case tok == "masquerade":
		p.i++
		if !p.done() {
			switch p.toks[p.i] {
			case "fully-random", "random", "persistent", "random,persistent", "fully-random,persistent":
				p.i++
			case "to":
				return nil, fmt.Errorf("masquerade to ports not modelled")
			}
		}
		return []nStmt{{kind: sMasq}}, nil
	case tok == "dnat":
		return p.dnat()
	case tok == "update" || (tok == "add" && p.i+1 < len(p.toks) && strings.HasPrefix(p.toks[p.i+1], "@")):
		p.i++
		set, _ := p.next()
		if !strings.HasPrefix(set, "@") {
			return nil, fmt.Errorf("%s without a set", tok)
		}
		// "{ ip saddr [timeout 3h] }"
		if !p.accept("{") {
			return nil, fmt.Errorf("%s @set without { key }", tok)
		}
		for {
			w, ok := p.next()
			if !ok {
				return nil, fmt.Errorf("unterminated %s", tok)
			}
			if w == "}" {
				break
			}
		}
		return []nStmt{{kind: sSetUpdate, setName: set[1:]}}, nil
	case p.peek("mark", "set") || p.peek("meta", "mark", "set"):
		if !p.accept("mark", "set") {
			p.accept("meta", "mark", "set")
		}
		st := nStmt{kind: sMarkSet}
		if p.accept("mark") || p.accept("meta", "mark") {
			op, _ := p.next()
			switch op {
			case "or", "|":
				st.markOp = "|"
			case "xor", "^":
				st.markOp = "^"
			case "and", "&":
				st.markOp = "&"
			default:
				return nil, fmt.Errorf("mark operation %q not modelled", op)
			}
		}
		v, _ := p.next()
		n, err := parseUint32(v)
		if err != nil {
			return nil, fmt.Errorf("mark value %q: %w", v, err)
		}
		st.markOperand = n
		return []nStmt{st}, nil
	}
	return p.match()
}

// primary reads one packet field; implied adds the matches a field implies
// ("tcp dport" implies "meta l4proto tcp").
func (p *nftParser) primary() (nExpr, []nStmt, error) {
	tok, _ := p.next()
	switch tok {
	case "ip", "ip6":
		f, _ := p.next()
		switch f {
		case "saddr", "daddr":
			return nExpr{kind: eField, field: f}, nil, nil
		case "protocol", "nexthdr":
			return nExpr{kind: eField, field: "l4proto"}, nil, nil
		}
		return nExpr{}, nil, fmt.Errorf("%s %s not modelled", tok, f)
	case "th", "tcp", "udp", "sctp":
		f, _ := p.next()
		if f != "dport" {
			return nExpr{}, nil, fmt.Errorf("%s %s not modelled", tok, f)
		}
		var implied []nStmt
		if tok != "th" {
			implied = []nStmt{{kind: sMatch, left: nExpr{kind: eField, field: "l4proto"}, atoms: []nAtom{{s: tok}}}}
		}
		return nExpr{kind: eField, field: "dport"}, implied, nil
	case "meta":
		f, _ := p.next()
		switch f {
		case "l4proto", "mark", "iifname", "oifname", "nfproto":
			if f == "oifname" {
				return nExpr{}, nil, fmt.Errorf("meta oifname not modelled")
			}
			return nExpr{kind: eField, field: f}, nil, nil
		}
		return nExpr{}, nil, fmt.Errorf("meta %s not modelled", f)
	case "mark", "iifname":
		return nExpr{kind: eField, field: tok}, nil, nil
	case "fib":
		f, _ := p.next()
		if f != "saddr" && f != "daddr" {
			return nExpr{}, nil, fmt.Errorf("fib %s not modelled", f)
		}
		if !p.accept("type") {
			return nExpr{}, nil, fmt.Errorf("fib %s without type not modelled", f)
		}
		return nExpr{kind: eField, field: "fib-" + f}, nil, nil
	case "ct":
		f, _ := p.next()
		if f != "state" && f != "status" {
			return nExpr{}, nil, fmt.Errorf("ct %s not modelled", f)
		}
		return nExpr{kind: eField, field: "ct" + f}, nil, nil
	case "numgen":
		if !p.accept("random", "mod") {
			return nExpr{}, nil, fmt.Errorf("numgen other than random not modelled")
		}
		v, _ := p.next()
		mod, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return nExpr{}, nil, fmt.Errorf("numgen modulus %q", v)
		}
		e := nExpr{kind: eNumgen, mod: mod}
		if p.accept("offset") {
			v, _ := p.next()
			if e.offset, err = strconv.ParseUint(v, 10, 32); err != nil {
				return nExpr{}, nil, fmt.Errorf("numgen offset %q", v)
			}
		}
		return e, nil, nil
	}
	return nExpr{}, nil, fmt.Errorf("expression %q not modelled", tok)
}

// expr reads "primary (. primary)* [and|& N]".
func (p *nftParser) expr() (nExpr, []nStmt, error) {
	e, implied, err := p.primary()
	if err != nil {
		return e, nil, err
	}
	if p.peek(".") {
		c := nExpr{kind: eConcat, parts: []nExpr{e}}
		for p.accept(".") {
			x, imp, err := p.primary()
			if err != nil {
				return e, nil, err
			}
			c.parts = append(c.parts, x)
			implied = append(implied, imp...)
		}
		e = c
	}
	for _, op := range []string{"and", "&", "or", "|", "xor", "^"} {
		if p.accept(op) {
			v, _ := p.next()
			n, err := strconv.ParseUint(v, 0, 64)
			if err != nil {
				return e, nil, fmt.Errorf("%s operand %q", op, v)
			}
			sym := map[string]string{"and": "&", "or": "|", "xor": "^"}[op]
			if sym == "" {
				sym = op
			}
			e = nExpr{kind: eBitop, parts: []nExpr{e}, op: sym, operand: n}
			break
		}
	}
	return e, implied, nil
}

func (p *nftParser) match() ([]nStmt, error) {
	left, implied, err := p.expr()
	if err != nil {
		return nil, err
	}
	st := nStmt{kind: sMatch, left: left}
	if p.accept("vmap") {
		st.kind = sVmap
		if err := p.mapRef(&st); err != nil {
			return nil, err
		}
		return append(implied, st), nil
	}
	switch {
	case p.accept("!="), p.accept("ne"):
		st.neg = true
	case p.accept("=="), p.accept("eq"):
	}
	if left.kind == eField && (left.field == "ctstate" || left.field == "ctstatus") {
		v, ok := p.next()
		if !ok {
			return nil, fmt.Errorf("ct without a value")
		}
		st.flags = strings.Split(v, ",")
		for p.accept(",") {
			v, _ := p.next()
			st.flags = append(st.flags, v)
		}
		return append(implied, st), nil
	}
	v, ok := p.next()
	if !ok {
		return nil, fmt.Errorf("match without a value")
	}
	switch {
	case strings.HasPrefix(v, "@"):
		st.setName = v[1:]
	case v == "{":
		for {
			w, ok := p.next()
			if !ok {
				return nil, fmt.Errorf("unterminated { }")
			}
			if w == "}" {
				break
			}
			if w == "," {
				continue
			}
			st.atoms = append(st.atoms, parseAtom(w))
		}
	default:
		st.atoms = []nAtom{parseAtom(v)}
	}
	return append(implied, st), nil
}

// mapRef reads "@name" or "{ k : v , ... }" after vmap/map.
func (p *nftParser) mapRef(st *nStmt) error {
	v, ok := p.next()
	if !ok {
		return fmt.Errorf("map without a name")
	}
	if strings.HasPrefix(v, "@") {
		st.setName = v[1:]
		return nil
	}
	if v != "{" {
		return fmt.Errorf("map %q not modelled", v)
	}
	var cur []string
	flushElem := func() error {
		if len(cur) == 0 {
			return nil
		}
		s := strings.Join(cur, " ")
		k, val, ok := strings.Cut(s, " : ")
		if !ok {
			return fmt.Errorf("map element %q without a value", s)
		}
		e := &nElem{value: normalizeValue(val)}
		for _, part := range strings.Split(k, " . ") {
			e.key = append(e.key, parseAtom(strings.TrimSpace(part)))
		}
		st.anon = append(st.anon, e)
		cur = nil
		return nil
	}
	for {
		w, ok := p.next()
		if !ok {
			return fmt.Errorf("unterminated map")
		}
		if w == "}" {
			return flushElem()
		}
		if w == "," {
			if err := flushElem(); err != nil {
				return err
			}
			continue
		}
		cur = append(cur, w)
	}
}

func (p *nftParser) dnat() ([]nStmt, error) {
	p.i++ // dnat
	p.accept("ip")
	p.accept("ip6")
	p.accept("addr", ".", "port")
	if !p.accept("to") {
		return nil, fmt.Errorf("dnat form not modelled")
	}
	if p.done() {
		return nil, fmt.Errorf("dnat without a target")
	}
	tok := p.toks[p.i]
	if ap, err := parseDNATTo(tok); err == nil {
		p.i++
		return []nStmt{{kind: sDNAT, dnatAddr: ap.Addr(), dnatPort: ap.Port()}}, nil
	}
	left, implied, err := p.expr()
	if err != nil {
		return nil, err
	}
	if !p.accept("map") {
		return nil, fmt.Errorf("dnat to an expression without a map not modelled")
	}
	st := nStmt{kind: sDNAT, left: left}
	if err := p.mapRef(&st); err != nil {
		return nil, err
	}
	return append(implied, st), nil
}
