package trace

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// IPSet is one ip set as `ipset save` or `ipset list` shows it.
type IPSet struct {
	Name string
	// Type is the set type ("hash:ip,port", "bitmap:port", ...).
	Type string
	// Family is "inet" or "inet6"; empty for types that hold no address
	// (bitmap:port), which match packets of either family.
	Family string
	// Members are the members as ipset writes them, without their options
	// ("10.0.0.1,tcp:80"; "timeout", "comment" and the like dropped).
	Members []string

	entries []setEntry
	// index holds, for every type but hash:net, the entries by the fields
	// a lookup compares exactly (all but hash:ip,port,net's net), so a
	// lookup in a set of thousands of services is not a scan.
	index map[setKey][]int
	// unmodelled says why the set cannot be evaluated (a type the tracer
	// does not know); lookups in it are UNKNOWN.
	unmodelled string
}

// setEntry is one compiled member. Which fields count depends on the type.
type setEntry struct {
	addr    netip.Addr
	proto   string
	port    uint16
	addr2   netip.Addr
	net     netip.Prefix
	nomatch bool
}

type setKey struct {
	addr, addr2 netip.Addr
	proto       string
	port        uint16
}

// key is e's index key for setType.
func (e *setEntry) key(setType string) setKey {
	k := setKey{addr: e.addr.Unmap(), proto: e.proto, port: e.port}
	if setType == "hash:ip,port,ip" {
		k.addr2 = e.addr2.Unmap()
	}
	return k
}

// setDims is how many packet fields ("src"/"dst" flags) each modelled
// type looks at.
var setDims = map[string]int{
	"hash:ip": 1, "hash:net": 1, "bitmap:port": 1,
	"hash:ip,port": 2, "hash:ip,port,ip": 3, "hash:ip,port,net": 3,
}

// NewIPSet compiles a set from its name, type, family and members, as a
// caller holding them in another form (net-utils' ipset types) gives them.
// A member that does not parse for a modelled type is an error; a type the
// tracer does not model is kept, and a rule that looks it up is UNKNOWN.
func NewIPSet(name, setType, family string, members []string) (*IPSet, error) {
	s := &IPSet{Name: name, Type: setType, Family: family, Members: members}
	if name == "" {
		return nil, fmt.Errorf("ip set without a name")
	}
	switch family {
	case "", "inet", "inet6":
	default:
		return nil, fmt.Errorf("ip set %s: family %q: want inet or inet6", name, family)
	}
	if _, ok := setDims[setType]; !ok {
		s.unmodelled = fmt.Sprintf("ip set %s has type %q, which the tracer does not model", name, setType)
		return s, nil
	}
	if setType != "bitmap:port" && family == "" {
		// ipset writes "family inet" for every hash set, also by default.
		s.Family = "inet"
	}
	s.entries = make([]setEntry, 0, len(members))
	for _, m := range members {
		e, err := parseSetMember(setType, m)
		if err != nil {
			return nil, fmt.Errorf("ip set %s (%s): member %q: %w", name, setType, m, err)
		}
		s.entries = append(s.entries, e)
	}
	if setType != "hash:net" {
		s.index = make(map[setKey][]int, len(s.entries))
		for i := range s.entries {
			k := s.entries[i].key(setType)
			s.index[k] = append(s.index[k], i)
		}
	}
	return s, nil
}

// parseSetMember reads one member, with any options after it.
func parseSetMember(setType, member string) (setEntry, error) {
	f := strings.Fields(member)
	if len(f) == 0 {
		return setEntry{}, fmt.Errorf("empty member")
	}
	var e setEntry
	for _, opt := range f[1:] {
		if opt == "nomatch" {
			e.nomatch = true
		}
	}
	parts := strings.Split(f[0], ",")
	if want := setDims[setType]; len(parts) != want {
		return e, fmt.Errorf("want %d comma-separated parts, got %d", want, len(parts))
	}
	var err error
	switch setType {
	case "hash:ip":
		e.addr, err = netip.ParseAddr(parts[0])
	case "hash:net":
		e.net, err = parsePrefix(parts[0])
	case "bitmap:port":
		e.port, err = parseSetPort(parts[0])
	default:
		if e.addr, err = netip.ParseAddr(parts[0]); err != nil {
			return e, err
		}
		if e.proto, e.port, err = parseProtoPort(parts[1]); err != nil {
			return e, err
		}
		switch setType {
		case "hash:ip,port,ip":
			e.addr2, err = netip.ParseAddr(parts[2])
		case "hash:ip,port,net":
			e.net, err = parsePrefix(parts[2])
		}
	}
	return e, err
}

func parseSetPort(s string) (uint16, error) {
	n, err := strconv.ParseUint(s, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("port %q is not a number from 0 to 65535", s)
	}
	return uint16(n), nil
}

// parseProtoPort reads "tcp:80", or "80" (ipset's default protocol is tcp).
// Protocols without ports ("icmp:ping") are kept with port 0; the traced
// packets are tcp, udp or sctp, so they never match.
func parseProtoPort(s string) (string, uint16, error) {
	proto, port, hasProto := strings.Cut(s, ":")
	if !hasProto {
		proto, port = "tcp", s
	}
	proto = strings.ToLower(proto)
	switch proto {
	case "tcp", "udp", "sctp", "udplite":
		p, err := parseSetPort(port)
		return proto, p, err
	case "":
		return "", 0, fmt.Errorf("protocol missing before %q", ":"+port)
	}
	return proto, 0, nil
}

// ParseIPSets reads `ipset save` ("create NAME TYPE ..." and "add NAME
// MEMBER ..." lines) or `ipset list` ("Name:", "Type:", "Header:",
// "Members:" blocks) output.
func ParseIPSets(text string) ([]*IPSet, error) {
	type raw struct{ name, typ, family, netmask string }
	var order []*raw
	byName := map[string]*raw{}
	members := map[string][]string{}
	var cur *raw
	inMembers := false
	for i, line := range strings.Split(text, "\n") {
		lineNo := i + 1
		line = strings.TrimRight(line, "\r")
		t := strings.TrimSpace(line)
		if t == "" {
			inMembers = false
			continue
		}
		if inMembers && !strings.HasPrefix(t, "Name:") {
			members[cur.name] = append(members[cur.name], t)
			continue
		}
		inMembers = false
		w := strings.Fields(t)
		switch {
		case w[0] == "create":
			if len(w) < 3 {
				return nil, fmt.Errorf("line %d: %q: want \"create NAME TYPE ...\"", lineNo, t)
			}
			if byName[w[1]] != nil {
				return nil, fmt.Errorf("line %d: ip set %s created twice", lineNo, w[1])
			}
			cur = &raw{name: w[1], typ: w[2], family: optionValue(w[3:], "family"), netmask: optionValue(w[3:], "netmask")}
			byName[cur.name] = cur
			order = append(order, cur)
		case w[0] == "add":
			if len(w) < 3 {
				return nil, fmt.Errorf("line %d: %q: want \"add NAME MEMBER\"", lineNo, t)
			}
			if byName[w[1]] == nil {
				return nil, fmt.Errorf("line %d: member added to ip set %s before it is created", lineNo, w[1])
			}
			members[w[1]] = append(members[w[1]], strings.Join(w[2:], " "))
		case strings.HasPrefix(t, "Name:"):
			name := strings.TrimSpace(strings.TrimPrefix(t, "Name:"))
			if name == "" || byName[name] != nil {
				return nil, fmt.Errorf("line %d: ip set name %q missing or listed twice", lineNo, name)
			}
			cur = &raw{name: name}
			byName[name] = cur
			order = append(order, cur)
		case cur != nil && strings.HasPrefix(t, "Type:"):
			cur.typ = strings.TrimSpace(strings.TrimPrefix(t, "Type:"))
		case cur != nil && strings.HasPrefix(t, "Header:"):
			h := strings.Fields(strings.TrimPrefix(t, "Header:"))
			cur.family, cur.netmask = optionValue(h, "family"), optionValue(h, "netmask")
		case cur != nil && t == "Members:":
			inMembers = true
		case cur != nil && (strings.HasPrefix(t, "Revision:") || strings.HasPrefix(t, "Size in memory:") ||
			strings.HasPrefix(t, "References:") || strings.HasPrefix(t, "Number of entries:")):
		default:
			return nil, fmt.Errorf("line %d: unexpected %q (want ipset save or ipset list output)", lineNo, t)
		}
	}
	sets := make([]*IPSet, 0, len(order))
	for _, r := range order {
		if r.typ == "" {
			return nil, fmt.Errorf("ip set %s: type missing", r.name)
		}
		s, err := NewIPSet(r.name, r.typ, r.family, members[r.name])
		if err != nil {
			return nil, err
		}
		if r.netmask != "" && s.unmodelled == "" {
			// Members then stand for whole networks.
			s.unmodelled = fmt.Sprintf("ip set %s has netmask %s, which the tracer does not model", r.name, r.netmask)
		}
		sets = append(sets, s)
	}
	return sets, nil
}

func optionValue(words []string, name string) string {
	for i := 0; i+1 < len(words); i++ {
		if words[i] == name {
			return words[i+1]
		}
	}
	return ""
}

// test looks the packet's fields up in s, as the kernel's ip_set_test
// does: flags say, for each of the set's dimensions, whether to take the
// packet's source ("src") or destination ("dst") address or port. A rule
// with fewer flags than the set has dimensions, or a set of the other
// family, never matches. unknownWhy is set when the answer depends on what
// the tracer does not know (a source port, an unmodelled set type).
func (s *IPSet) test(flags []string, src, dst netip.Addr, proto string, dport uint16) (match bool, unknownWhy string) {
	if s.unmodelled != "" {
		return false, s.unmodelled
	}
	dims := setDims[s.Type]
	if len(flags) < dims {
		return false, ""
	}
	for _, f := range flags {
		if f != "src" && f != "dst" {
			return false, fmt.Sprintf("ip set %s: match flag %q not modelled", s.Name, f)
		}
	}
	is4 := dst.Unmap().Is4()
	if (s.Family == "inet" && !is4) || (s.Family == "inet6" && is4) {
		return false, ""
	}
	addr := func(i int) netip.Addr {
		if flags[i] == "src" {
			return src.Unmap()
		}
		return dst.Unmap()
	}
	portDim := -1
	switch s.Type {
	case "bitmap:port":
		portDim = 0
	case "hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net":
		portDim = 1
	}
	if portDim >= 0 && flags[portDim] == "src" {
		return false, fmt.Sprintf("ip set %s: the packet's source port is not traced (%s)", s.Name, strings.Join(flags, ","))
	}
	// hash:net-like lookups take the most specific matching prefix, so a
	// "nomatch" entry can carve a hole in a wider one.
	best, found := -1, false
	candidates := func(yield func(setEntry) bool) {
		for _, e := range s.entries {
			if !yield(e) {
				return
			}
		}
	}
	if s.index != nil {
		want := setEntry{port: dport}
		switch s.Type {
		case "hash:ip":
			want = setEntry{addr: addr(0)}
		case "hash:ip,port", "hash:ip,port,net":
			want.addr, want.proto = addr(0), proto
		case "hash:ip,port,ip":
			want.addr, want.proto, want.addr2 = addr(0), proto, addr(2)
		}
		hits := s.index[want.key(s.Type)]
		candidates = func(yield func(setEntry) bool) {
			for _, i := range hits {
				if !yield(s.entries[i]) {
					return
				}
			}
		}
	}
	for e := range candidates {
		var ok bool
		bits := -1
		switch s.Type {
		case "hash:ip":
			ok = e.addr.Unmap() == addr(0)
		case "hash:net":
			ok = e.net.Contains(addr(0))
			bits = e.net.Bits()
		case "bitmap:port":
			ok = e.port == dport
		case "hash:ip,port":
			ok = e.addr.Unmap() == addr(0) && e.proto == proto && e.port == dport
		case "hash:ip,port,ip":
			ok = e.addr.Unmap() == addr(0) && e.proto == proto && e.port == dport && e.addr2.Unmap() == addr(2)
		case "hash:ip,port,net":
			ok = e.addr.Unmap() == addr(0) && e.proto == proto && e.port == dport && e.net.Contains(addr(2))
			bits = e.net.Bits()
		}
		if !ok {
			continue
		}
		if bits < 0 {
			return !e.nomatch, ""
		}
		if bits > best {
			best, found = bits, !e.nomatch
		}
	}
	return found, ""
}
