package trace

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// ParseNFTJSON reads `nft -j list ruleset` or `nft -j list table ...`
// output. owner is the name of kube-proxy's table ("kube-proxy"). Malformed
// JSON is an error; an expression it cannot model is kept and reported when
// a packet reaches it.
func ParseNFTJSON(data []byte, owner string) (*NFTables, error) {
	// One pass: objects decode straight into their types, expressions and
	// elements into generic values the compiler walks (a 10k-Service
	// ruleset is several MB; scanning it once matters).
	var doc struct {
		Nftables []jsonItem `json:"nftables"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("nft JSON: %w", err)
	}
	if doc.Nftables == nil {
		return nil, fmt.Errorf("nft JSON: no \"nftables\" array")
	}
	nft := &NFTables{Owner: owner}
	tables := map[string]*NFTTable{}
	for i := range doc.Nftables {
		if err := nft.jsonObject(tables, &doc.Nftables[i]); err != nil {
			return nil, fmt.Errorf("nft JSON item %d: %w", i, err)
		}
	}
	return nft, nil
}

type jsonTableRef struct {
	Family string `json:"family"`
	Table  string `json:"table"`
	Name   string `json:"name"`
}

type jsonChain struct {
	jsonTableRef
	Type   string `json:"type"`
	Hook   string `json:"hook"`
	Prio   any    `json:"prio"`
	Policy string `json:"policy"`
}

type jsonRule struct {
	Family  string `json:"family"`
	Table   string `json:"table"`
	Chain   string `json:"chain"`
	Comment string `json:"comment"`
	Expr    []any  `json:"expr"`
}

type jsonSet struct {
	jsonTableRef
	Type any   `json:"type"`
	Elem []any `json:"elem"`
}

// jsonItem is one element of the "nftables" array; one field is set.
type jsonItem struct {
	Table *jsonTableRef `json:"table"`
	Chain *jsonChain    `json:"chain"`
	Rule  *jsonRule     `json:"rule"`
	Set   *jsonSet      `json:"set"`
	Map   *jsonSet      `json:"map"`
}

func (nft *NFTables) jsonObject(tables map[string]*NFTTable, it *jsonItem) error {
	switch {
	case it.Table != nil:
		t := it.Table
		if t.Family == "" || t.Name == "" {
			return fmt.Errorf("table without family or name")
		}
		nft.table(tables, t.Family, t.Name, true)
	case it.Chain != nil:
		c := it.Chain
		if c.Name == "" || c.Family == "" || c.Table == "" {
			return fmt.Errorf("chain without a name, family or table")
		}
		t := nft.table(tables, c.Family, c.Table, true)
		ch := &NFTChain{Name: c.Name, Type: c.Type, Hook: c.Hook, Policy: c.Policy}
		if ch.Policy == "" {
			ch.Policy = "accept"
		}
		switch p := c.Prio.(type) {
		case nil:
		case json.Number:
			n, err := strconv.Atoi(p.String())
			if err != nil {
				return fmt.Errorf("chain %s priority %s: %w", c.Name, p, err)
			}
			ch.Priority = n
		case string:
			n, err := parsePriority(p)
			if err != nil {
				return fmt.Errorf("chain %s: %w", c.Name, err)
			}
			ch.Priority = n
		default:
			return fmt.Errorf("chain %s priority %v", c.Name, p)
		}
		if old := t.Chains[c.Name]; old != nil {
			ch.Rules = old.Rules
		}
		t.Chains[c.Name] = ch
	case it.Rule != nil:
		r := it.Rule
		if r.Family == "" || r.Table == "" || r.Chain == "" {
			return fmt.Errorf("rule without a family, table or chain")
		}
		t := nft.table(tables, r.Family, r.Table, true)
		ch := t.Chains[r.Chain]
		if ch == nil {
			ch = &NFTChain{Name: r.Chain, Policy: "accept"}
			t.Chains[r.Chain] = ch
		}
		ch.Rules = append(ch.Rules, compileNFTJSON(r.Expr, r.Comment))
	case it.Set != nil || it.Map != nil:
		s, isMap := it.Set, false
		if s == nil {
			s, isMap = it.Map, true
		}
		if s.Family == "" || s.Table == "" || s.Name == "" {
			return fmt.Errorf("set without a family, table or name")
		}
		t := nft.table(tables, s.Family, s.Table, true)
		set := &NFTSet{Name: s.Name, IsMap: isMap, Types: fmt.Sprint(s.Type)}
		for _, e := range s.Elem {
			el, err := jsonElem(e, isMap)
			if err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			set.add(el)
		}
		t.Sets[s.Name] = set
	default:
		// counters, quotas, flowtables, ct helpers, metainfo... do not
		// route packets.
	}
	return nil
}

// jsonElem reads a set element ("10.0.0.1", {"concat": [...]}, {"prefix":
// ...}, {"elem": {"val": ...}}) or a map element ([key, value]).
func jsonElem(v any, isMap bool) (*nElem, error) {
	var err error
	e := &nElem{}
	if isMap {
		pair, ok := v.([]any)
		if !ok || len(pair) != 2 {
			return nil, fmt.Errorf("map element %v is not [key, value]", v)
		}
		if e.key, err = jsonKey(pair[0]); err != nil {
			return nil, err
		}
		if e.value, err = jsonData(pair[1]); err != nil {
			return nil, err
		}
		return e, nil
	}
	if e.key, err = jsonKey(v); err != nil {
		return nil, err
	}
	return e, nil
}

// jsonKey reads an element key into atoms.
func jsonKey(v any) ([]nAtom, error) {
	if m, ok := v.(map[string]any); ok {
		if el, ok := m["elem"].(map[string]any); ok {
			// {"elem": {"val": ..., "timeout": ..., "expires": ...}}
			return jsonKey(el["val"])
		}
		if c, ok := m["concat"].([]any); ok {
			var out []nAtom
			for _, part := range c {
				a, err := jsonAtom(part)
				if err != nil {
					return nil, err
				}
				out = append(out, a)
			}
			return out, nil
		}
	}
	a, err := jsonAtom(v)
	if err != nil {
		return nil, err
	}
	return []nAtom{a}, nil
}

func jsonAtom(v any) (nAtom, error) {
	switch x := v.(type) {
	case string:
		return parseAtom(x), nil
	case json.Number:
		return parseAtom(x.String()), nil
	case map[string]any:
		if p, ok := x["prefix"].(map[string]any); ok {
			addr, _ := p["addr"].(string)
			n, _ := p["len"].(json.Number)
			a, err := netip.ParseAddr(addr)
			if err != nil {
				return nAtom{}, fmt.Errorf("prefix address %q: %w", addr, err)
			}
			l, err := strconv.Atoi(n.String())
			if err != nil || l < 0 || l > a.BitLen() {
				return nAtom{}, fmt.Errorf("prefix length %q", n)
			}
			return prefixAtom(netip.PrefixFrom(a, l)), nil
		}
		if r, ok := x["range"].([]any); ok && len(r) == 2 {
			lo, err1 := jsonAtom(r[0])
			hi, err2 := jsonAtom(r[1])
			if err1 != nil || err2 != nil {
				return nAtom{}, fmt.Errorf("range %v", r)
			}
			return parseAtom(lo.s + "-" + hi.s), nil
		}
		if el, ok := x["elem"].(map[string]any); ok {
			return jsonAtom(el["val"])
		}
	}
	return nAtom{}, fmt.Errorf("set value %v not modelled", v)
}

// jsonData reads map data: a verdict or a value (concat of address and
// port).
func jsonData(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return normalizeValue(x), nil
	case json.Number:
		return normalizeValue(x.String()), nil
	case map[string]any:
		for _, w := range []string{"accept", "drop", "return", "continue"} {
			if _, ok := x[w]; ok {
				return w, nil
			}
		}
		if _, ok := x["reject"]; ok {
			return "reject", nil
		}
		for _, w := range []string{"jump", "goto"} {
			if j, ok := x[w].(map[string]any); ok {
				t, _ := j["target"].(string)
				if t == "" {
					return "", fmt.Errorf("%s without a target", w)
				}
				return w + " " + t, nil
			}
		}
		if c, ok := x["concat"].([]any); ok {
			parts := make([]string, 0, len(c))
			for _, p := range c {
				s, err := jsonData(p)
				if err != nil {
					return "", err
				}
				parts = append(parts, s)
			}
			return strings.Join(parts, " . "), nil
		}
	}
	return "", fmt.Errorf("map value %v not modelled", v)
}

// compileNFTJSON compiles one rule's JSON statements.
func compileNFTJSON(exprs []any, comment string) *NFTRule {
	r := &NFTRule{Comment: comment}
	text := make([]string, 0, len(exprs))
	for _, v := range exprs {
		sts, txt, err := jsonStmt(v)
		if err != nil {
			txt = compactJSON(v)
			r.stmts = append(r.stmts, nStmt{kind: sUnknown, reason: fmt.Sprintf("%v (in %s)", err, txt)})
		} else {
			r.stmts = append(r.stmts, sts...)
		}
		text = append(text, txt)
	}
	r.Text = strings.Join(text, " ")
	return r
}

func compactJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func jsonStmt(v any) ([]nStmt, string, error) {
	m, ok := v.(map[string]any)
	if !ok || len(m) != 1 {
		return nil, fmt.Sprint(v), fmt.Errorf("statement is not a one-key object")
	}
	for k, body := range m {
		switch k {
		case "accept", "drop", "return", "continue":
			return []nStmt{{kind: sVerdict, verdict: k}}, k, nil
		case "reject":
			return []nStmt{{kind: sVerdict, verdict: "reject"}}, "reject", nil
		case "jump", "goto":
			b, _ := body.(map[string]any)
			t, _ := b["target"].(string)
			if t == "" {
				return nil, k, fmt.Errorf("%s without a target", k)
			}
			return []nStmt{{kind: sVerdict, verdict: k + " " + t}}, k + " " + t, nil
		case "counter", "log", "limit", "quota":
			return []nStmt{{kind: sNoop}}, k, nil
		case "masquerade":
			if b, ok := body.(map[string]any); ok {
				if _, ok := b["port"]; ok {
					return nil, k, fmt.Errorf("masquerade to ports not modelled")
				}
			}
			return []nStmt{{kind: sMasq}}, "masquerade", nil
		case "match":
			return jsonMatch(body)
		case "vmap":
			b, _ := body.(map[string]any)
			key, txt, err := jsonExpr(b["key"])
			if err != nil {
				return nil, "vmap", err
			}
			st := nStmt{kind: sVmap, left: key}
			if err := jsonMapData(b["data"], &st); err != nil {
				return nil, txt + " vmap", err
			}
			return append(impliedProto(key), st), txt + " vmap " + mapName(&st), nil
		case "dnat":
			b, _ := body.(map[string]any)
			if b == nil {
				return nil, "dnat", fmt.Errorf("dnat without a target")
			}
			switch addr := b["addr"].(type) {
			case string:
				a, err := netip.ParseAddr(addr)
				if err != nil {
					return nil, "dnat", fmt.Errorf("dnat address %q", addr)
				}
				st := nStmt{kind: sDNAT, dnatAddr: a}
				if p, ok := b["port"]; ok {
					n, ok := p.(json.Number)
					port, err := strconv.ParseUint(n.String(), 10, 16)
					if !ok || err != nil {
						return nil, "dnat", fmt.Errorf("dnat port %v not modelled", p)
					}
					st.dnatPort = uint16(port)
				}
				return []nStmt{st}, "dnat to " + hostPort(a, st.dnatPort), nil
			case map[string]any:
				mp, ok := addr["map"].(map[string]any)
				if !ok {
					return nil, "dnat", fmt.Errorf("dnat address %v not modelled", addr)
				}
				if _, ok := b["port"]; ok {
					return nil, "dnat", fmt.Errorf("dnat map with a separate port not modelled")
				}
				key, txt, err := jsonExpr(mp["key"])
				if err != nil {
					return nil, "dnat", err
				}
				st := nStmt{kind: sDNAT, left: key}
				if err := jsonMapData(mp["data"], &st); err != nil {
					return nil, "dnat", err
				}
				return append(impliedProto(key), st), "dnat to " + txt + " map " + mapName(&st), nil
			}
			return nil, "dnat", fmt.Errorf("dnat form not modelled")
		case "mangle":
			b, _ := body.(map[string]any)
			key, _, err := jsonExpr(b["key"])
			if err != nil || key.kind != eField || key.field != "mark" {
				return nil, "mangle", fmt.Errorf("mangle of something other than meta mark not modelled")
			}
			st := nStmt{kind: sMarkSet}
			switch val := b["value"].(type) {
			case json.Number:
				n, err := parseUint32(val.String())
				if err != nil {
					return nil, "mangle", err
				}
				st.markOperand = n
			case map[string]any:
				e, _, err := jsonExpr(val)
				if err != nil || e.kind != eBitop || e.parts[0].kind != eField || e.parts[0].field != "mark" || e.operand > math.MaxUint32 {
					return nil, "mangle", fmt.Errorf("mark value %v not modelled", val)
				}
				st.markOp, st.markOperand = e.op, uint32(e.operand)
			default:
				return nil, "mangle", fmt.Errorf("mark value %v not modelled", val)
			}
			return []nStmt{st}, fmt.Sprintf("meta mark set %s0x%x", opPrefix(st.markOp), st.markOperand), nil
		case "set":
			b, _ := body.(map[string]any)
			op, _ := b["op"].(string)
			name, _ := b["set"].(string)
			if (op != "update" && op != "add") || !strings.HasPrefix(name, "@") {
				return nil, "set", fmt.Errorf("set statement %v not modelled", b)
			}
			return []nStmt{{kind: sSetUpdate, setName: name[1:]}}, op + " " + name, nil
		case "xt":
			return nil, "xt", fmt.Errorf("iptables-nft (xt) expression not modelled; trace this node in iptables mode")
		}
		return nil, k, fmt.Errorf("statement %q not modelled", k)
	}
	return nil, "", fmt.Errorf("empty statement")
}

func opPrefix(op string) string {
	if op == "" {
		return ""
	}
	return "meta mark " + op + " "
}

func jsonMapData(v any, st *nStmt) error {
	switch d := v.(type) {
	case string:
		if !strings.HasPrefix(d, "@") {
			return fmt.Errorf("map %q not modelled", d)
		}
		st.setName = d[1:]
		return nil
	case map[string]any:
		elems, ok := d["set"].([]any)
		if !ok {
			return fmt.Errorf("map %v not modelled", d)
		}
		for _, e := range elems {
			pair, ok := e.([]any)
			if !ok || len(pair) != 2 {
				return fmt.Errorf("anonymous map element %v not modelled", e)
			}
			key, err := jsonKey(pair[0])
			if err != nil {
				return err
			}
			val, err := jsonData(pair[1])
			if err != nil {
				return err
			}
			st.anon = append(st.anon, &nElem{key: key, value: val})
		}
		return nil
	}
	return fmt.Errorf("map %v not modelled", v)
}

func jsonExpr(v any) (nExpr, string, error) {
	m, ok := v.(map[string]any)
	if !ok {
		return nExpr{}, fmt.Sprint(v), fmt.Errorf("expression %v not modelled", v)
	}
	for k, body := range m {
		b, _ := body.(map[string]any)
		switch k {
		case "payload":
			proto, _ := b["protocol"].(string)
			field, _ := b["field"].(string)
			txt := proto + " " + field
			switch {
			case (proto == "ip" || proto == "ip6") && (field == "saddr" || field == "daddr"):
				return nExpr{kind: eField, field: field}, txt, nil
			case (proto == "ip" && field == "protocol") || (proto == "ip6" && field == "nexthdr"):
				return nExpr{kind: eField, field: "l4proto"}, txt, nil
			case field == "dport" && (proto == "th" || proto == "tcp" || proto == "udp" || proto == "sctp"):
				e := nExpr{kind: eField, field: "dport"}
				if proto != "th" {
					// nft hides the protocol check a tcp/udp/sctp header
					// field implies; impliedProto puts it back.
					e.proto = proto
				}
				return e, txt, nil
			}
			return nExpr{}, txt, fmt.Errorf("payload %s not modelled", txt)
		case "meta":
			key, _ := b["key"].(string)
			switch key {
			case "l4proto", "mark", "iifname", "nfproto":
				return nExpr{kind: eField, field: key}, "meta " + key, nil
			}
			return nExpr{}, "meta " + key, fmt.Errorf("meta %s not modelled", key)
		case "ct":
			key, _ := b["key"].(string)
			if key == "state" || key == "status" {
				return nExpr{kind: eField, field: "ct" + key}, "ct " + key, nil
			}
			return nExpr{}, "ct " + key, fmt.Errorf("ct %s not modelled", key)
		case "fib":
			res, _ := b["result"].(string)
			flags, _ := b["flags"].([]any)
			if res != "type" || len(flags) != 1 {
				return nExpr{}, "fib", fmt.Errorf("fib %v not modelled", b)
			}
			f, _ := flags[0].(string)
			if f != "saddr" && f != "daddr" {
				return nExpr{}, "fib", fmt.Errorf("fib %v not modelled", b)
			}
			return nExpr{kind: eField, field: "fib-" + f}, "fib " + f + " type", nil
		case "numgen":
			mode, _ := b["mode"].(string)
			if mode != "random" {
				return nExpr{}, "numgen", fmt.Errorf("numgen mode %q not modelled", mode)
			}
			mod, err1 := strconv.ParseUint(fmt.Sprint(b["mod"]), 10, 32)
			off := uint64(0)
			var err2 error
			if o, ok := b["offset"]; ok {
				off, err2 = strconv.ParseUint(fmt.Sprint(o), 10, 32)
			}
			if err1 != nil || err2 != nil {
				return nExpr{}, "numgen", fmt.Errorf("numgen %v not modelled", b)
			}
			return nExpr{kind: eNumgen, mod: mod, offset: off}, fmt.Sprintf("numgen random mod %d offset %d", mod, off), nil
		case "concat":
			parts, _ := body.([]any)
			c := nExpr{kind: eConcat}
			var txt []string
			for _, p := range parts {
				e, t, err := jsonExpr(p)
				if err != nil {
					return nExpr{}, t, err
				}
				c.parts = append(c.parts, e)
				txt = append(txt, t)
			}
			return c, strings.Join(txt, " . "), nil
		case "&", "|", "^":
			ops, _ := body.([]any)
			if len(ops) != 2 {
				return nExpr{}, k, fmt.Errorf("%s with %d operands not modelled", k, len(ops))
			}
			left, txt, err := jsonExpr(ops[0])
			if err != nil {
				return nExpr{}, txt, err
			}
			n, ok := ops[1].(json.Number)
			if !ok {
				return nExpr{}, txt, fmt.Errorf("%s operand %v not modelled", k, ops[1])
			}
			v, err := strconv.ParseUint(n.String(), 10, 64)
			if err != nil {
				return nExpr{}, txt, fmt.Errorf("%s operand %v", k, n)
			}
			return nExpr{kind: eBitop, parts: []nExpr{left}, op: k, operand: v}, fmt.Sprintf("%s %s 0x%x", txt, k, v), nil
		}
		return nExpr{}, k, fmt.Errorf("expression %q not modelled", k)
	}
	return nExpr{}, "", fmt.Errorf("empty expression")
}

func jsonMatch(body any) ([]nStmt, string, error) {
	b, _ := body.(map[string]any)
	if b == nil {
		return nil, "match", fmt.Errorf("match without a body")
	}
	op, _ := b["op"].(string)
	left, ltxt, err := jsonExpr(b["left"])
	if err != nil {
		return nil, ltxt, err
	}
	st := nStmt{kind: sMatch, left: left}
	switch op {
	case "==", "in":
	case "!=":
		st.neg = true
	default:
		return nil, ltxt, fmt.Errorf("match operator %q not modelled", op)
	}
	right := b["right"]
	rtxt := fmt.Sprint(right)
	if left.kind == eField && (left.field == "ctstate" || left.field == "ctstatus") {
		switch r := right.(type) {
		case string:
			st.flags = []string{r}
		case []any:
			for _, x := range r {
				s, _ := x.(string)
				st.flags = append(st.flags, s)
			}
		default:
			return nil, ltxt, fmt.Errorf("ct value %v not modelled", right)
		}
		return []nStmt{st}, ltxt + " " + strings.Join(st.flags, ","), nil
	}
	switch r := right.(type) {
	case string:
		if strings.HasPrefix(r, "@") {
			st.setName = r[1:]
			rtxt = r
		} else {
			st.atoms = []nAtom{parseAtom(r)}
			rtxt = r
		}
	case map[string]any:
		if elems, ok := r["set"].([]any); ok {
			var txt []string
			for _, e := range elems {
				a, err := jsonAtom(e)
				if err != nil {
					return nil, ltxt, err
				}
				st.atoms = append(st.atoms, a)
				txt = append(txt, a.s)
			}
			rtxt = "{ " + strings.Join(txt, ", ") + " }"
		} else {
			a, err := jsonAtom(r)
			if err != nil {
				return nil, ltxt, err
			}
			st.atoms = []nAtom{a}
			rtxt = a.s
		}
	default:
		a, err := jsonAtom(right)
		if err != nil {
			return nil, ltxt, err
		}
		st.atoms = []nAtom{a}
		rtxt = a.s
	}
	if left.kind == eBitop || (left.kind == eField && left.field == "mark") {
		// Marks compare as numbers; JSON writes them in decimal.
		for i, a := range st.atoms {
			if n, err := strconv.ParseUint(a.s, 0, 64); err == nil {
				st.atoms[i].s = strconv.FormatUint(n, 10)
			}
		}
	}
	opTxt := " "
	if st.neg {
		opTxt = " != "
	}
	return append(impliedProto(left), st), ltxt + opTxt + rtxt, nil
}

// impliedProto returns the protocol matches e's header fields depend on.
func impliedProto(e nExpr) []nStmt {
	var out []nStmt
	if e.proto != "" {
		out = append(out, nStmt{kind: sMatch, left: nExpr{kind: eField, field: "l4proto"}, atoms: []nAtom{{s: e.proto}}})
	}
	for _, p := range e.parts {
		out = append(out, impliedProto(p)...)
	}
	return out
}
