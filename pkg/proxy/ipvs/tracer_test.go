//go:build linux

package ipvs

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
)

// origin is where a traced packet comes from.
type origin int

const (
	// fromExternal arrives on the node's uplink from off the node.
	fromExternal origin = iota
	// fromPod arrives from a local pod over the bridge.
	fromPod
	// fromNode is sent by a process on the node.
	fromNode
)

// packet is what the tracer follows.
type packet struct {
	from  origin
	src   string
	dst   string
	proto string // "tcp", "udp", "sctp"
	dport int
}

// trace is what happened to a packet.
type trace struct {
	// verdict is "ipvs" (taken by a virtual server), "drop", "reject",
	// "host" (delivered to a local socket, no virtual server) or "forward"
	// (not for this node).
	verdict string
	// realServers are the "ip:port" a new connection may go to (weight > 0).
	realServers []string
	// persistent and timeout are the virtual server's ClientIP affinity.
	persistent bool
	timeout    uint32
	// masq lists the real servers whose connections are masqueraded.
	masq []string
}

func (t trace) String() string {
	s := t.verdict
	if len(t.realServers) > 0 {
		s += " " + strings.Join(t.realServers, ",")
	}
	if t.persistent {
		s += fmt.Sprintf(" persistent=%d", t.timeout)
	}
	if len(t.masq) > 0 {
		s += " masq=" + strings.Join(t.masq, ",")
	}
	return s
}

// tracer walks the rules of ipvs mode in the fakes the way the kernel would
// for the first packet of a connection.
type tracer struct {
	t     testing.TB
	env   *fakeEnv
	dump  *iptablestest.IPTablesDump
	local sets.Set[string]
}

func newTracer(t testing.TB, env *fakeEnv) *tracer {
	t.Helper()
	var all strings.Builder
	for _, table := range []utiliptables.Table{utiliptables.TableNAT, utiliptables.TableFilter} {
		var b bytesBuffer
		if err := env.ipt.SaveInto(table, &b.Buffer); err != nil {
			t.Fatalf("save %s: %v", table, err)
		}
		all.WriteString(b.String())
	}
	dump, err := iptablestest.ParseIPTablesDump(all.String())
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	local := sets.New[string]()
	nodeAddrs, _ := env.netlink.GetAllLocalAddresses()
	local = local.Union(nodeAddrs)
	bound, _ := env.netlink.ListBindAddress(defaultDummyDevice)
	local.Insert(bound...)
	local.Insert("127.0.0.1", "::1")
	return &tracer{t: t, env: env, dump: dump, local: local}
}

// state of one walk.
type walk struct {
	pkt  packet
	mark uint32
}

// run walks chain and returns the terminating target ("" if the chain fell
// through, "RETURN" never escapes a jump).
func (tr *tracer) run(table utiliptables.Table, chain utiliptables.Chain, w *walk, depth int) string {
	tr.t.Helper()
	if depth > 20 {
		tr.t.Fatalf("chain loop at %s/%s", table, chain)
	}
	c, err := tr.dump.GetChain(table, chain)
	if err != nil {
		tr.t.Fatalf("chain %s/%s: %v", table, chain, err)
	}
	for _, r := range c.Rules {
		if !tr.matches(r, w) {
			continue
		}
		if r.Jump == nil {
			continue
		}
		target := r.Jump.Value
		switch target {
		case "MARK":
			m, err := r.ApplyMark(w.mark)
			if err != nil {
				tr.t.Fatalf("rule %q: %v", r.Raw, err)
			}
			w.mark = m
		case "RETURN":
			return ""
		case "ACCEPT", "DROP", "REJECT", "MASQUERADE":
			return target
		default:
			if v := tr.run(table, utiliptables.Chain(target), w, depth+1); v != "" {
				return v
			}
		}
	}
	return ""
}

func (tr *tracer) matches(r *iptablestest.Rule, w *walk) bool {
	tr.t.Helper()
	p := w.pkt
	if len(r.OtherArgs) > 0 {
		tr.t.Fatalf("tracer does not understand %v in %q", r.OtherArgs, r.Raw)
	}
	ok := func(b bool, err error) bool {
		if err != nil {
			tr.t.Fatalf("rule %q: %v", r.Raw, err)
		}
		return b
	}
	if r.Protocol != nil && !r.Protocol.Matches(p.proto) {
		return false
	}
	if !ok(r.SourceAddress.MatchesIP(p.src)) || !ok(r.DestinationAddress.MatchesIP(p.dst)) {
		return false
	}
	if r.DestinationPort != nil && !ok(r.DestinationPort.MatchesPort(p.dport)) {
		return false
	}
	if r.SourceType != nil && !tr.addrType(r.SourceType, p.src) {
		return false
	}
	if r.DestinationType != nil && !tr.addrType(r.DestinationType, p.dst) {
		return false
	}
	if r.PhysDevIsIn != nil && *r.PhysDevIsIn != (p.from == fromPod) {
		return false
	}
	if r.MarkCheck != nil && !ok(r.MarkCheck.MatchesMark(w.mark)) {
		return false
	}
	// Every traced packet opens a connection.
	if r.CTStateCheck != nil && r.CTStateCheck.MatchesList("NEW") == r.CTStateCheck.Negated {
		return false
	}
	if r.MatchSet != nil && tr.inSet(r.MatchSet.Value, r.MatchSetFlags, p) == r.MatchSet.Negated {
		return false
	}
	if r.IPVSVAddr != nil || r.IPVSVPort != nil || r.IPVSVProto != nil {
		// -m ipvs matches packets of IPVS connections; the first packet to
		// a virtual server is one once IPVS has taken it.
		if tr.virtualServer(p) == nil ||
			(r.IPVSVAddr != nil && !ok(r.IPVSVAddr.MatchesIP(p.dst))) ||
			(r.IPVSVPort != nil && !ok(r.IPVSVPort.MatchesPort(p.dport))) ||
			(r.IPVSVProto != nil && !r.IPVSVProto.Matches(p.proto)) {
			return false
		}
	}
	return true
}

func (tr *tracer) addrType(v *iptablestest.IPTablesValue, ip string) bool {
	if v.Value != "LOCAL" {
		tr.t.Fatalf("tracer does not understand addrtype %q", v.Value)
	}
	return tr.local.Has(ip) != v.Negated
}

// inSet evaluates "-m set --match-set name flags" against the ipset fake.
func (tr *tracer) inSet(name, flags string, p packet) bool {
	tr.t.Helper()
	spec, ok := tr.env.ipset.Sets[name]
	if !ok {
		tr.t.Fatalf("rule matches missing set %s", name)
	}
	entries := tr.env.ipset.Entries[name]
	dirs := strings.Split(flags, ",")
	addr := func(i int) string {
		if dirs[i] == "src" {
			return p.src
		}
		return p.dst
	}
	port := func(i int) int {
		if dirs[i] != "dst" {
			tr.t.Fatalf("tracer only knows destination ports (set %s %s)", name, flags)
		}
		return p.dport
	}
	switch spec.SetType {
	case utilipset.HashIP:
		return entries.Has(addr(0))
	case utilipset.BitmapPort:
		return entries.Has(strconv.Itoa(port(0)))
	case utilipset.HashIPPort:
		return entries.Has(addr(0) + "," + p.proto + ":" + strconv.Itoa(port(1)))
	case utilipset.HashIPPortIP:
		return entries.Has(addr(0) + "," + p.proto + ":" + strconv.Itoa(port(1)) + "," + addr(2))
	case utilipset.HashIPPortNet:
		prefix := addr(0) + "," + p.proto + ":" + strconv.Itoa(port(1)) + ","
		a := netip.MustParseAddr(addr(2))
		for e := range entries {
			if cidr, found := strings.CutPrefix(e, prefix); found {
				if n, err := netip.ParsePrefix(cidr); err == nil && n.Contains(a) {
					return true
				}
			}
		}
		return false
	}
	tr.t.Fatalf("set %s has unexpected type %s", name, spec.SetType)
	return false
}

func (tr *tracer) virtualServer(p packet) *utilipvs.VirtualServer {
	vs, err := tr.env.ipvs.GetVirtualServer(&utilipvs.VirtualServer{
		Address: net.ParseIP(p.dst), Port: uint16(p.dport), Protocol: strings.ToUpper(p.proto)})
	if err != nil || vs == nil {
		return nil
	}
	return vs
}

// trace follows p through nat (PREROUTING or OUTPUT), routing, filter
// (INPUT, and OUTPUT for the node's own packets), IPVS and nat POSTROUTING.
func (tr *tracer) trace(p packet) trace {
	tr.t.Helper()
	w := &walk{pkt: p}
	natHook, filterHooks := utiliptables.ChainPrerouting, []utiliptables.Chain{utiliptables.ChainInput}
	if p.from == fromNode {
		natHook = utiliptables.ChainOutput
		filterHooks = []utiliptables.Chain{utiliptables.ChainOutput, utiliptables.ChainInput}
	}
	tr.run(utiliptables.TableNAT, natHook, w, 0)
	if !tr.local.Has(p.dst) {
		return trace{verdict: "forward"}
	}
	for _, hook := range filterHooks {
		switch v := tr.run(utiliptables.TableFilter, hook, w, 0); v {
		case "DROP":
			return trace{verdict: "drop"}
		case "REJECT":
			return trace{verdict: "reject"}
		}
	}
	vs := tr.virtualServer(p)
	if vs == nil {
		return trace{verdict: "host"}
	}
	out := trace{verdict: "ipvs", persistent: vs.Flags&utilipvs.FlagPersistent != 0, timeout: vs.Timeout}
	rss, err := tr.env.ipvs.GetRealServers(vs)
	if err != nil {
		tr.t.Fatalf("real servers of %s: %v", vs, err)
	}
	for _, rs := range rss {
		if rs.Weight == 0 {
			continue
		}
		out.realServers = append(out.realServers, rs.String())
		// IPVS rewrote the destination; POSTROUTING sees the real server.
		pw := &walk{pkt: packet{from: p.from, src: p.src, dst: rs.Address.String(), proto: p.proto, dport: int(rs.Port)}, mark: w.mark}
		if tr.run(utiliptables.TableNAT, utiliptables.ChainPostrouting, pw, 0) == "MASQUERADE" {
			out.masq = append(out.masq, rs.String())
		}
	}
	sort.Strings(out.realServers)
	sort.Strings(out.masq)
	if slices.Equal(out.masq, out.realServers) && len(out.masq) > 0 {
		out.masq = []string{"all"}
	}
	return out
}
