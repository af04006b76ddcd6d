package trace

import (
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
)

// IPTables is a parsed iptables-save dump (one IP family).
type IPTables struct {
	// Tables maps table name to chain name to chain.
	Tables map[string]map[string]*IPTChain
}

// IPTChain is one chain of an iptables table.
type IPTChain struct {
	Name string
	// Policy is a builtin chain's policy ("ACCEPT", "DROP"); "-" for a user
	// chain.
	Policy string
	Rules  []*IPTRule
}

// IPTRule is one compiled rule.
type IPTRule struct {
	Table, Chain string
	// Raw is the rule line as read ("-A CHAIN ...").
	Raw string
	// Words is the rule's words after "-A CHAIN", quotes removed.
	Words []string

	matches    []iptMatch
	target     string
	targetArgs []string
	gotoChain  bool
	prob       float64
	recentName string
	recentSet  bool
	comment    string
	service    string
	endpoint   string
	// unknown names what this rule does that is not modelled; it decides
	// the packet's fate only if every modelled match matches.
	unknown string
}

type iptMatchKind int

const (
	mProto iptMatchKind = iota
	mSrc
	mDst
	mDport
	mIIF
	mSrcLocal
	mDstLocal
	mCtState
	mMark
	mRecentCheck
	// mSet is ipset's "--match-set NAME FLAGS" (str, states hold them).
	mSet
	// mPhysdevIsIn is "-m physdev --physdev-is-in".
	mPhysdevIsIn
	// mIPVS is "-m ipvs --ipvs"; mVAddr, mVPort and mVProto match the
	// virtual server of the packet's IPVS connection.
	mIPVS
	mVAddr
	mVPort
	mVProto
)

type iptMatch struct {
	kind   iptMatchKind
	neg    bool
	str    string
	pfx    netip.Prefix
	lo, hi uint16
	value  uint32
	mask   uint32
	states []string
}

// ParseIPTablesSave reads iptables-save (or iptables-restore) text: tables,
// chain declarations with their policies, and "-A" rules; "-c" counters are
// accepted. A rule it cannot split is an error; a rule with options it does
// not model is kept and reported as Unknown when a packet reaches it.
func ParseIPTablesSave(text string) (*IPTables, error) {
	ipt := &IPTables{Tables: map[string]map[string]*IPTChain{}}
	var table map[string]*IPTChain
	tableName := ""
	lineNo := 0
	for len(text) > 0 {
		lineNo++
		line, rest, _ := strings.Cut(text, "\n")
		text = rest
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "[") {
			// "[packets:bytes] -A ..." from iptables-save -c.
			if i := strings.IndexByte(line, ']'); i > 0 {
				line = strings.TrimSpace(line[i+1:])
			}
		}
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			tableName = strings.TrimSpace(line[1:])
			if tableName == "" {
				return nil, fmt.Errorf("line %d: table name missing", lineNo)
			}
			if ipt.Tables[tableName] == nil {
				ipt.Tables[tableName] = map[string]*IPTChain{}
			}
			table = ipt.Tables[tableName]
		case line == "COMMIT":
			table = nil
		case strings.HasPrefix(line, ":"):
			if table == nil {
				return nil, fmt.Errorf("line %d: chain %q outside a table", lineNo, line)
			}
			f := strings.Fields(line[1:])
			if len(f) == 0 {
				return nil, fmt.Errorf("line %d: chain name missing", lineNo)
			}
			policy := "-"
			if len(f) > 1 {
				policy = f[1]
			}
			// A declaration flushes the chain, as iptables-restore does.
			table[f[0]] = &IPTChain{Name: f[0], Policy: policy}
		case strings.HasPrefix(line, "-A ") || strings.HasPrefix(line, "-I "):
			if table == nil {
				return nil, fmt.Errorf("line %d: rule outside a table: %q", lineNo, line)
			}
			words, err := splitIPTWords(line)
			if err != nil {
				return nil, fmt.Errorf("line %d: %w", lineNo, err)
			}
			if len(words) < 2 {
				return nil, fmt.Errorf("line %d: rule without a chain: %q", lineNo, line)
			}
			ch := table[words[1]]
			if ch == nil {
				// iptables-restore would refuse this; a dump never has it.
				return nil, fmt.Errorf("line %d: rule for undeclared chain %q in table %q", lineNo, words[1], tableName)
			}
			r := compileIPTRule(tableName, words[1], words[2:], line)
			if words[0] == "-I" {
				ch.Rules = append([]*IPTRule{r}, ch.Rules...)
			} else {
				ch.Rules = append(ch.Rules, r)
			}
		case strings.HasPrefix(line, "-X"):
			if table == nil {
				return nil, fmt.Errorf("line %d: delete outside a table", lineNo)
			}
			delete(table, strings.TrimSpace(line[2:]))
		case strings.HasPrefix(line, "-F"):
			if table == nil {
				return nil, fmt.Errorf("line %d: flush outside a table", lineNo)
			}
			if ch := table[strings.TrimSpace(line[2:])]; ch != nil {
				ch.Rules = nil
			}
		default:
			return nil, fmt.Errorf("line %d: unexpected %q", lineNo, line)
		}
	}
	return ipt, nil
}

// splitIPTWords splits a rule line into words, honouring double quotes and
// backslash escapes inside them, as iptables-save writes comments.
func splitIPTWords(line string) ([]string, error) {
	words := make([]string, 0, 16)
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

// SplitIPTablesWords splits an iptables-save rule line into words the way
// iptables-restore reads it.
func SplitIPTablesWords(line string) ([]string, error) { return splitIPTWords(line) }

var iptKnownModules = map[string]bool{
	"comment": true, "tcp": true, "udp": true, "sctp": true, "conntrack": true, "state": true,
	"addrtype": true, "mark": true, "statistic": true, "recent": true, "nfacct": true,
	"set": true, "physdev": true, "ipvs": true,
}

// iptNoValue are options that take no value.
var iptNoValue = map[string]bool{"--set": true, "--rcheck": true, "--reap": true, "--rsource": true,
	"--random-fully": true, "--random": true, "--persistent": true, "--update": true, "--remove": true,
	"--rdest": true, "--syn": true, "--physdev-is-in": true, "--physdev-is-out": true,
	"--physdev-is-bridged": true, "--ipvs": true}

func compileIPTRule(table, chain string, w []string, raw string) *IPTRule {
	r := &IPTRule{Table: table, Chain: chain, Raw: raw, Words: w, prob: 1}
	unknown := func(format string, a ...any) {
		if r.unknown == "" {
			r.unknown = fmt.Sprintf(format, a...)
		}
	}
	// An option belongs to the match module named before it: after a
	// module the tracer does not model, its options (which may share a
	// name with a modelled one, as connmark's --mark) are not read.
	foreignModule := ""
	for i := 0; i < len(w); i++ {
		neg := false
		if w[i] == "!" {
			neg = true
			i++
			if i >= len(w) {
				unknown("dangling \"!\"")
				break
			}
		}
		opt := w[i]
		val := ""
		hasVal := false
		if !iptNoValue[opt] && opt != "-j" && opt != "-g" && i+1 < len(w) {
			val, hasVal = w[i+1], true
		}
		if !strings.HasPrefix(opt, "--") {
			foreignModule = ""
		} else if foreignModule != "" {
			if hasVal && !strings.HasPrefix(val, "-") && val != "!" {
				i++
			}
			continue
		}
		take := func() bool {
			if !hasVal {
				unknown("%s needs a value", opt)
				return false
			}
			i++
			return true
		}
		switch opt {
		case "-j", "--jump", "-g", "--goto":
			if neg {
				unknown("negated %s", opt)
			}
			if i+1 >= len(w) {
				unknown("%s without a target", opt)
				return r
			}
			r.target = w[i+1]
			r.targetArgs = w[i+2:]
			r.gotoChain = opt == "-g" || opt == "--goto"
			r.checkTarget(unknown)
			r.service, r.endpoint = annotateComment(r.comment)
			if r.target == "DNAT" && r.endpoint == "" {
				r.endpoint = flagValue(r.targetArgs, "--to-destination")
			}
			return r
		case "-m", "--match":
			if !take() {
				continue
			}
			if !iptKnownModules[val] {
				unknown("match module %q not modelled", val)
				foreignModule = val
			}
		case "--comment":
			if take() {
				r.comment = val
			}
		case "--nfacct-name", "--seconds", "--reject-with", "--hitcount":
			if !take() {
				continue
			}
			if opt == "--hitcount" {
				unknown("recent --hitcount not modelled")
			}
		case "--mode":
			if take() && val != "random" {
				unknown("statistic mode %q not modelled", val)
			}
		case "--probability":
			if !take() {
				continue
			}
			p, err := strconv.ParseFloat(val, 64)
			if err != nil || p < 0 || p > 1 || math.IsNaN(p) {
				unknown("bad probability %q", val)
				continue
			}
			if neg {
				p = 1 - p
			}
			r.prob *= p
		case "--reap", "--rsource":
		case "--mask":
			if take() && val != "255.255.255.255" && val != "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff" {
				unknown("recent --mask %q not modelled", val)
			}
		case "--name":
			if take() {
				r.recentName = val
			}
		case "--set":
			r.recentSet = true
		case "--rcheck":
			r.matches = append(r.matches, iptMatch{kind: mRecentCheck, neg: neg})
		case "-p", "--protocol":
			if take() {
				r.matches = append(r.matches, iptMatch{kind: mProto, neg: neg, str: protoName(val)})
			}
		case "-s", "--source", "-d", "--destination":
			if !take() {
				continue
			}
			pfx, err := parsePrefix(val)
			if err != nil {
				unknown("%s %q: %v", opt, val, err)
				continue
			}
			k := mSrc
			if opt == "-d" || opt == "--destination" {
				k = mDst
			}
			r.matches = append(r.matches, iptMatch{kind: k, neg: neg, pfx: pfx})
		case "--dport", "--destination-port":
			if !take() {
				continue
			}
			lo, hi, err := parsePortRange(val)
			if err != nil {
				unknown("%s %q: %v", opt, val, err)
				continue
			}
			r.matches = append(r.matches, iptMatch{kind: mDport, neg: neg, lo: lo, hi: hi})
		case "-i", "--in-interface":
			if take() {
				r.matches = append(r.matches, iptMatch{kind: mIIF, neg: neg, str: val})
			}
		case "--src-type", "--dst-type":
			if !take() {
				continue
			}
			if val != "LOCAL" {
				unknown("addrtype %s %q not modelled", opt, val)
				continue
			}
			k := mSrcLocal
			if opt == "--dst-type" {
				k = mDstLocal
			}
			r.matches = append(r.matches, iptMatch{kind: k, neg: neg})
		case "--match-set":
			// The only option with two values: the set and its flags.
			if i+2 >= len(w) {
				unknown("--match-set needs a set name and flags")
				i = len(w)
				continue
			}
			r.matches = append(r.matches, iptMatch{kind: mSet, neg: neg, str: w[i+1], states: strings.Split(w[i+2], ",")})
			i += 2
		case "--physdev-is-in":
			r.matches = append(r.matches, iptMatch{kind: mPhysdevIsIn, neg: neg})
		case "--ipvs":
			r.matches = append(r.matches, iptMatch{kind: mIPVS, neg: neg})
		case "--vaddr":
			if !take() {
				continue
			}
			pfx, err := parsePrefix(val)
			if err != nil {
				unknown("--vaddr %q: %v", val, err)
				continue
			}
			r.matches = append(r.matches, iptMatch{kind: mVAddr, neg: neg, pfx: pfx})
		case "--vport":
			if !take() {
				continue
			}
			lo, hi, err := parsePortRange(val)
			if err != nil {
				unknown("--vport %q: %v", val, err)
				continue
			}
			r.matches = append(r.matches, iptMatch{kind: mVPort, neg: neg, lo: lo, hi: hi})
		case "--vproto":
			if take() {
				r.matches = append(r.matches, iptMatch{kind: mVProto, neg: neg, str: protoName(val)})
			}
		case "--ctstate", "--state":
			if !take() {
				continue
			}
			states := strings.Split(val, ",")
			for _, st := range states {
				switch st {
				case "NEW", "INVALID", "DNAT", "SNAT", "RELATED", "ESTABLISHED", "UNTRACKED":
				default:
					unknown("conntrack state %q not modelled", st)
				}
			}
			r.matches = append(r.matches, iptMatch{kind: mCtState, neg: neg, states: states})
		case "--mark":
			if !take() {
				continue
			}
			v, m, err := parseMarkMask(val)
			if err != nil {
				unknown("--mark %q: %v", val, err)
				continue
			}
			r.matches = append(r.matches, iptMatch{kind: mMark, neg: neg, value: v, mask: m})
		default:
			if strings.HasPrefix(opt, "-") {
				unknown("option %q not modelled", opt)
				// Skip its value, if it looks like one, so it is not read
				// as an option of its own.
				if hasVal && !strings.HasPrefix(val, "-") && val != "!" {
					i++
				}
			} else {
				unknown("unexpected word %q", opt)
			}
		}
	}
	r.service, r.endpoint = annotateComment(r.comment)
	return r
}

func (r *IPTRule) checkTarget(unknown func(string, ...any)) {
	args := r.targetArgs
	switch r.target {
	case "ACCEPT", "DROP", "RETURN":
		if len(args) > 0 {
			unknown("arguments after %s", r.target)
		}
	case "REJECT":
		if len(args) > 0 && (len(args) != 2 || args[0] != "--reject-with") {
			unknown("REJECT options %q not modelled", args)
		}
	case "DNAT":
		if r.Table != "nat" {
			unknown("DNAT outside the nat table")
		}
		to := flagValue(args, "--to-destination")
		if to == "" {
			unknown("DNAT without --to-destination")
		} else if _, err := parseDNATTo(to); err != nil {
			unknown("DNAT --to-destination %q not modelled: %v", to, err)
		}
		for i := 0; i < len(args); i++ {
			switch args[i] {
			case "--to-destination":
				i++
			case "--random", "--persistent":
			default:
				unknown("DNAT option %q not modelled", args[i])
			}
		}
	case "MASQUERADE":
		for _, a := range args {
			if a != "--random-fully" && a != "--random" {
				unknown("MASQUERADE option %q not modelled", a)
			}
		}
	case "MARK":
		if len(args) != 2 {
			unknown("MARK options %q not modelled", args)
			return
		}
		switch args[0] {
		case "--or-mark", "--xor-mark", "--and-mark", "--set-mark", "--set-xmark":
			if _, _, err := parseMarkMask(args[1]); err != nil {
				unknown("MARK %s %q: %v", args[0], args[1], err)
			}
		default:
			unknown("MARK option %q not modelled", args[0])
		}
	case "LOG", "NFLOG":
		// Logging does not change the packet.
	default:
		if strings.ToUpper(r.target) == r.target && !strings.Contains(r.target, "-") && len(args) > 0 {
			unknown("target %s not modelled", r.target)
		} else if len(args) > 0 {
			unknown("arguments %q after a jump to %s", args, r.target)
		}
	}
}

// protoName spells a protocol as iptables -p reads it ("6" is "tcp").
func protoName(v string) string {
	p := strings.ToLower(v)
	switch p {
	case "6":
		p = "tcp"
	case "17":
		p = "udp"
	case "132":
		p = "sctp"
	}
	return p
}

func flagValue(args []string, flag string) string {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag {
			return args[i+1]
		}
	}
	return ""
}

// parseDNATTo reads "ip:port", "[ipv6]:port" or a bare address.
func parseDNATTo(s string) (netip.AddrPort, error) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap, nil
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return netip.AddrPortFrom(a, 0), nil
	}
	return netip.AddrPort{}, fmt.Errorf("not an address or address:port")
}

func parseMarkMask(s string) (uint32, uint32, error) {
	v, m, hasMask := strings.Cut(s, "/")
	value, err := strconv.ParseUint(v, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad mark value %q", v)
	}
	mask := uint64(math.MaxUint32)
	if hasMask {
		if mask, err = strconv.ParseUint(m, 0, 32); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask %q", m)
		}
	}
	return uint32(value), uint32(mask), nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, err
		}
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

func parsePortRange(s string) (uint16, uint16, error) {
	a, b, isRange := strings.Cut(s, ":")
	lo, err := strconv.ParseUint(a, 10, 16)
	if err != nil {
		return 0, 0, fmt.Errorf("bad port %q", a)
	}
	hi := lo
	if isRange {
		if hi, err = strconv.ParseUint(b, 10, 16); err != nil {
			return 0, 0, fmt.Errorf("bad port %q", b)
		}
	}
	return uint16(lo), uint16(hi), nil
}

// Mode is "iptables".
func (ipt *IPTables) Mode() string { return "iptables" }

// WithPolicy returns a copy of ipt in which table/chain has the given
// policy, as on a node whose administrator set a DROP policy.
func (ipt *IPTables) WithPolicy(table, chain, policy string) *IPTables {
	c := &IPTables{Tables: map[string]map[string]*IPTChain{}}
	for t, chains := range ipt.Tables {
		c.Tables[t] = chains
	}
	if old := ipt.Tables[table][chain]; old != nil {
		m := make(map[string]*IPTChain, len(ipt.Tables[table]))
		for k, v := range ipt.Tables[table] {
			m[k] = v
		}
		nc := *old
		nc.Policy = policy
		m[chain] = &nc
		c.Tables[table] = m
	}
	return c
}

type iptWalk struct {
	ipt   *IPTables
	pk    *Packet
	node  *Node
	paths int
	steps int
	// ipvs is set in ipvs mode: the ip sets "-m set" reads and the virtual
	// servers "-m ipvs" refers to. Plain iptables mode has neither, so
	// those matches are UNKNOWN there.
	ipvs *IPVS
}

type iptRes struct {
	s       pstate
	verdict Verdict // "" fell off the end or RETURNed
}

func (w *iptWalk) fork() error {
	w.paths++
	if w.paths > maxPaths {
		return errTooComplex
	}
	return nil
}

func (w *iptWalk) walkChain(hook, table, chain string, s pstate, depth int) ([]iptRes, error) {
	if depth > maxDepth {
		s.reason = fmt.Sprintf("chains nested deeper than %d at %s/%s", maxDepth, table, chain)
		return []iptRes{{s, Unknown}}, nil
	}
	ch := w.ipt.Tables[table][chain]
	if ch == nil {
		s.reason = fmt.Sprintf("jump to chain %s that is not in table %s", chain, table)
		return []iptRes{{s, Unknown}}, nil
	}
	return w.walkFrom(hook, ch, 0, s, depth)
}

func (w *iptWalk) walkFrom(hook string, ch *IPTChain, i int, s pstate, depth int) ([]iptRes, error) {
	var out []iptRes
	for ; i < len(ch.Rules); i++ {
		if w.steps++; w.steps > maxSteps {
			return nil, errTooComplex
		}
		r := ch.Rules[i]
		matched, unknownWhy := w.match(r, &s)
		if !matched {
			continue
		}
		st := Step{Hook: hook, Table: r.Table, Chain: r.Chain, Rule: r.Raw, Service: r.service, Endpoint: r.endpoint, Foreign: !iptablesOwned(r.Chain) && !iptablesOwned(r.target)}
		if unknownWhy != "" {
			s.step(st)
			s.reason = unknownWhy
			return append(out, iptRes{s, Unknown}), nil
		}
		if r.prob < 1 {
			if err := w.fork(); err != nil {
				return nil, err
			}
			miss := s.clone()
			miss.prob *= 1 - r.prob
			miss.slot = fmt.Sprintf("%s rule %d: statistic not taken (probability %.4g)", r.Chain, i+1, 1-r.prob)
			rest, err := w.walkFrom(hook, ch, i+1, miss, depth)
			if err != nil {
				return nil, err
			}
			out = append(out, rest...)
			s.prob *= r.prob
			st.Note = fmt.Sprintf("statistic: taken with probability %.4g", r.prob)
			s.slot = fmt.Sprintf("%s rule %d: statistic probability %.4g", r.Chain, i+1, r.prob)
		}
		for _, m := range r.matches {
			if m.kind == mRecentCheck && !m.neg {
				s.affHit = "recent:" + r.recentName
				st.Note = "source is in -m recent list " + r.recentName
			}
		}
		s.step(st)
		if r.recentSet && r.recentName != "" {
			s.affSet = append(s.affSet, "recent:"+r.recentName)
		}
		switch r.target {
		case "":
			continue
		case "ACCEPT":
			return append(out, iptRes{s, Accept}), nil
		case "DROP":
			return append(out, iptRes{s, Drop}), nil
		case "REJECT":
			return append(out, iptRes{s, Reject}), nil
		case "RETURN":
			return append(out, iptRes{s, ""}), nil
		case "LOG", "NFLOG":
			continue
		case "DNAT":
			ap, _ := parseDNATTo(flagValue(r.targetArgs, "--to-destination"))
			port := ap.Port()
			if port == 0 {
				port = s.dport
			}
			s.dnat, s.dnatted = hostPort(ap.Addr(), port), true
			s.dst, s.dport = ap.Addr(), port
			s.endpoint = s.dnat
			return append(out, iptRes{s, Accept}), nil
		case "MASQUERADE":
			s.masq = true
			return append(out, iptRes{s, Accept}), nil
		case "MARK":
			v, m, _ := parseMarkMask(r.targetArgs[1])
			switch r.targetArgs[0] {
			case "--or-mark":
				s.mark |= v
			case "--xor-mark":
				s.mark ^= v
			case "--and-mark":
				s.mark &= v
			case "--set-mark", "--set-xmark":
				s.mark = (s.mark &^ m) ^ v
			}
			continue
		default:
			sub, err := w.walkChain(hook, r.Table, r.target, s, depth+1)
			if err != nil {
				return nil, err
			}
			for _, res := range sub {
				if res.verdict != "" || r.gotoChain {
					out = append(out, res)
					continue
				}
				if err := w.fork(); err != nil {
					return nil, err
				}
				rest, err := w.walkFrom(hook, ch, i+1, res.s, depth)
				if err != nil {
					return nil, err
				}
				out = append(out, rest...)
			}
			return out, nil
		}
	}
	return append(out, iptRes{s, ""}), nil
}

// match evaluates r's modelled matches. unknownWhy is set when they all
// match but the rule has something unmodelled (in its text, or a set or
// interface the tracer was not given), so its effect is unknown.
func (w *iptWalk) match(r *IPTRule, s *pstate) (matched bool, unknownWhy string) {
	for i := range r.matches {
		m := &r.matches[i]
		var res bool
		switch m.kind {
		case mProto:
			res = m.str == w.pk.Protocol || m.str == "all"
		case mSrc:
			res = m.pfx.Contains(s.src)
		case mDst:
			res = m.pfx.Contains(s.dst)
		case mDport:
			res = s.dport >= m.lo && s.dport <= m.hi
		case mIIF:
			res = ifaceMatch(m.str, "+", s.iif)
		case mSrcLocal:
			res = w.node.isLocal(s.src)
		case mDstLocal:
			res = w.node.isLocal(s.dst)
		case mCtState:
			for _, st := range m.states {
				switch st {
				case "NEW":
					res = res || !w.pk.Invalid
				case "INVALID":
					res = res || w.pk.Invalid
				case "DNAT":
					res = res || s.dnatted
				}
			}
		case mMark:
			res = s.mark&m.mask == m.value
		case mRecentCheck:
			res = r.recentName != "" && w.node.inRecent(r.recentName, s.src)
		case mSet:
			var why string
			if w.ipvs == nil {
				why = fmt.Sprintf("match module \"set\" not modelled in iptables mode (ip set %s; sets are read in ipvs mode)", m.str)
			} else {
				res, why = w.ipvs.inSet(m.str, m.states, s, w.pk.Protocol)
			}
			if why != "" {
				if unknownWhy == "" {
					unknownWhy = why
				}
				continue
			}
		case mPhysdevIsIn:
			var known bool
			res, known = w.node.isBridge(s.iif)
			if !known {
				if unknownWhy == "" {
					unknownWhy = fmt.Sprintf("physdev --physdev-is-in: whether %s is a bridge is not known (give the node's bridges)", s.iif)
				}
				continue
			}
		case mIPVS, mVAddr, mVPort, mVProto:
			if w.ipvs == nil {
				if unknownWhy == "" {
					unknownWhy = "match module \"ipvs\" not modelled outside ipvs mode"
				}
				continue
			}
			vs := s.vs
			switch {
			case vs == nil:
			case m.kind == mIPVS:
				res = true
			case m.kind == mVAddr:
				res = vs.Address.IsValid() && m.pfx.Contains(vs.Address)
			case m.kind == mVPort:
				res = vs.Port >= m.lo && vs.Port <= m.hi
			case m.kind == mVProto:
				res = strings.EqualFold(vs.Protocol, m.str)
			}
		}
		if res == m.neg {
			return false, ""
		}
	}
	if r.prob == 0 {
		return false, ""
	}
	if unknownWhy == "" {
		unknownWhy = r.unknown
	}
	return true, unknownWhy
}

// ifaceMatch matches an interface name pattern ending in wildcard (iptables
// "+", nftables "*") against iface; an empty iface (output path) never
// matches.
func ifaceMatch(pattern, wildcard, iface string) bool {
	if iface == "" {
		return false
	}
	if p, ok := strings.CutSuffix(pattern, wildcard); ok {
		return strings.HasPrefix(iface, p)
	}
	return iface == pattern
}

// iptHooks are the tables each hook runs, in the kernel's order.
var iptHooks = map[string][]string{
	"PREROUTING":  {"raw", "mangle", "nat"},
	"INPUT":       {"mangle", "nat", "filter"},
	"FORWARD":     {"mangle", "filter"},
	"OUTPUT":      {"raw", "mangle", "nat", "filter"},
	"POSTROUTING": {"mangle", "nat"},
}

// Trace follows pk through the ruleset.
func (ipt *IPTables) Trace(pk Packet, node *Node) (*Result, error) {
	if err := pk.validate(); err != nil {
		return nil, err
	}
	if node == nil {
		node = &Node{}
	}
	w := &iptWalk{ipt: ipt, pk: &pk, node: node}
	var finals []final

	hook := func(states []pstate, hookName string) ([]pstate, error) {
		return w.runHook(states, hookName, iptHooks[hookName], &finals)
	}
	states, err := walkHooks(&pk, node, hook)
	if err != nil {
		return nil, err
	}
	for _, st := range states {
		finals = append(finals, final{st, Accept})
	}
	return buildResult(ipt.Mode(), pk, finals, w.paths)
}

// runHook runs the given tables of one hook over every state, in order;
// paths a table drops, rejects or cannot decide end in finals. nat runs
// only for a new connection's first packet, and not again for a packet
// looped back through lo, whose connection is already set up.
func (w *iptWalk) runHook(states []pstate, hookName string, tables []string, finals *[]final) ([]pstate, error) {
	var next []pstate
	for _, table := range tables {
		if table == "nat" && w.pk.Invalid {
			continue
		}
		for _, st := range states {
			if table == "nat" && st.fromLoopRtn {
				next = append(next, st)
				continue
			}
			ch := w.ipt.Tables[table][hookName]
			if ch == nil {
				next = append(next, st)
				continue
			}
			res, err := w.walkFrom(table+" "+hookName, ch, 0, st, 0)
			if err != nil {
				return nil, err
			}
			for _, r := range res {
				v := r.verdict
				if v == "" {
					if ch.Policy == "DROP" {
						v = Drop
						r.s.path = append(r.s.path, Step{Hook: table + " " + hookName, Table: table, Chain: hookName, Note: "chain policy DROP"})
					} else {
						v = Accept
					}
				}
				if v == Accept {
					next = append(next, r.s)
				} else {
					*finals = append(*finals, final{r.s, v})
				}
			}
		}
		states, next = next, nil
	}
	return states, nil
}

// EnsureChain creates table/chain if it does not exist; a builtin chain
// (upper case, no dash) gets an ACCEPT policy.
func (ipt *IPTables) EnsureChain(table, chain string) *IPTChain {
	if ipt.Tables[table] == nil {
		ipt.Tables[table] = map[string]*IPTChain{}
	}
	ch := ipt.Tables[table][chain]
	if ch == nil {
		policy := "-"
		if strings.ToUpper(chain) == chain && !strings.Contains(chain, "-") {
			policy = "ACCEPT"
		}
		ch = &IPTChain{Name: chain, Policy: policy}
		ipt.Tables[table][chain] = ch
	}
	return ch
}

// EnsureRule adds a rule given as iptables arguments after the chain name
// ("-m comment --comment x -j KUBE-SERVICES") to table/chain unless an
// identical one is there, at the front with insert, as `iptables -C ||
// iptables -I` does.
func (ipt *IPTables) EnsureRule(table, chain string, insert bool, args string) error {
	ch := ipt.EnsureChain(table, chain)
	line := "-A " + chain + " " + args
	words, err := splitIPTWords(line)
	if err != nil {
		return fmt.Errorf("rule %q: %w", args, err)
	}
	r := compileIPTRule(table, chain, words[2:], line)
	for _, old := range ch.Rules {
		if old.canonical() == r.canonical() {
			return nil
		}
	}
	if insert {
		ch.Rules = append([]*IPTRule{r}, ch.Rules...)
	} else {
		ch.Rules = append(ch.Rules, r)
	}
	return nil
}
