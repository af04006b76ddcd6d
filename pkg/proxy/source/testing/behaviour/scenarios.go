package behaviour

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Proxier names a proxier that runs the table.
type Proxier string

// The proxiers that run the table.
const (
	IPTables  Proxier = "iptables"
	NFTables  Proxier = "nftables"
	IPVS      Proxier = "ipvs"
	WinKernel Proxier = "winkernel"
)

// Origin is where a packet enters the node's network stack.
type Origin int

const (
	// FromPod is sent by a pod on this node.
	FromPod Origin = iota
	// FromExternal arrives from off the node, through its uplink.
	FromExternal
	// FromNode is sent by a process in the node's own network namespace.
	FromNode
)

func (o Origin) String() string {
	return [...]string{"pod", "external", "node"}[o]
}

// Packet is the first packet of a new connection.
type Packet struct {
	From     Origin
	Src, Dst string
	Protocol v1.Protocol
	Port     int
}

func (p Packet) String() string {
	return fmt.Sprintf("%s from %s %s -> %s", p.Protocol, p.From, p.Src, net.JoinHostPort(p.Dst, strconv.Itoa(p.Port)))
}

// Verdict is what the node does with a packet.
type Verdict string

const (
	// DNAT sends the packet to one of Outcome.Endpoints.
	DNAT Verdict = "dnat"
	// Reject refuses the connection (ICMP unreachable or TCP reset).
	Reject Verdict = "reject"
	// Drop discards the packet silently.
	Drop Verdict = "drop"
	// NoMatch means the proxier's rules leave the packet alone.
	NoMatch Verdict = "no-match"
	// EmptyVirtualServer is ipvs taking the packet into a virtual server
	// that has no real server: the kernel's IPVS itself then answers the
	// client with an ICMP port unreachable, with no iptables rule involved.
	EmptyVirtualServer Verdict = "empty-virtual-server"
)

// Outcome is what happens to a packet.
type Outcome struct {
	Verdict Verdict
	// Endpoints are the "ip:port" a DNATed connection may go to.
	Endpoints []string
	// Masquerade says the DNATed packet leaves with the node's address as
	// its source.
	Masquerade bool
	// Affinity says a client's later connections stick to the endpoint
	// its first one went to (session affinity ClientIP).
	Affinity bool
}

func (o Outcome) String() string {
	s := string(o.Verdict)
	if o.Verdict != DNAT {
		return s
	}
	e := slices.Clone(o.Endpoints)
	slices.Sort(e)
	s += " [" + strings.Join(e, " ") + "]"
	if o.Masquerade {
		s += " masquerade"
	}
	if o.Affinity {
		s += " affinity"
	}
	return s
}

// Deviation is a proxier's own expected outcome for one check.
type Deviation struct {
	// Want is what this proxier does instead.
	Want Outcome
	// Reason says why the difference is right (usually: upstream's
	// proxier of the same mode does the same).
	Reason string
}

// Check is one packet and what must happen to it.
type Check struct {
	Name   string
	Packet Packet
	Want   Outcome
	// Except lists the proxiers that legitimately do otherwise.
	Except map[Proxier]Deviation
}

// WantFor is the outcome proxier p must give, and the reason when it is a
// deviation from Want.
func (c Check) WantFor(p Proxier) (Outcome, string) {
	if d, ok := c.Except[p]; ok {
		return d.Want, d.Reason
	}
	return c.Want, ""
}

// Scenario is one cluster state, as this node's proxier sees it, and the
// packets to check against it.
type Scenario struct {
	Name     string
	Services []*v1.Service
	Slices   []*discovery.EndpointSlice
	// NodeLabels, when set, are this node's labels (its topology zone).
	NodeLabels map[string]string
	Checks     []Check
}

// Addresses are one family's addresses as a proxier's fakes are set up:
// the table places every object and packet with them.
type Addresses struct {
	Family v1.IPFamily
	// NodeName is the name of the node the proxier runs on.
	NodeName string
	// Node is this node's address (node ports answer on it).
	Node string
	// ServiceIP is the i-th address in the service CIDR (i from 1).
	ServiceIP func(i int) string
	// LocalPod is the i-th pod address on this node (i from 1; the table
	// uses 1 to 4 for endpoints and 9 as a client).
	LocalPod func(i int) string
	// RemotePod is the i-th pod address on another node (i from 1 to 4).
	RemotePod func(i int) string
	// External is an off-cluster client.
	External string
	// AllowedRange is a CIDR holding External but neither the node nor
	// DeniedClient. Run defaults it to External's /24 or /64.
	AllowedRange string
	// DeniedClient is an off-cluster client outside AllowedRange. Run
	// defaults it to 198.18.0.9 or 2001:db8:1::9.
	DeniedClient string
	// ExternalIP is an address the table puts in a Service's externalIPs.
	ExternalIP string
	// LoadBalancerIP is an address the table puts in a Service's
	// load balancer ingress.
	LoadBalancerIP string
}
