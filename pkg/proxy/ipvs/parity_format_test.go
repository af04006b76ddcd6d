//go:build linux

package ipvs

// This file is compiled twice: here, and overlaid into upstream v1.37.2's
// pkg/proxy/ipvs by the capture module (testdata/upstream-baseline), so
// that upstream's state and ours are printed by the same code. It must
// therefore import only the standard library and use only parity* names.

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// parityDumpState is the state of a node after a sync, read from the fakes.
type parityDumpState struct {
	VirtualServers []parityDumpVS
	Sets           []parityDumpSet
	// DummyExists says whether kube-ipvs0 exists; Bound are its addresses.
	DummyExists bool
	Bound       []string
	Sysctls     map[string]int
	// IPTablesSave is iptables-save output of every table (ip6tables-save
	// in single-stack IPv6 scenarios).
	IPTablesSave string
	// IP6TablesSave is ip6tables-save output in dual-stack scenarios.
	IP6TablesSave string
}

type parityDumpVS struct {
	Protocol, Address string
	Port              int
	Scheduler         string
	Flags, Timeout    uint32
	RealServers       []parityDumpRS
}

type parityDumpRS struct {
	Address      string
	Port, Weight int
}

type parityDumpSet struct {
	Name, Type, Family string
	// HashSize, MaxElem and PortRange are what ipset(8) is asked to create
	// (ipset's defaults filled in where the spec leaves them zero).
	HashSize, MaxElem int
	PortRange         string
	Entries           []string
}

// paritySysctlsIgnored are left out of the dump: conn_reuse_mode is set or
// left alone depending on the running kernel's version, which upstream reads
// from the host.
var paritySysctlsIgnored = map[string]bool{"net/ipv4/vs/conn_reuse_mode": true}

// parityBuiltinChains are left out when empty: the fakes start with
// different sets of empty built-in chains.
var parityBuiltinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// parityUnorderedChains hold rules whose order upstream takes from Go map
// iteration (one DROP rule per load balancer IP, port and protocol); their
// order does not change what they do, so they are sorted.
var parityUnorderedChains = map[string]bool{"KUBE-IPVS-OUT-FILTER": true}

// parityFormat prints st canonically: everything sorted except the order
// of iptables rules within a chain, which is kept (it is behaviour).
func parityFormat(st parityDumpState) string {
	var b strings.Builder
	b.WriteString("# ipvs virtual servers\n")
	vss := slices.Clone(st.VirtualServers)
	slices.SortFunc(vss, func(a, c parityDumpVS) int {
		return cmp.Or(cmp.Compare(a.Address, c.Address), cmp.Compare(a.Port, c.Port), cmp.Compare(strings.ToUpper(a.Protocol), strings.ToUpper(c.Protocol)))
	})
	for _, vs := range vss {
		fmt.Fprintf(&b, "%s %s sched=%s flags=%#x timeout=%d\n", strings.ToUpper(vs.Protocol), parityHostPort(vs.Address, vs.Port), vs.Scheduler, vs.Flags, vs.Timeout)
		var rss []string
		for _, rs := range vs.RealServers {
			rss = append(rss, fmt.Sprintf("  -> %s weight=%d\n", parityHostPort(rs.Address, rs.Port), rs.Weight))
		}
		slices.Sort(rss)
		b.WriteString(strings.Join(rss, ""))
	}

	b.WriteString("# ipsets\n")
	sets := slices.Clone(st.Sets)
	slices.SortFunc(sets, func(a, c parityDumpSet) int { return cmp.Compare(a.Name, c.Name) })
	for _, s := range sets {
		// bitmap:port has no family, hash types no port range; the fakes
		// differ in whether they keep them.
		opts := " range=" + s.PortRange
		if strings.HasPrefix(s.Type, "hash:") {
			opts = fmt.Sprintf(" family=%s hashsize=%d maxelem=%d", s.Family, s.HashSize, s.MaxElem)
		}
		fmt.Fprintf(&b, "%s %s%s\n", s.Name, s.Type, opts)
		entries := slices.Clone(s.Entries)
		slices.Sort(entries)
		for _, e := range entries {
			fmt.Fprintf(&b, "  %s\n", e)
		}
	}

	b.WriteString("# kube-ipvs0\n")
	if !st.DummyExists {
		b.WriteString("  (absent)\n")
	}
	bound := slices.Clone(st.Bound)
	slices.Sort(bound)
	for _, a := range bound {
		fmt.Fprintf(&b, "  %s\n", a)
	}

	b.WriteString("# sysctls\n")
	var names []string
	for n := range st.Sysctls {
		if !paritySysctlsIgnored[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&b, "  %s=%d\n", n, st.Sysctls[n])
	}

	b.WriteString("# iptables\n")
	b.WriteString(parityIPTables(st.IPTablesSave))
	if st.IP6TablesSave != "" {
		b.WriteString("# ip6tables\n")
		b.WriteString(parityIPTables(st.IP6TablesSave))
	}
	return b.String()
}

func parityHostPort(addr string, port int) string {
	if strings.Contains(addr, ":") {
		return fmt.Sprintf("[%s]:%d", addr, port)
	}
	return fmt.Sprintf("%s:%d", addr, port)
}

// parityIPTables normalises iptables-save output: tables and chains sorted
// by name, empty built-in chains and empty tables left out, counters
// dropped, quotes removed and spaces collapsed in rules (the fakes keep rules
// added word by word unquoted), rule order kept within each chain.
func parityIPTables(save string) string {
	type table struct {
		chains map[string][]string
	}
	tables := map[string]*table{}
	var cur *table
	for _, line := range strings.Split(save, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || line == "COMMIT" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			name := line[1:]
			if tables[name] == nil {
				tables[name] = &table{chains: map[string][]string{}}
			}
			cur = tables[name]
		case cur == nil:
			// Nothing before the first table header is a rule.
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if _, ok := cur.chains[name]; !ok {
				cur.chains[name] = nil
			}
		case strings.HasPrefix(line, "-A "):
			rule := strings.Join(strings.Fields(strings.ReplaceAll(line, `"`, "")), " ")
			chain := strings.Fields(rule)[1]
			cur.chains[chain] = append(cur.chains[chain], rule)
		default:
			if cur.chains["?"] == nil {
				cur.chains["?"] = []string{}
			}
			cur.chains["?"] = append(cur.chains["?"], "unparsed: "+line)
		}
	}
	var b strings.Builder
	var tnames []string
	for n := range tables {
		tnames = append(tnames, n)
	}
	slices.Sort(tnames)
	for _, tn := range tnames {
		t := tables[tn]
		var cnames []string
		for c, rules := range t.chains {
			if len(rules) == 0 && parityBuiltinChains[c] {
				continue
			}
			cnames = append(cnames, c)
		}
		if len(cnames) == 0 {
			continue
		}
		slices.Sort(cnames)
		fmt.Fprintf(&b, "*%s\n", tn)
		for _, c := range cnames {
			fmt.Fprintf(&b, ":%s\n", c)
		}
		for _, c := range cnames {
			rules := t.chains[c]
			if parityUnorderedChains[c] {
				rules = slices.Clone(rules)
				slices.Sort(rules)
			}
			for _, r := range rules {
				b.WriteString(r + "\n")
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}
