package trace

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Origin says where a packet enters the node.
type Origin int

const (
	// FromPod is a packet from a pod on this node, arriving on the pod's
	// interface (Packet.InInterface).
	FromPod Origin = iota
	// FromExternal is a packet from another host, arriving on an uplink.
	FromExternal
	// FromHost is a packet sent by a process in the node's network
	// namespace; it crosses the output hooks and has no input interface.
	FromHost
)

func (o Origin) String() string {
	switch o {
	case FromPod:
		return "pod"
	case FromExternal:
		return "external"
	case FromHost:
		return "host"
	}
	return "origin(" + strconv.Itoa(int(o)) + ")"
}

// MarshalText makes JSON output say "pod" rather than 0.
func (o Origin) MarshalText() ([]byte, error) { return []byte(o.String()), nil }

// UnmarshalText reads what MarshalText writes, so a JSON answer reads back.
func (o *Origin) UnmarshalText(b []byte) error {
	for _, c := range []Origin{FromPod, FromExternal, FromHost} {
		if string(b) == c.String() {
			*o = c
			return nil
		}
	}
	return fmt.Errorf("packet origin %q: want pod, external or host", b)
}

// Packet is the first packet of a new connection.
type Packet struct {
	Src, Dst netip.Addr
	// Protocol is "tcp", "udp" or "sctp".
	Protocol string
	Port     uint16
	From     Origin
	// InInterface is the interface a FromPod or FromExternal packet arrives
	// on; ignored for FromHost.
	InInterface string
	// Invalid makes conntrack consider the packet INVALID (no connection,
	// so no NAT), as for an out-of-window TCP segment.
	Invalid bool
}

func (p Packet) String() string {
	return fmt.Sprintf("%s %s -> %s/%s (from %s%s)", p.Protocol, p.Src, hostPort(p.Dst, p.Port), p.Protocol, p.From, ifSuffix(p.InInterface, p.From))
}

func ifSuffix(iif string, o Origin) string {
	if iif == "" || o == FromHost {
		return ""
	}
	return " via " + iif
}

func (p Packet) validate() error {
	if !p.Src.IsValid() {
		return fmt.Errorf("packet source address missing")
	}
	if !p.Dst.IsValid() {
		return fmt.Errorf("packet destination address missing")
	}
	if p.Src.Unmap().Is4() != p.Dst.Unmap().Is4() {
		return fmt.Errorf("packet source %s and destination %s are of different IP families", p.Src, p.Dst)
	}
	switch p.Protocol {
	case "tcp", "udp", "sctp":
	default:
		return fmt.Errorf("packet protocol %q: want tcp, udp or sctp", p.Protocol)
	}
	if p.From < FromPod || p.From > FromHost {
		return fmt.Errorf("packet origin %d unknown", p.From)
	}
	return nil
}

// Node is the kernel state rules refer to but do not hold.
type Node struct {
	// LocalAddrs are the node's addresses (what "addrtype LOCAL" and
	// "fib ... type local" match); loopback addresses are always local.
	LocalAddrs []netip.Addr
	// Recent holds iptables' -m recent lists: list name to the source
	// addresses it holds. Entry ages are not modelled: an address listed
	// here is taken to be within every --seconds window.
	Recent map[string][]netip.Addr
	// Bridges names the node's Linux bridges (cni0, docker0; a trailing
	// "+" matches a prefix). A packet arriving on one came through a
	// bridge port, which is what iptables' "-m physdev --physdev-is-in"
	// matches. Nil means not known: such a rule is then UNKNOWN for a
	// packet with an input interface other than lo.
	Bridges []string
}

// isBridge says whether iif is one of the node's bridges, and whether that
// is known at all.
func (n *Node) isBridge(iif string) (is, known bool) {
	if iif == "" || iif == "lo" {
		return false, true
	}
	if n.Bridges == nil {
		return false, false
	}
	for _, b := range n.Bridges {
		if ifaceMatch(b, "+", iif) {
			return true, true
		}
	}
	return false, true
}

func (n *Node) isLocal(a netip.Addr) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	for _, l := range n.LocalAddrs {
		if l.Unmap() == a {
			return true
		}
	}
	return false
}

func (n *Node) inRecent(name string, a netip.Addr) bool {
	return slices.Contains(n.Recent[name], a)
}

// Verdict is a packet's fate.
type Verdict string

const (
	Accept Verdict = "ACCEPT"
	Drop   Verdict = "DROP"
	Reject Verdict = "REJECT"
	// Unknown means the packet reached a rule the tracer does not model; the
	// outcome's Reason names it.
	Unknown Verdict = "UNKNOWN"
)

// Step is one thing on a packet's path: a hook entered, a rule that matched,
// a set or map lookup.
type Step struct {
	// Hook is the netfilter hook, with the iptables table ("nat PREROUTING")
	// or the nftables base chain's table ("prerouting ip kube-proxy").
	Hook  string `json:"hook,omitempty"`
	Table string `json:"table,omitempty"`
	Chain string `json:"chain,omitempty"`
	// Rule is the rule as the ruleset wrote it.
	Rule string `json:"rule,omitempty"`
	// Lookup describes a set or map lookup and its result.
	Lookup string `json:"lookup,omitempty"`
	// Service ("namespace/name:port") and Endpoint ("ip:port") the step
	// belongs to, from kube-proxy's comments and names.
	Service  string `json:"service,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// Foreign marks a chain or table kube-proxy does not own.
	Foreign bool `json:"foreign,omitempty"`
	// Note explains a decision the rule text alone does not show (a chain
	// policy, a branch taken with some probability).
	Note string `json:"note,omitempty"`
}

func (s Step) String() string {
	var b strings.Builder
	if s.Hook != "" {
		b.WriteString("[" + s.Hook + "] ")
	}
	if s.Chain != "" {
		if s.Foreign && s.Table != "" {
			b.WriteString("(" + s.Table + ") ")
		}
		b.WriteString(s.Chain + ": ")
	}
	if s.Rule != "" {
		// An iptables rule repeats its chain ("-A CHAIN ..."), which the
		// line already shows.
		b.WriteString(strings.TrimPrefix(s.Rule, "-A "+s.Chain+" "))
	}
	if s.Lookup != "" {
		if s.Rule != "" {
			b.WriteString("; ")
		}
		b.WriteString(s.Lookup)
	}
	if s.Note != "" {
		b.WriteString(" (" + s.Note + ")")
	}
	var tags []string
	if s.Service != "" {
		tags = append(tags, "service "+s.Service)
	}
	if s.Endpoint != "" {
		tags = append(tags, "endpoint "+s.Endpoint)
	}
	if s.Foreign {
		tags = append(tags, "foreign")
	}
	if len(tags) > 0 {
		b.WriteString("  {" + strings.Join(tags, ", ") + "}")
	}
	return b.String()
}

// Outcome is one possible fate of the packet.
type Outcome struct {
	Verdict Verdict `json:"verdict"`
	// DNAT is the destination the packet was rewritten to, if any.
	DNAT string `json:"dnat,omitempty"`
	// Masquerade says the packet leaves with the node's address as source.
	Masquerade bool `json:"masquerade,omitempty"`
	// Probability of this outcome among all of the packet's outcomes.
	Probability float64 `json:"probability"`
	// Slot names the load-balancing choice ("statistic 0.5", "numgen slot
	// 1 of 2 in @endpoints-...").
	Slot string `json:"slot,omitempty"`
	// AffinitySet lists the affinity lists/sets the source is recorded in
	// when it takes this path (iptables -m recent --set, nft "update @set").
	AffinitySet []string `json:"affinitySet,omitempty"`
	// AffinityHit is the affinity list/set that sent the packet this way
	// because the source was already in it.
	AffinityHit string `json:"affinityHit,omitempty"`
	// Service and Endpoint this outcome belongs to, if any.
	Service  string `json:"service,omitempty"`
	Endpoint string `json:"endpoint,omitempty"`
	// IPVS is the virtual server that took the packet (ipvs mode).
	IPVS *IPVSChoice `json:"ipvs,omitempty"`
	// Reason says what could not be modelled, for Unknown.
	Reason string `json:"reason,omitempty"`
	Path   []Step `json:"path"`
}

// Key is the outcome without its probability and path:
// "VERDICT[ dnat=ip:port][ masq]".
func (o Outcome) Key() string {
	s := string(o.Verdict)
	if o.DNAT != "" {
		s += " dnat=" + o.DNAT
	}
	if o.Masquerade {
		s += " masq"
	}
	return s
}

// UnknownRule names something the packet met that the tracer does not model.
type UnknownRule struct {
	Where  string `json:"where"`
	Rule   string `json:"rule"`
	Reason string `json:"reason"`
}

// Result is the answer for one packet.
type Result struct {
	Mode   string `json:"mode"`
	Packet struct {
		Src         string `json:"src"`
		Dst         string `json:"dst"`
		Protocol    string `json:"protocol"`
		Port        uint16 `json:"port"`
		From        Origin `json:"from"`
		InInterface string `json:"inInterface,omitempty"`
	} `json:"packet"`
	// Outcomes are merged by Key and sorted by it; their probabilities sum
	// to 1.
	Outcomes []Outcome `json:"outcomes"`
	// Unknowns lists every rule the packet reached that was not modelled.
	Unknowns []UnknownRule `json:"unknowns,omitempty"`
	// Foreign lists rules of chains or tables kube-proxy does not own that
	// matched the packet.
	Foreign []string `json:"foreign,omitempty"`
}

// HasUnknown reports whether any outcome could not be decided.
func (r *Result) HasUnknown() bool {
	return len(r.Unknowns) > 0
}

// Tracer traces packets through one parsed ruleset. Implementations are safe
// for concurrent use: a trace does not change the ruleset.
type Tracer interface {
	Trace(Packet, *Node) (*Result, error)
	// Mode is "iptables", "nftables" or "ipvs".
	Mode() string
}

// maxDepth bounds chain nesting, like the kernel's own limits (nftables
// allows 16 nested jumps; both refuse loops when rules are loaded, which
// this bound also stops).
const maxDepth = 32

// maxPaths bounds how many paths one trace may fork into, and maxSteps how
// many rules it may evaluate, so a hostile ruleset (chains of random
// branches, jumps in a loop) cannot make a trace explode. A real ruleset
// needs one path per endpoint and one step per rule on the way.
// They are variables only so the fuzz tests can make hostile inputs cheap.
var (
	maxPaths = 1 << 13
	maxSteps = 1 << 20
)

var errTooComplex = fmt.Errorf("trace: the ruleset branches or loops too much to trace")

// pstate is the evolving state of one path of a packet.
type pstate struct {
	src, dst    netip.Addr
	dport       uint16
	iif         string
	mark        uint32
	dnat        string
	dnatted     bool
	masq        bool
	prob        float64
	slot        string
	affSet      []string
	affHit      string
	service     string
	endpoint    string
	path        []Step
	reason      string
	lookup      string // a map lookup the current rule made, for its Step
	note        string // a probability note for the current rule's Step
	fromLoopRtn bool   // the packet re-enters through lo after the output path
	vs          *VirtualServer
	ipvs        *IPVSChoice
}

func (s pstate) clone() pstate {
	s.affSet = slices.Clone(s.affSet)
	s.path = slices.Clone(s.path)
	return s
}

func (s *pstate) step(st Step) {
	if st.Service != "" {
		s.service = st.Service
	}
	if st.Endpoint != "" {
		s.endpoint = st.Endpoint
	}
	s.path = append(s.path, st)
}

func hostPort(a netip.Addr, port uint16) string {
	return net.JoinHostPort(a.String(), strconv.Itoa(int(port)))
}

// final is one path's end.
type final struct {
	s       pstate
	verdict Verdict
}

// buildResult merges paths into outcomes and checks the probabilities.
func buildResult(mode string, pk Packet, finals []final, paths int) (*Result, error) {
	r := &Result{Mode: mode}
	r.Packet.Src, r.Packet.Dst = pk.Src.String(), pk.Dst.String()
	r.Packet.Protocol, r.Packet.Port, r.Packet.From = pk.Protocol, pk.Port, pk.From
	if pk.From != FromHost {
		r.Packet.InInterface = pk.InInterface
	}
	merged := map[string]*Outcome{}
	seenUnknown := map[string]bool{}
	seenForeign := map[string]bool{}
	for _, f := range finals {
		o := Outcome{Verdict: f.verdict, DNAT: f.s.dnat, Masquerade: f.s.masq, Probability: f.s.prob,
			Slot: f.s.slot, AffinitySet: f.s.affSet, AffinityHit: f.s.affHit, Service: f.s.service,
			Endpoint: f.s.endpoint, IPVS: f.s.ipvs, Path: f.s.path}
		if o.Verdict != Accept {
			o.Masquerade = false
		}
		if o.DNAT != "" {
			o.Endpoint = o.DNAT
		}
		if o.Verdict == Unknown {
			o.Reason = f.s.reason
			last := Step{}
			if len(o.Path) > 0 {
				last = o.Path[len(o.Path)-1]
			}
			k := last.Chain + "\x00" + last.Rule + "\x00" + f.s.reason
			if !seenUnknown[k] {
				seenUnknown[k] = true
				r.Unknowns = append(r.Unknowns, UnknownRule{Where: strings.TrimSpace(last.Table + " " + last.Chain), Rule: last.Rule, Reason: f.s.reason})
			}
		}
		for _, st := range o.Path {
			if st.Foreign && st.Rule != "" {
				k := st.Table + " " + st.Chain + ": " + st.Rule
				if !seenForeign[k] {
					seenForeign[k] = true
					r.Foreign = append(r.Foreign, k)
				}
			}
		}
		k := o.Key()
		if m, ok := merged[k]; ok {
			m.Probability += o.Probability
			continue
		}
		merged[k] = &o
	}
	keys := make([]string, 0, len(merged))
	for k := range merged {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	total := 0.0
	for _, k := range keys {
		r.Outcomes = append(r.Outcomes, *merged[k])
		total += merged[k].Probability
	}
	if math.Abs(total-1) > 1e-6 {
		// Only a tracer bug can get here; say so rather than print nonsense.
		return nil, fmt.Errorf("trace: outcome probabilities sum to %v, not 1 (%d paths)", total, paths)
	}
	return r, nil
}

// WriteText prints r for a person: one block per outcome, with its path.
func (r *Result) WriteText(w io.Writer, verbose bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s -> %s", r.Mode, r.Packet.Protocol, r.Packet.Src, hostPortString(r.Packet.Dst, r.Packet.Port))
	// Pod and external packets are traced alike (only the interface and
	// the addresses count), so the text says only what was traced.
	switch {
	case r.Packet.From == FromHost:
		b.WriteString(", sent by the node itself")
	case r.Packet.InInterface != "":
		fmt.Fprintf(&b, ", arriving on %s", r.Packet.InInterface)
	default:
		b.WriteString(", arriving on an unnamed interface")
	}
	b.WriteString("\n")
	for i, o := range r.Outcomes {
		fmt.Fprintf(&b, "\n%d. %s  %.1f%%", i+1, o.Key(), o.Probability*100)
		if o.Service != "" {
			fmt.Fprintf(&b, "  service %s", o.Service)
		}
		b.WriteString("\n")
		if o.Slot != "" {
			fmt.Fprintf(&b, "   chosen by: %s\n", o.Slot)
		}
		if o.IPVS != nil {
			fmt.Fprintf(&b, "   ipvs: %s\n", o.IPVS)
		}
		if o.AffinityHit != "" {
			fmt.Fprintf(&b, "   affinity: source already in %s\n", o.AffinityHit)
		}
		if len(o.AffinitySet) > 0 {
			fmt.Fprintf(&b, "   affinity: source recorded in %s\n", strings.Join(o.AffinitySet, ", "))
		}
		if o.Reason != "" {
			fmt.Fprintf(&b, "   NOT MODELLED: %s\n", o.Reason)
		}
		for _, st := range o.Path {
			if !verbose && st.Rule == "" && st.Lookup == "" && st.Note == "" {
				continue
			}
			fmt.Fprintf(&b, "     %s\n", st)
		}
	}
	if len(r.Unknowns) > 0 {
		b.WriteString("\nRules the tracer does not model (outcomes through them are UNKNOWN):\n")
		for _, u := range r.Unknowns {
			fmt.Fprintf(&b, "  %s: %s: %s\n", u.Where, u.Rule, u.Reason)
		}
	}
	if len(r.Foreign) > 0 {
		b.WriteString("\nRules not written by kube-proxy that the packet met:\n")
		for _, f := range r.Foreign {
			fmt.Fprintf(&b, "  %s\n", f)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func hostPortString(ip string, port uint16) string {
	return net.JoinHostPort(ip, strconv.Itoa(int(port)))
}

// WriteJSON prints r as indented JSON.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(r)
}

// walkHooks follows a new packet through the netfilter hooks in the kernel's
// order, for both rule languages: a node's own packet takes OUTPUT and
// POSTROUTING and, when locally destined, comes back in through lo
// (PREROUTING, INPUT, with nat not run again); any other packet takes
// PREROUTING, then INPUT if the (possibly DNATed) destination is local, or
// FORWARD and POSTROUTING. hook runs one hook, named in upper case, over a
// set of states and returns those that go on.
func walkHooks(pk *Packet, node *Node, hook func(states []pstate, hookName string) ([]pstate, error)) ([]pstate, error) {
	start := pstate{src: pk.Src, dst: pk.Dst, dport: pk.Port, prob: 1, iif: pk.InInterface}
	run := func(states []pstate, hooks ...string) ([]pstate, error) {
		var err error
		for _, h := range hooks {
			if states, err = hook(states, h); err != nil {
				return nil, err
			}
		}
		return states, nil
	}
	if pk.From == FromHost {
		start.iif = ""
		states, err := run([]pstate{start}, "OUTPUT", "POSTROUTING")
		if err != nil {
			return nil, err
		}
		var local, remote []pstate
		for _, st := range states {
			if node.isLocal(st.dst) {
				st.iif, st.fromLoopRtn = "lo", true
				local = append(local, st)
			} else {
				remote = append(remote, st)
			}
		}
		if local, err = run(local, "PREROUTING", "INPUT"); err != nil {
			return nil, err
		}
		return append(remote, local...), nil
	}
	states, err := run([]pstate{start}, "PREROUTING")
	if err != nil {
		return nil, err
	}
	var local, fwd []pstate
	for _, st := range states {
		if node.isLocal(st.dst) {
			local = append(local, st)
		} else {
			fwd = append(fwd, st)
		}
	}
	if local, err = run(local, "INPUT"); err != nil {
		return nil, err
	}
	if fwd, err = run(fwd, "FORWARD", "POSTROUTING"); err != nil {
		return nil, err
	}
	return append(local, fwd...), nil
}
