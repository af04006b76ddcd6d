package behaviour

import (
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// Interfaces names the interfaces a traced packet arrives on, as the
// proxier under test's fakes see them.
type Interfaces struct {
	// Pod is the interface packets from this node's pods arrive on (a
	// veth, or the bridge the pods sit behind).
	Pod string
	// Uplink is the interface packets from off the node arrive on.
	Uplink string
}

// Trace traces p with tr (which holds the proxier's programmed rules) and
// returns the behaviour the result describes (see FromTrace).
func Trace(tr trace.Tracer, node *trace.Node, ifs Interfaces, p Packet) (Outcome, error) {
	src, err := netip.ParseAddr(p.Src)
	if err != nil {
		return Outcome{}, fmt.Errorf("packet %s: source: %w", p, err)
	}
	dst, err := netip.ParseAddr(p.Dst)
	if err != nil {
		return Outcome{}, fmt.Errorf("packet %s: destination: %w", p, err)
	}
	tp := trace.Packet{Src: src, Dst: dst, Protocol: strings.ToLower(string(p.Protocol)), Port: uint16(p.Port)}
	switch p.From {
	case FromPod:
		tp.From, tp.InInterface = trace.FromPod, ifs.Pod
	case FromExternal:
		tp.From, tp.InInterface = trace.FromExternal, ifs.Uplink
	case FromNode:
		tp.From = trace.FromHost
	}
	res, err := tr.Trace(tp, node)
	if err != nil {
		return Outcome{}, fmt.Errorf("tracing %s: %w", p, err)
	}
	out, err := FromTrace(res)
	if err != nil {
		return Outcome{}, fmt.Errorf("packet %s: %w", p, err)
	}
	return out, nil
}

// FromTrace is the behaviour a packet tracer's result describes, for the
// proxiers whose evaluator is pkg/proxy/trace (iptables, nftables, ipvs).
// Every path the packet may take must agree on the verdict and on
// masquerading: a result the table's terms cannot describe (some paths
// DNATed and others dropped, say, or only some masqueraded) is an error, as
// is a rule the tracer could not model.
func FromTrace(r *trace.Result) (Outcome, error) {
	if r.HasUnknown() {
		var b strings.Builder
		_ = r.WriteText(&b, false)
		return Outcome{}, fmt.Errorf("the tracer cannot model the rules the packet meets:\n%s", b.String())
	}
	if len(r.Outcomes) == 0 {
		return Outcome{}, fmt.Errorf("the tracer gave no outcome")
	}
	var res Outcome
	for i, o := range r.Outcomes {
		var v Verdict
		switch {
		case o.Verdict == trace.Accept && o.DNAT != "":
			v = DNAT
		case o.Verdict == trace.Accept:
			v = NoMatch
		case o.Verdict == trace.Reject && o.IPVS != nil && o.DNAT == "":
			// IPVS found no real server to schedule.
			v = EmptyVirtualServer
		case o.Verdict == trace.Reject:
			v = Reject
		case o.Verdict == trace.Drop:
			v = Drop
		default:
			return Outcome{}, fmt.Errorf("outcome %s", o.Key())
		}
		if i > 0 && (v != res.Verdict || o.Masquerade != res.Masquerade) {
			return Outcome{}, fmt.Errorf("the packet's paths disagree: %s and %s", r.Outcomes[0].Key(), o.Key())
		}
		res.Verdict, res.Masquerade = v, o.Masquerade
		if len(o.AffinitySet) > 0 || o.AffinityHit != "" || (o.IPVS != nil && o.IPVS.PersistenceTimeout > 0) {
			res.Affinity = true
		}
		if o.DNAT != "" {
			res.Endpoints = append(res.Endpoints, o.DNAT)
		}
	}
	return res, nil
}
