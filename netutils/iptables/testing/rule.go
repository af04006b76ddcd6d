package testing

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/net-utils/iptables"
)

// Rule is one parsed "-A CHAIN ..." rule. Every parameter kube-proxy's iptables and
// ipvs modes emit has a field, so a packet tracer can evaluate a rule without looking
// at Raw.
//
// A parameter that takes a value is an *IPTablesValue (nil when absent) holding the
// value and whether it was negated with "!". A parameter without a value is a *bool:
// nil when absent, &true when present, &false when present and negated. Short and long
// spellings ("-s", "--source", "--src") fill the same field. "-m MODULE" is skipped:
// parameter names are unique enough across the modules kube-proxy uses, and where two
// modules share one ("--sport" in tcp and udp) they are exclusive and belong in the same
// field anyway.
//
// Fields beyond upstream's are nil unless their parameter appears, so a Rule written
// the upstream way still compares equal with reflect.DeepEqual.
type Rule struct {
	// Raw is the rule text as given (without surrounding whitespace).
	Raw string

	// Chain is the chain the rule is appended to ("-A CHAIN").
	Chain   iptables.Chain
	Comment *IPTablesValue // -m comment --comment

	Protocol *IPTablesValue // -p

	SourceAddress *IPTablesValue // -s: an IP or CIDR
	SourceType    *IPTablesValue // -m addrtype --src-type
	SourcePort    *IPTablesValue // --sport
	SourcePorts   *IPTablesValue // -m multiport --sports

	DestinationAddress *IPTablesValue // -d: an IP or CIDR
	DestinationType    *IPTablesValue // -m addrtype --dst-type
	DestinationPort    *IPTablesValue // --dport
	DestinationPorts   *IPTablesValue // -m multiport --dports

	InInterface  *IPTablesValue // -i (a trailing "+" is a prefix wildcard)
	OutInterface *IPTablesValue // -o

	// MatchSet is "-m set --match-set NAME FLAGS": Value is NAME, and MatchSetFlags
	// holds FLAGS ("dst", "dst,dst", "src,dst", ...).
	MatchSet      *IPTablesValue
	MatchSetFlags string

	Jump            *IPTablesValue // -j TARGET
	Goto            *IPTablesValue // -g CHAIN
	RandomFully     *bool          // MASQUERADE/SNAT --random-fully
	Probability     *IPTablesValue // -m statistic --probability
	StatisticMode   *IPTablesValue // -m statistic --mode
	DNATDestination *IPTablesValue // DNAT --to-destination
	SNATSource      *IPTablesValue // SNAT --to-source
	ToPorts         *IPTablesValue // MASQUERADE/REDIRECT --to-ports
	RejectWith      *IPTablesValue // REJECT --reject-with

	MarkCheck    *IPTablesValue // -m mark --mark VALUE[/MASK]
	CTStateCheck *IPTablesValue // -m conntrack --ctstate, -m state --state

	// MARK target.
	SetXMark *IPTablesValue // --set-xmark VALUE[/MASK] (what iptables-save prints)
	SetMark  *IPTablesValue // --set-mark
	OrMark   *IPTablesValue // --or-mark
	XorMark  *IPTablesValue // --xor-mark
	AndMark  *IPTablesValue // --and-mark

	// -m recent, which kube-proxy uses for session affinity.
	AffinityCheck   *bool          // --rcheck
	AffinitySet     *bool          // --set
	AffinityUpdate  *bool          // --update
	AffinityRemove  *bool          // --remove
	AffinityName    *IPTablesValue // --name
	AffinitySeconds *IPTablesValue // --seconds
	AffinityReap    *bool          // --reap
	AffinityMask    *IPTablesValue // --mask
	AffinityRSource *bool          // --rsource
	AffinityRDest   *bool          // --rdest

	NFAcctName *IPTablesValue // -m nfacct --nfacct-name

	PhysDevIsIn      *bool // -m physdev --physdev-is-in
	PhysDevIsOut     *bool // -m physdev --physdev-is-out
	PhysDevIsBridged *bool // -m physdev --physdev-is-bridged

	// -m ipvs, used by the ipvs proxier.
	IPVSVAddr  *IPTablesValue // --vaddr
	IPVSVPort  *IPTablesValue // --vport
	IPVSVProto *IPTablesValue // --vproto

	// OtherArgs keeps, in order, the words of parameters ParseRule does not know
	// (including a "!" before them) when not strict. Whether a word is a parameter or
	// its value cannot be told without knowing the parameter, so they stay raw.
	OtherArgs []string
}

// IPTablesValue is the value of a rule parameter and whether it was negated.
type IPTablesValue struct {
	Negated bool
	Value   string
}

// String shows the value for debugging (%v of the pointer would print an address).
func (v *IPTablesValue) String() string {
	if v.Negated {
		return fmt.Sprintf("NOT %q", v.Value)
	}
	return fmt.Sprintf("%q", v.Value)
}

// Matches reports whether cmp equals v.Value, or differs from it when v is negated.
func (v *IPTablesValue) Matches(cmp string) bool {
	return (v.Value == cmp) != v.Negated
}

// param says how to store one rule parameter.
type param struct {
	negatable bool
	value     func(*Rule) **IPTablesValue // set for parameters that take a value
	flag      func(*Rule) **bool          // set for parameters that take none
}

func val(negatable bool, f func(*Rule) **IPTablesValue) param {
	return param{negatable: negatable, value: f}
}

func flag(negatable bool, f func(*Rule) **bool) param {
	return param{negatable: negatable, flag: f}
}

// ruleParams maps every known parameter spelling to its field.
var ruleParams = func() map[string]param {
	m := map[string]param{}
	add := func(p param, names ...string) {
		for _, n := range names {
			m[n] = p
		}
	}
	add(val(false, func(r *Rule) **IPTablesValue { return &r.Comment }), "--comment")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.Protocol }), "-p", "--protocol")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.SourceAddress }), "-s", "--source", "--src")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.SourceType }), "--src-type")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.SourcePort }), "--sport", "--source-port")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.SourcePorts }), "--sports", "--source-ports")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.DestinationAddress }), "-d", "--destination", "--dst")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.DestinationType }), "--dst-type")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.DestinationPort }), "--dport", "--destination-port")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.DestinationPorts }), "--dports", "--destination-ports")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.InInterface }), "-i", "--in-interface")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.OutInterface }), "-o", "--out-interface")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.MatchSet }), "--match-set")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.Jump }), "-j", "--jump")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.Goto }), "-g", "--goto")
	add(flag(false, func(r *Rule) **bool { return &r.RandomFully }), "--random-fully")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.Probability }), "--probability")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.StatisticMode }), "--mode")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.DNATDestination }), "--to-destination")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.SNATSource }), "--to-source")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.ToPorts }), "--to-ports")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.RejectWith }), "--reject-with")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.MarkCheck }), "--mark")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.CTStateCheck }), "--ctstate", "--state")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.SetXMark }), "--set-xmark")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.SetMark }), "--set-mark")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.OrMark }), "--or-mark")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.XorMark }), "--xor-mark")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.AndMark }), "--and-mark")
	add(flag(true, func(r *Rule) **bool { return &r.AffinityCheck }), "--rcheck")
	add(flag(true, func(r *Rule) **bool { return &r.AffinitySet }), "--set")
	add(flag(true, func(r *Rule) **bool { return &r.AffinityUpdate }), "--update")
	add(flag(true, func(r *Rule) **bool { return &r.AffinityRemove }), "--remove")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.AffinityName }), "--name")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.AffinitySeconds }), "--seconds")
	add(flag(false, func(r *Rule) **bool { return &r.AffinityReap }), "--reap")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.AffinityMask }), "--mask")
	add(flag(false, func(r *Rule) **bool { return &r.AffinityRSource }), "--rsource")
	add(flag(false, func(r *Rule) **bool { return &r.AffinityRDest }), "--rdest")
	add(val(false, func(r *Rule) **IPTablesValue { return &r.NFAcctName }), "--nfacct-name")
	add(flag(true, func(r *Rule) **bool { return &r.PhysDevIsIn }), "--physdev-is-in")
	add(flag(true, func(r *Rule) **bool { return &r.PhysDevIsOut }), "--physdev-is-out")
	add(flag(true, func(r *Rule) **bool { return &r.PhysDevIsBridged }), "--physdev-is-bridged")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.IPVSVAddr }), "--vaddr")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.IPVSVPort }), "--vport")
	add(val(true, func(r *Rule) **IPTablesValue { return &r.IPVSVProto }), "--vproto")
	return m
}()

// ParseRule parses one "-A CHAIN ..." rule. When strict is false, parameters it does
// not know are kept in OtherArgs; when true, they are an error. Either way, a value
// parameter without its value, a "!" before a parameter that cannot be negated, and an
// unterminated quote are errors.
func ParseRule(rule string, strict bool) (*Rule, error) {
	rule = strings.TrimFunc(rule, isBlankRune)
	words, err := splitWords(rule)
	if err != nil {
		return nil, fmt.Errorf("bad iptables rule %q: %w", rule, err)
	}
	return parseRuleWords(rule, words, strict)
}

func parseRuleWords(raw string, words []string, strict bool) (*Rule, error) {
	if len(words) < 2 || (words[0] != "-A" && words[0] != "--append") {
		return nil, fmt.Errorf(`bad iptables rule %q (does not start with "-A CHAIN")`, raw)
	}
	if len(words) < 3 {
		return nil, fmt.Errorf("bad iptables rule %q (no match rules)", raw)
	}
	r := &Rule{Raw: raw, Chain: iptables.Chain(words[1])}
	negated := false
	for w := 2; w < len(words); w++ {
		word := words[w]
		if word == "!" {
			if negated {
				return nil, fmt.Errorf("bad iptables rule %q: two \"!\" in a row", raw)
			}
			negated = true
			continue
		}
		if word == "-m" || word == "--match" {
			if negated {
				return nil, fmt.Errorf("bad iptables rule %q: cannot negate parameter %q", raw, word)
			}
			if w == len(words)-1 {
				return nil, fmt.Errorf("bad iptables rule %q: parameter %q requires an argument", raw, word)
			}
			w++
			continue
		}
		p, known := ruleParams[word]
		if !known {
			if strict {
				return nil, fmt.Errorf("bad iptables rule %q: unrecognized parameter %q", raw, word)
			}
			if negated {
				r.OtherArgs = append(r.OtherArgs, "!")
			}
			r.OtherArgs = append(r.OtherArgs, word)
			negated = false
			continue
		}
		if negated && !p.negatable {
			return nil, fmt.Errorf("bad iptables rule %q: cannot negate parameter %q", raw, word)
		}
		if p.flag != nil {
			b := !negated
			*p.flag(r) = &b
		} else {
			if w == len(words)-1 {
				return nil, fmt.Errorf("bad iptables rule %q: parameter %q requires an argument", raw, word)
			}
			w++
			*p.value(r) = &IPTablesValue{Negated: negated, Value: words[w]}
			if word == "--match-set" {
				if w == len(words)-1 {
					return nil, fmt.Errorf("bad iptables rule %q: parameter %q requires a set name and flags", raw, word)
				}
				w++
				r.MatchSetFlags = words[w]
			}
		}
		negated = false
	}
	if negated {
		return nil, fmt.Errorf("bad iptables rule %q: \"!\" at the end", raw)
	}
	return r, nil
}

var errUnterminatedQuote = errors.New("unterminated quote")

// splitWords splits a line into words the way iptables-restore does: on blanks,
// except inside double quotes, where a backslash escapes the next character. Quotes
// may appear mid-word and are removed.
func splitWords(s string) ([]string, error) {
	if !strings.ContainsRune(s, '"') {
		// Not strings.Fields: iptables splits on ASCII blanks only.
		return strings.FieldsFunc(s, isBlankRune), nil
	}
	var words []string
	for i := 0; i < len(s); {
		if isBlank(s[i]) {
			i++
			continue
		}
		start := i
		inQuote, escaped, hasEscape := false, false, false
		for ; i < len(s); i++ {
			c := s[i]
			switch {
			case escaped:
				escaped = false
			case inQuote && c == '\\':
				escaped, hasEscape = true, true
			case c == '"':
				inQuote = !inQuote
			case !inQuote && isBlank(c):
				goto end
			}
		}
	end:
		if inQuote {
			return nil, errUnterminatedQuote
		}
		word := s[start:i]
		switch quotes := strings.Count(word, `"`); {
		case quotes == 0:
			words = append(words, word)
		case quotes == 2 && !hasEscape && word[0] == '"' && word[len(word)-1] == '"':
			// The common case, a whole quoted word: no copy needed.
			words = append(words, word[1:len(word)-1])
		default:
			words = append(words, unquote(word))
		}
	}
	return words, nil
}

// unquote removes quotes and escapes from one word already known to be well formed.
func unquote(word string) string {
	var b strings.Builder
	inQuote, escaped := false, false
	for i := 0; i < len(word); i++ {
		c := word[i]
		switch {
		case escaped:
			b.WriteByte(c)
			escaped = false
		case inQuote && c == '\\':
			escaped = true
		case c == '"':
			inQuote = !inQuote
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func isBlankRune(r rune) bool { return r < 0x80 && isBlank(byte(r)) }

func isBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f'
}

// quoteWord quotes w the way iptables-save does, so that splitWords gives it back.
func quoteWord(w string) string {
	if w != "" && !strings.ContainsAny(w, " \t\r\n\v\f\"\\") {
		return w
	}
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(w); i++ {
		if w[i] == '"' || w[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(w[i])
	}
	b.WriteByte('"')
	return b.String()
}

// joinWords is the inverse of splitWords.
func joinWords(words []string) string {
	quoted := make([]string, len(words))
	for i, w := range words {
		quoted[i] = quoteWord(w)
	}
	return strings.Join(quoted, " ")
}

// ruleArgs returns the words of r after "-A CHAIN", for comparing rules the way
// "iptables -C" does (by content, not spelling).
func ruleArgs(r *Rule) []string {
	words, err := splitWords(r.Raw)
	if err != nil || len(words) < 2 {
		return nil
	}
	return words[2:]
}
