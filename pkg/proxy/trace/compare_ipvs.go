package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// CompareIPVS compares an ipvs-mode node's live state with the planned one
// of kube-proxy's dry run, by meaning: the IPVS virtual servers (address,
// protocol and port or mark; scheduler, persistence and its timeout,
// scheduler flags) and their real servers (address, port, weight,
// forwarding method); kube-proxy's ip sets (KUBE-*: type, family,
// members); the addresses on kube-ipvs0; and kube-proxy's iptables rules
// (as CompareIPTables does). Order, counters, connection statistics and
// set sizes do not count. family ("inet" or "inet6") is the family of
// expected: a dry run plans one family, while the live IPVS table, ip sets
// and kube-ipvs0 hold both, so the live state's other family is left out.
// It returns at most limit differences (all with limit <= 0).
func CompareIPVS(live, expected *IPVS, family string, limit int) []Difference {
	var out []Difference
	full := func() bool { return limit > 0 && len(out) >= limit }
	add := func(d Difference) bool {
		out = append(out, d)
		return full()
	}
	v6 := family == "inet6"

	if compareVirtualServers(live.VirtualServers, expected.VirtualServers, v6, add) {
		return out
	}
	if compareIPSets(live.Sets, expected.Sets, v6, add) {
		return out
	}
	if compareBound(live.Bound, expected.Bound, v6, add) {
		return out
	}
	rest := 0
	if limit > 0 {
		rest = limit - len(out)
	}
	return append(out, CompareIPTables(live.IPTables, expected.IPTables, rest)...)
}

// compareVirtualServers reports the virtual servers of one family that
// differ; add returns true once enough differences are collected, and so
// does this function.
func compareVirtualServers(live, expected []VirtualServer, v6 bool, add func(Difference) bool) bool {
	index := func(vss []VirtualServer) map[string]*VirtualServer {
		m := make(map[string]*VirtualServer, len(vss))
		for i := range vss {
			vs := &vss[i]
			// A firewall-mark service has no address, so no family:
			// kube-proxy programs none, so one found live is reported
			// whichever family is compared.
			if vs.Address.IsValid() && vs.Address.Unmap().Is6() != v6 {
				continue
			}
			m[vsIdentity(vs)] = vs
		}
		return m
	}
	lm, em := index(live), index(expected)
	for _, key := range unionKeys(lm, em) {
		l, e := lm[key], em[key]
		where := "ipvs virtual server " + key
		switch {
		case l == nil:
			if add(Difference{Where: where, Expected: vsSpec(e)}) {
				return true
			}
			continue
		case e == nil:
			if add(Difference{Where: where, Live: vsSpec(l)}) {
				return true
			}
			continue
		case vsSpec(l) != vsSpec(e):
			if add(Difference{Where: where, Live: vsSpec(l), Expected: vsSpec(e)}) {
				return true
			}
		}
		lr, er := realServers(l), realServers(e)
		for _, rkey := range unionKeys(lr, er) {
			lrs, lok := lr[rkey]
			ers, eok := er[rkey]
			d := Difference{Where: where + " real server " + rkey}
			switch {
			case !lok:
				d.Expected = rsSpec(ers)
			case !eok && lrs.Weight == 0:
				// Draining: kube-proxy's graceful termination keeps a removed
				// endpoint at weight 0 until its connections end. No new
				// connection goes there, and a plan never lists one.
				continue
			case !eok:
				d.Live = rsSpec(lrs)
			case rsSpec(lrs) != rsSpec(ers):
				d.Live, d.Expected = rsSpec(lrs), rsSpec(ers)
			default:
				continue
			}
			if add(d) {
				return true
			}
		}
	}
	return false
}

// vsIdentity is what the kernel tells virtual servers apart by, spelled
// as ipvsadm does ("10.96.0.10:80/TCP", "fwmark 7").
func vsIdentity(vs *VirtualServer) string {
	if !vs.Address.IsValid() {
		return vs.String()
	}
	return hostPort(vs.Address.Unmap(), vs.Port) + "/" + strings.ToUpper(vs.Protocol)
}

// vsSpec is a virtual server's settings, without its real servers. The
// timeout only means something for a persistent service, and the kernel's
// flag order is not the dry run's.
func vsSpec(vs *VirtualServer) string {
	s := "scheduler " + vs.Scheduler
	if vs.Persistent {
		s += " persistent " + strconv.FormatUint(uint64(vs.Timeout), 10)
	}
	if len(vs.Flags) > 0 {
		f := slices.Clone(vs.Flags)
		slices.Sort(f)
		s += " flags " + strings.Join(slices.Compact(f), ",")
	}
	return s
}

func realServers(vs *VirtualServer) map[string]RealServer {
	m := make(map[string]RealServer, len(vs.RealServers))
	for _, rs := range vs.RealServers {
		rs.Address = rs.Address.Unmap()
		m[rs.String()] = rs
	}
	return m
}

// rsSpec is a real server's settings; "" and "Masq" are the same method.
func rsSpec(rs RealServer) string {
	fwd := rs.Forward
	if fwd == "" {
		fwd = "Masq"
	}
	return fmt.Sprintf("weight %d %s", rs.Weight, fwd)
}

// compareIPSets reports kube-proxy's sets (KUBE-*) of one family that
// differ in type, family or members.
func compareIPSets(live, expected map[string]*IPSet, v6 bool, add func(Difference) bool) bool {
	owned := func(sets map[string]*IPSet) map[string]*IPSet {
		m := map[string]*IPSet{}
		for name, s := range sets {
			if strings.HasPrefix(name, "KUBE-") && ipSetIs6(s) == v6 {
				m[name] = s
			}
		}
		return m
	}
	lm, em := owned(live), owned(expected)
	for _, name := range unionKeys(lm, em) {
		l, e := lm[name], em[name]
		where := "ip set " + name
		switch {
		case l == nil:
			if add(Difference{Where: where, Expected: setSpec(e)}) {
				return true
			}
			continue
		case e == nil:
			if add(Difference{Where: where, Live: setSpec(l)}) {
				return true
			}
			continue
		case setSpec(l) != setSpec(e):
			// Members of another type do not compare.
			if add(Difference{Where: where, Live: setSpec(l), Expected: setSpec(e)}) {
				return true
			}
			continue
		}
		lmem, emem := setMembers(l), setMembers(e)
		for _, k := range unionKeys(lmem, emem) {
			d := Difference{Where: where + " member " + k}
			switch {
			case !lmem[k]:
				d.Expected = "add " + name + " " + k
			case !emem[k]:
				d.Live = "add " + name + " " + k
			default:
				continue
			}
			if add(d) {
				return true
			}
		}
	}
	return false
}

// ipSetIs6 says whether s belongs to IPv6. A bitmap:port set has no
// family; kube-proxy names its IPv6 sets KUBE-6-*.
func ipSetIs6(s *IPSet) bool {
	if s.Family != "" {
		return s.Family == "inet6"
	}
	return strings.HasPrefix(s.Name, "KUBE-6-")
}

func setSpec(s *IPSet) string {
	if s.Family == "" {
		return s.Type
	}
	return s.Type + " family " + s.Family
}

// setMembers spells each member by meaning: addresses as netip writes them,
// the protocol ipset assumes when none is written, and no options but
// nomatch (which changes what the member matches). Members of a type the
// tracer does not model are compared as written.
func setMembers(s *IPSet) map[string]bool {
	m := make(map[string]bool, len(s.Members))
	if s.entries == nil {
		for _, mem := range s.Members {
			f := strings.Fields(mem)
			if len(f) == 0 {
				continue
			}
			k := f[0]
			if slices.Contains(f[1:], "nomatch") {
				k += " nomatch"
			}
			m[k] = true
		}
		return m
	}
	for _, e := range s.entries {
		var k string
		switch s.Type {
		case "hash:ip":
			k = e.addr.Unmap().String()
		case "hash:net":
			k = e.net.String()
		case "bitmap:port":
			k = strconv.Itoa(int(e.port))
		case "hash:ip,port":
			k = fmt.Sprintf("%s,%s:%d", e.addr.Unmap(), e.proto, e.port)
		case "hash:ip,port,ip":
			k = fmt.Sprintf("%s,%s:%d,%s", e.addr.Unmap(), e.proto, e.port, e.addr2.Unmap())
		case "hash:ip,port,net":
			k = fmt.Sprintf("%s,%s:%d,%s", e.addr.Unmap(), e.proto, e.port, e.net)
		}
		if e.nomatch {
			k += " nomatch"
		}
		m[k] = true
	}
	return m
}

// compareBound reports the addresses of one family bound to kube-ipvs0 on
// one side only. IPv6 link-local addresses are the kernel's, never
// kube-proxy's, and are left out.
func compareBound(live, expected []netip.Addr, v6 bool, add func(Difference) bool) bool {
	set := func(addrs []netip.Addr) map[string]bool {
		m := make(map[string]bool, len(addrs))
		for _, a := range addrs {
			a = a.Unmap().WithZone("")
			if a.Is6() != v6 || a.IsLinkLocalUnicast() {
				continue
			}
			m[a.String()] = true
		}
		return m
	}
	lm, em := set(live), set(expected)
	for _, a := range unionKeys(lm, em) {
		d := Difference{Where: "kube-ipvs0 address " + a}
		cmd := "ip addr add " + a + "/32 dev kube-ipvs0"
		if v6 {
			cmd = "ip addr add " + a + "/128 dev kube-ipvs0"
		}
		switch {
		case !lm[a]:
			d.Expected = cmd
		case !em[a]:
			d.Live = cmd
		default:
			continue
		}
		if add(d) {
			return true
		}
	}
	return false
}
