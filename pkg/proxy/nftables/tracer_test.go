//go:build linux

package nftables

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// The tests' tracer is an adapter over the product's packet tracer
// (pkg/proxy/trace): it traces the ruleset held by a knftables.Fake (read
// through its Dump, an nft script) for one new connection and reports the
// verdict, where the packet was DNATed to and whether it was masqueraded.
// Random load-balancing forks the trace, so every endpoint that could be
// chosen is reported. A rule the tracer cannot model fails the test.

type packet struct {
	src, dst string
	proto    string // tcp, udp, sctp
	dport    int
	iif      string // input interface, for interface-based local detection
	// fromHost means the packet is sent by a host-network process (output
	// path) rather than arriving from a pod or another host.
	fromHost bool
}

type traceResult struct {
	verdict string   // ACCEPT, DROP or REJECT (several joined by "|")
	dnat    []string // possible "ip:port" destinations, sorted
	masq    bool
}

func (r traceResult) String() string {
	var b strings.Builder
	b.WriteString(r.verdict + " dnat=[" + strings.Join(r.dnat, " ") + "] masq=")
	if r.masq {
		b.WriteString("true")
	} else {
		b.WriteString("false")
	}
	return b.String()
}

type tracer struct {
	t    testing.TB
	nft  *trace.NFTables
	node trace.Node
}

func newTracer(t testing.TB, fake *knftables.Fake, nodeIPs ...string) *tracer {
	t.Helper()
	nft, err := trace.ParseNFTScript(fake.Dump(), kubeProxyTable)
	if err != nil {
		t.Fatalf("tracer: reading the fake's ruleset: %v", err)
	}
	tr := &tracer{t: t, nft: nft}
	for _, ip := range nodeIPs {
		tr.node.LocalAddrs = append(tr.node.LocalAddrs, netip.MustParseAddr(ip))
	}
	return tr
}

// trace runs pkt through the hooks it crosses and folds the outcomes.
func (tr *tracer) trace(pkt packet) traceResult {
	tr.t.Helper()
	from, iif := trace.FromPod, pkt.iif
	if pkt.fromHost {
		from, iif = trace.FromHost, ""
	}
	res, err := tr.nft.Trace(trace.Packet{Src: netip.MustParseAddr(pkt.src), Dst: netip.MustParseAddr(pkt.dst),
		Protocol: pkt.proto, Port: uint16(pkt.dport), From: from, InInterface: iif}, &tr.node)
	if err != nil {
		tr.t.Fatalf("tracer: %v", err)
	}
	if res.HasUnknown() {
		var b strings.Builder
		_ = res.WriteText(&b, false)
		tr.t.Fatalf("tracer: the packet meets rules the tracer does not model:\n%s", b.String())
	}
	out := traceResult{}
	var verdicts []string
	for _, o := range res.Outcomes {
		verdicts = append(verdicts, string(o.Verdict))
		if o.Verdict != trace.Accept {
			continue
		}
		if o.DNAT != "" {
			out.dnat = append(out.dnat, o.DNAT)
		}
		out.masq = out.masq || o.Masquerade
	}
	slices.Sort(verdicts)
	out.verdict = strings.Join(slices.Compact(verdicts), "|")
	slices.Sort(out.dnat)
	out.dnat = slices.Compact(out.dnat)
	return out
}
