//go:build linux

package ipvs

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"

	ptrace "k8s.io/kube-proxy/pkg/proxy/trace"
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

// The interfaces the behaviour tables' packets arrive on: pods sit behind
// a bridge (what "-m physdev --physdev-is-in" tells apart), other hosts
// are reached over the uplink.
const (
	testBridge = "cni0"
	testUplink = "eth0"
)

// packet is what the tracer follows.
type packet struct {
	from  origin
	src   string
	dst   string
	proto string // "tcp", "udp", "sctp"
	dport int
}

// trace is what happened to a packet, in the behaviour tables' terms.
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

// tracer is pkg/proxy/trace's ipvs mode fed with the fakes' state: the
// iptables fake's save, the ipset fake's sets, the IPVS fake's table and
// the netlink fake's addresses. The tables here test the product's tracer.
type tracer struct {
	t     testing.TB
	ipvs  *ptrace.IPVS
	node  *ptrace.Node
	local []netip.Addr
}

func newTracer(t testing.TB, env *fakeEnv) *tracer {
	t.Helper()
	var save strings.Builder
	for _, table := range []utiliptables.Table{utiliptables.TableNAT, utiliptables.TableFilter} {
		var b bytesBuffer
		if err := env.ipt.SaveInto(table, &b.Buffer); err != nil {
			t.Fatalf("save %s: %v", table, err)
		}
		save.WriteString(b.String())
	}
	ipt, err := ptrace.ParseIPTablesSave(save.String())
	if err != nil {
		t.Fatalf("parse rules: %v", err)
	}
	var sets []*ptrace.IPSet
	for name, spec := range env.ipset.Sets {
		members := env.ipset.Entries[name].UnsortedList()
		slices.Sort(members)
		family := spec.HashFamily
		if spec.SetType == "bitmap:port" {
			family = ""
		}
		s, err := ptrace.NewIPSet(name, string(spec.SetType), family, members)
		if err != nil {
			t.Fatalf("ip set from the fake: %v", err)
		}
		sets = append(sets, s)
	}
	vss, err := env.ipvs.GetVirtualServers()
	if err != nil {
		t.Fatal(err)
	}
	var table []ptrace.VirtualServer
	for _, vs := range vss {
		rss, err := env.ipvs.GetRealServers(vs)
		if err != nil {
			t.Fatalf("real servers of %s: %v", vs, err)
		}
		table = append(table, traceVirtualServer(t, vs, rss))
	}
	toAddrs := func(ss []string) []netip.Addr {
		var out []netip.Addr
		for _, s := range ss {
			a, err := netip.ParseAddr(s)
			if err != nil {
				t.Fatalf("address %q from the netlink fake: %v", s, err)
			}
			out = append(out, a)
		}
		return out
	}
	nodeAddrs, _ := env.netlink.GetAllLocalAddresses()
	bound, _ := env.netlink.ListBindAddress(defaultDummyDevice)
	v, err := ptrace.NewIPVS(ipt, sets, table, toAddrs(bound))
	if err != nil {
		t.Fatal(err)
	}
	local := toAddrs(nodeAddrs.UnsortedList())
	return &tracer{t: t, ipvs: v, local: append(local, v.Bound...),
		node: &ptrace.Node{LocalAddrs: local, Bridges: []string{testBridge}}}
}

func traceVirtualServer(t testing.TB, vs *utilipvs.VirtualServer, rss []*utilipvs.RealServer) ptrace.VirtualServer {
	t.Helper()
	a, ok := netip.AddrFromSlice(vs.Address)
	if !ok {
		t.Fatalf("virtual server %s: bad address", vs)
	}
	out := ptrace.VirtualServer{Address: a.Unmap(), Port: vs.Port, Protocol: vs.Protocol, Scheduler: vs.Scheduler,
		Persistent: vs.Flags&utilipvs.FlagPersistent != 0, Timeout: vs.Timeout}
	for _, rs := range rss {
		ra, ok := netip.AddrFromSlice(rs.Address)
		if !ok {
			t.Fatalf("real server %s of %s: bad address", rs, vs)
		}
		out.RealServers = append(out.RealServers, ptrace.RealServer{Address: ra.Unmap(), Port: rs.Port, Weight: rs.Weight, Forward: "Masq"})
	}
	return out
}

// trace traces p and sums its outcomes up the way the tables write them.
func (tr *tracer) trace(p packet) trace {
	tr.t.Helper()
	pk := ptrace.Packet{Src: netip.MustParseAddr(p.src), Dst: netip.MustParseAddr(p.dst), Protocol: p.proto, Port: uint16(p.dport)}
	switch p.from {
	case fromPod:
		pk.From, pk.InInterface = ptrace.FromPod, testBridge
	case fromExternal:
		pk.From, pk.InInterface = ptrace.FromExternal, testUplink
	case fromNode:
		pk.From = ptrace.FromHost
	}
	r, err := tr.ipvs.Trace(pk, tr.node)
	if err != nil {
		tr.t.Fatalf("trace %+v: %v", p, err)
	}
	if r.HasUnknown() {
		var b strings.Builder
		_ = r.WriteText(&b, true)
		tr.t.Fatalf("the tracer cannot decide %+v:\n%s", p, b.String())
	}
	return summarize(tr.t, r, pk, tr.local)
}

// summarize turns a Result into the tables' one-line form.
func summarize(t testing.TB, r *ptrace.Result, pk ptrace.Packet, local []netip.Addr) trace {
	t.Helper()
	// A rule after IPVS (KUBE-IPVS-OUT-FILTER) may drop every real
	// server's path; the tables call that a drop.
	if !slices.ContainsFunc(r.Outcomes, func(o ptrace.Outcome) bool { return o.Verdict != ptrace.Drop }) {
		return trace{verdict: "drop"}
	}
	var ipvsOut []ptrace.Outcome
	for _, o := range r.Outcomes {
		if o.IPVS != nil {
			ipvsOut = append(ipvsOut, o)
		}
	}
	if len(ipvsOut) > 0 {
		if len(ipvsOut) != len(r.Outcomes) {
			t.Fatalf("%s: IPVS took only some paths: %+v", pk, r.Outcomes)
		}
		c := ipvsOut[0].IPVS
		out := trace{verdict: "ipvs", persistent: c.PersistenceTimeout > 0, timeout: c.PersistenceTimeout}
		for _, o := range ipvsOut {
			switch {
			case o.Verdict == ptrace.Accept && o.DNAT != "":
				out.realServers = append(out.realServers, o.DNAT)
				if o.Masquerade {
					out.masq = append(out.masq, o.DNAT)
				}
			case o.Verdict == ptrace.Reject && o.DNAT == "":
				// No real server to take it.
			default:
				t.Fatalf("%s: unexpected IPVS outcome %s", pk, o.Key())
			}
		}
		slices.Sort(out.realServers)
		slices.Sort(out.masq)
		if slices.Equal(out.masq, out.realServers) && len(out.masq) > 0 {
			out.masq = []string{"all"}
		}
		return out
	}
	if len(r.Outcomes) != 1 {
		t.Fatalf("%s: %d outcomes without IPVS: %+v", pk, len(r.Outcomes), r.Outcomes)
	}
	switch o := r.Outcomes[0]; o.Verdict {
	case ptrace.Drop:
		return trace{verdict: "drop"}
	case ptrace.Reject:
		return trace{verdict: "reject"}
	case ptrace.Accept:
		if o.DNAT != "" {
			t.Fatalf("%s: DNAT outside IPVS: %s", pk, o.Key())
		}
		if slices.Contains(local, pk.Dst) || pk.Dst.IsLoopback() {
			return trace{verdict: "host"}
		}
		return trace{verdict: "forward"}
	}
	t.Fatalf("%s: outcome %s", pk, r.Outcomes[0].Key())
	return trace{}
}
