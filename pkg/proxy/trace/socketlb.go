package trace

import (
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"
)

// SocketLB is what kube-proxy's socket-level load balancer (--socket-lb, cgroup BPF
// programs) does with a connection, as its maps say. The caller reads the maps back
// (this package reads no kernel state); NewSocketLB and Explain turn that into the
// answer. The socket hooks act when a socket in the attached cgroup connects or sends,
// before the packet exists, so when they translate, the rules only ever see the
// endpoint as the destination; the rules' answer then holds for everything else
// (sockets outside the cgroup, packets from other hosts).
type SocketLB struct {
	// Source says what was read, e.g. the directory of the pinned maps.
	Source string `json:"source"`
	// Attached says whether the programs' links are pinned there: maps without
	// them translate nothing.
	Attached bool `json:"attached"`
	// Applies is false when the hooks never see this packet: it comes from
	// another host, or its protocol (SCTP) does not run the hooks.
	Applies bool `json:"applies"`
	// Translated: the maps hold the destination.
	Translated bool `json:"translated"`
	// Reject: connect() and sendmsg() fail with ECONNREFUSED (no endpoints).
	Reject bool `json:"reject,omitempty"`
	// Endpoints are the possible translations, each equally likely for a new
	// client (the program picks a slot at random).
	Endpoints []SocketLBEndpoint `json:"endpoints,omitempty"`
	// AffinitySeconds is the ClientIP affinity timeout (per client network
	// namespace), 0 without affinity.
	AffinitySeconds int64 `json:"affinitySeconds,omitempty"`
	// Why explains the answer in a sentence.
	Why string `json:"why"`
}

// SocketLBEndpoint is one endpoint a connection may be translated to.
type SocketLBEndpoint struct {
	Endpoint    string  `json:"endpoint"`
	Probability float64 `json:"probability"`
}

// SocketLBSees says whether the socket hooks see pk at all, and if not why.
func SocketLBSees(pk Packet) (bool, string) {
	switch {
	case pk.From == FromExternal:
		return false, "the packet comes from another host; the socket hooks only see sockets on this node"
	case pk.Protocol == "sctp":
		return false, "SCTP's connect() and sendmsg() do not run the cgroup socket-address hooks, so SCTP Services are left to the rules"
	}
	return true, ""
}

// NewSocketLB is the answer for pk: source names what was read, attached whether the
// programs are attached, and found whether the maps hold the destination; endpoints,
// reject and affinity are what they hold for it.
func NewSocketLB(pk Packet, source string, attached, found bool, endpoints []netip.AddrPort, reject bool, affinity time.Duration) *SocketLB {
	s := &SocketLB{Source: source, Attached: attached}
	dst := hostPortString(pk.Dst.String(), pk.Port) + "/" + pk.Protocol
	var why string
	if s.Applies, why = SocketLBSees(pk); !s.Applies {
		s.Why = "not translated: " + why + "."
		return s
	}
	switch {
	case !attached:
		s.Why = fmt.Sprintf("not translated: maps are pinned at %s but no program link is, so nothing is attached to translate with them.", source)
	case !found:
		s.Why = fmt.Sprintf("not translated: the maps hold no entry for %s, so the connection goes to the rules below.", dst)
	case reject:
		s.Translated, s.Reject = true, true
		s.Why = fmt.Sprintf("connect()/sendmsg() to %s fail with ECONNREFUSED: the Service has no endpoints.", dst)
	case len(endpoints) == 0:
		s.Why = fmt.Sprintf("not translated: %s has endpoints, but none usable from this node (Local traffic policy); the rules below decide (they drop).", dst)
	default:
		s.Translated = true
		for _, ep := range endpoints {
			s.Endpoints = append(s.Endpoints, SocketLBEndpoint{Endpoint: ep.String(), Probability: 1 / float64(len(endpoints))})
		}
		s.AffinitySeconds = int64(affinity / time.Second)
		s.Why = fmt.Sprintf("connect()/sendmsg() to %s from a socket in the attached cgroup is translated to an endpoint before any packet exists: the rules below see the endpoint as the destination, no DNAT and no conntrack entry for the translation.", dst)
	}
	return s
}

// WriteText writes the answer for people.
func (s *SocketLB) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Socket load balancing (%s):\n  %s\n", s.Source, s.Why)
	for _, ep := range s.Endpoints {
		fmt.Fprintf(&b, "    -> %s  %.1f%%\n", ep.Endpoint, ep.Probability*100)
	}
	if s.AffinitySeconds > 0 {
		fmt.Fprintf(&b, "  ClientIP affinity: a client network namespace keeps its endpoint for %s after its last connection.\n", time.Duration(s.AffinitySeconds)*time.Second)
	}
	if s.Translated {
		b.WriteString("  The rules below hold for sockets outside that cgroup and for packets from other hosts.\n")
	}
	b.WriteString("\n")
	_, err := io.WriteString(w, b.String())
	return err
}
