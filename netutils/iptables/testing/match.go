package testing

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Helpers for packet tracers: each evaluates one parsed parameter against a packet's
// value the way the kernel match does, honouring negation. A nil value (parameter
// absent) matches everything.

// MatchesIP evaluates -s/-d: the value is an address or a CIDR ("10.0.0.0/8"), or a
// comma-separated list of them (as iptables-restore input may give).
func (v *IPTablesValue) MatchesIP(ip string) (bool, error) {
	if v == nil {
		return true, nil
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil {
		return false, fmt.Errorf("bad packet address %q: %w", ip, err)
	}
	found := false
	for item := range strings.SplitSeq(v.Value, ",") {
		var prefix netip.Prefix
		if strings.Contains(item, "/") {
			prefix, err = netip.ParsePrefix(item)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(item)
			prefix = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil {
			return false, fmt.Errorf("bad address %q in rule: %w", item, err)
		}
		if prefix.Masked().Contains(addr.Unmap()) {
			found = true
			break
		}
	}
	return found != v.Negated, nil
}

// MatchesPort evaluates --dport/--sport and --dports/--sports: the value is a port, a
// range "LOW:HIGH", or a comma-separated list of those.
func (v *IPTablesValue) MatchesPort(port int) (bool, error) {
	if v == nil {
		return true, nil
	}
	found := false
	for item := range strings.SplitSeq(v.Value, ",") {
		lowS, highS, isRange := strings.Cut(item, ":")
		low, err := parsePort(lowS, 0)
		if err != nil {
			return false, fmt.Errorf("bad port %q in rule: %w", item, err)
		}
		high := low
		if isRange {
			if high, err = parsePort(highS, 65535); err != nil {
				return false, fmt.Errorf("bad port range %q in rule: %w", item, err)
			}
		}
		if port >= low && port <= high {
			found = true
			break
		}
	}
	return found != v.Negated, nil
}

// parsePort parses a port; empty (an open-ended range) gives def.
func parsePort(s string, def int) (int, error) {
	if s == "" {
		return def, nil
	}
	n, err := strconv.ParseUint(s, 10, 16)
	return int(n), err
}

// MatchesInterface evaluates -i/-o: a trailing "+" matches any interface name with
// that prefix.
func (v *IPTablesValue) MatchesInterface(name string) bool {
	if v == nil {
		return true
	}
	var match bool
	if prefix, ok := strings.CutSuffix(v.Value, "+"); ok {
		match = strings.HasPrefix(name, prefix)
	} else {
		match = name == v.Value
	}
	return match != v.Negated
}

// MatchesList evaluates comma-separated value lists such as --ctstate
// ("RELATED,ESTABLISHED"): it matches when item is one of them.
func (v *IPTablesValue) MatchesList(item string) bool {
	if v == nil {
		return true
	}
	found := false
	for s := range strings.SplitSeq(v.Value, ",") {
		if s == item {
			found = true
			break
		}
	}
	return found != v.Negated
}

// parseMark parses "VALUE[/MASK]" (hex or decimal); the mask defaults to all ones.
func parseMark(s string) (value, mask uint32, err error) {
	vs, ms, hasMask := strings.Cut(s, "/")
	v, err := strconv.ParseUint(vs, 0, 32)
	if err != nil {
		return 0, 0, fmt.Errorf("bad mark %q: %w", s, err)
	}
	m := uint64(0xffffffff)
	if hasMask {
		if m, err = strconv.ParseUint(ms, 0, 32); err != nil {
			return 0, 0, fmt.Errorf("bad mark mask %q: %w", s, err)
		}
	}
	return uint32(v), uint32(m), nil
}

// MatchesMark evaluates "-m mark --mark VALUE[/MASK]": (mark & MASK) == VALUE.
func (v *IPTablesValue) MatchesMark(mark uint32) (bool, error) {
	if v == nil {
		return true, nil
	}
	value, mask, err := parseMark(v.Value)
	if err != nil {
		return false, err
	}
	return (mark&mask == value) != v.Negated, nil
}

// ApplyMark returns mark as changed by r's MARK target (--set-xmark, --set-mark,
// --or-mark, --xor-mark, --and-mark); it returns mark unchanged when r is not a MARK
// rule.
func (r *Rule) ApplyMark(mark uint32) (uint32, error) {
	if r.Jump == nil || r.Jump.Value != "MARK" {
		return mark, nil
	}
	switch {
	case r.SetXMark != nil:
		v, m, err := parseMark(r.SetXMark.Value)
		if err != nil {
			return mark, err
		}
		return (mark &^ m) ^ v, nil
	case r.SetMark != nil:
		v, m, err := parseMark(r.SetMark.Value)
		if err != nil {
			return mark, err
		}
		return (mark &^ m) | v, nil
	case r.OrMark != nil:
		v, _, err := parseMark(r.OrMark.Value)
		return mark | v, err
	case r.XorMark != nil:
		v, _, err := parseMark(r.XorMark.Value)
		return mark ^ v, err
	case r.AndMark != nil:
		v, _, err := parseMark(r.AndMark.Value)
		return mark & v, err
	}
	return mark, fmt.Errorf("MARK rule %q sets no mark", r.Raw)
}
