package localnode

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"k8s.io/kube-proxy/pkg/proxy"
)

// Family is an IP family. The values are the spellings Kubernetes uses.
type Family string

const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// Protocol is a transport protocol a service port can use.
type Protocol string

const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Affinity is a service's session affinity.
type Affinity string

const (
	// AffinityNone balances every connection independently.
	AffinityNone Affinity = "None"
	// AffinityClientIP sends a client's connections to the endpoint it used last, until
	// the affinity timeout passes without traffic.
	AffinityClientIP Affinity = "ClientIP"
)

// Policy is a traffic policy (internal or external).
type Policy string

const (
	// PolicyCluster may use any usable endpoint in the cluster.
	PolicyCluster Policy = "Cluster"
	// PolicyLocal uses only endpoints on this node, keeping the client's source address.
	PolicyLocal Policy = "Local"
)

// PortName identifies one port of one service; it is the key of everything in a State.
type PortName struct {
	Namespace string
	Name      string
	// Port is the port's name in the Service; empty for a single unnamed port.
	Port     string
	Protocol Protocol
}

// String returns "namespace/name:port/protocol" (":port" omitted when unnamed).
func (n PortName) String() string {
	s := n.Namespace + "/" + n.Name
	if n.Port != "" {
		s += ":" + n.Port
	}
	return s + "/" + string(n.Protocol)
}

// Compare orders port names by namespace, name, port name and protocol.
func (n PortName) Compare(o PortName) int {
	return cmp.Or(
		cmp.Compare(n.Namespace, o.Namespace),
		cmp.Compare(n.Name, o.Name),
		cmp.Compare(n.Port, o.Port),
		cmp.Compare(n.Protocol, o.Protocol),
	)
}

// ServicePort is what a proxy must program for one port of one service in one family.
// Slices are sorted and hold no duplicates when the value comes from Compute; a value built
// by hand should be passed through Normalize before comparing it.
type ServicePort struct {
	Name PortName

	ClusterIP netip.Addr
	Port      uint16
	// NodePort is 0 when the service has none.
	NodePort uint16
	// ExternalIPs and LoadBalancerVIPs are further destination addresses of the service
	// (only those of the State's family).
	ExternalIPs      []netip.Addr
	LoadBalancerVIPs []netip.Addr
	// SourceRanges restricts who may use LoadBalancerVIPs; empty allows everyone.
	SourceRanges []netip.Prefix

	SessionAffinity Affinity
	// AffinityTimeout is how long ClientIP affinity lasts without traffic; 0 otherwise.
	AffinityTimeout time.Duration

	// InternalPolicy applies to traffic sent to the cluster IP from inside the cluster.
	InternalPolicy Policy
	// ExternalPolicy applies to traffic arriving on a node port, external IP or load
	// balancer VIP. It is PolicyLocal only for a service that can receive such traffic.
	ExternalPolicy Policy
	// HealthCheckNodePort is where load balancers probe whether this node has local
	// endpoints (ExternalPolicy Local load balancers only); 0 when there is none.
	HealthCheckNodePort uint16
}

// ExternallyAccessible reports whether traffic from outside the cluster can reach the
// port: it has a node port, an external IP or a load-balancer VIP.
func (p *ServicePort) ExternallyAccessible() bool {
	return p.NodePort != 0 || len(p.ExternalIPs) > 0 || len(p.LoadBalancerVIPs) > 0
}

// UsesClusterEndpoints reports whether some traffic to the port is balanced over the
// cluster-wide endpoint list.
func (p *ServicePort) UsesClusterEndpoints() bool {
	return p.InternalPolicy != PolicyLocal || p.ExternallyAccessible()
}

// UsesLocalEndpoints reports whether some traffic to the port is limited to this node's
// endpoints.
func (p *ServicePort) UsesLocalEndpoints() bool {
	return p.InternalPolicy == PolicyLocal || (p.ExternalPolicy == PolicyLocal && p.ExternallyAccessible())
}

// Equal reports whether p and o are the same, slices compared element by element.
func (p *ServicePort) Equal(o *ServicePort) bool {
	return p.Name == o.Name && p.ClusterIP == o.ClusterIP && p.Port == o.Port && p.NodePort == o.NodePort &&
		p.SessionAffinity == o.SessionAffinity && p.AffinityTimeout == o.AffinityTimeout &&
		p.InternalPolicy == o.InternalPolicy && p.ExternalPolicy == o.ExternalPolicy &&
		p.HealthCheckNodePort == o.HealthCheckNodePort &&
		slices.Equal(p.ExternalIPs, o.ExternalIPs) && slices.Equal(p.LoadBalancerVIPs, o.LoadBalancerVIPs) &&
		slices.Equal(p.SourceRanges, o.SourceRanges)
}

// Normalize sorts and de-duplicates the port's slices, fills defaults for empty affinity
// and policies, and masks source ranges, so that hand-built values compare like computed
// ones.
func (p *ServicePort) Normalize() {
	p.ExternalIPs = sortAddrs(p.ExternalIPs)
	p.LoadBalancerVIPs = sortAddrs(p.LoadBalancerVIPs)
	for i, r := range p.SourceRanges {
		p.SourceRanges[i] = r.Masked()
	}
	slices.SortFunc(p.SourceRanges, comparePrefix)
	p.SourceRanges = slices.Compact(p.SourceRanges)
	if p.SessionAffinity == "" {
		p.SessionAffinity = AffinityNone
	}
	if p.InternalPolicy == "" {
		p.InternalPolicy = PolicyCluster
	}
	if p.ExternalPolicy == "" {
		p.ExternalPolicy = PolicyCluster
	}
}

// String returns "name clusterIP:port".
func (p *ServicePort) String() string {
	return p.Name.String() + " " + netip.AddrPortFrom(p.ClusterIP, p.Port).String()
}

// Endpoint is one backend of a service port, with the conditions it was chosen by and the
// roles this node gives it.
type Endpoint struct {
	IP   netip.Addr
	Port uint16

	// Ready, Serving and Terminating are the EndpointSlice conditions (unset Ready and
	// Serving count as true, unset Terminating as false).
	Ready, Serving, Terminating bool
	// NodeName and Zone say where the endpoint runs, when known.
	NodeName, Zone string
	// Local says where the endpoint runs: on this node. It is a fact, not a decision: use
	// it for choices of your own about the path (or for display), never to pick which
	// endpoints traffic may use.
	Local bool

	// ForCluster is true when traffic under Cluster policy may go to the endpoint: ready
	// (or serving and terminating when nothing is ready anywhere), on any node, narrowed
	// by topology hints when they apply. False when the port uses no Cluster policy.
	ForCluster bool
	// ForLocal is the decision for Local policy: the endpoint is Local and ready (or
	// serving and terminating when no local endpoint is ready); topology hints never
	// narrow it. ForLocal implies Local, not the other way round: on a port without
	// Local policy a Local endpoint serves Cluster traffic only (Local true, ForLocal
	// false). Program Local-policy traffic from ForLocal (or Service.LocalEndpoints).
	ForLocal bool
}

// AddrPort returns the endpoint's address and port.
func (e Endpoint) AddrPort() netip.AddrPort { return netip.AddrPortFrom(e.IP, e.Port) }

// String returns "ip:port" (IPv6 bracketed).
func (e Endpoint) String() string { return e.AddrPort().String() }

// Compare orders endpoints by address, then port.
func (e Endpoint) Compare(o Endpoint) int {
	return cmp.Or(e.IP.Compare(o.IP), cmp.Compare(e.Port, o.Port))
}

// Service is a service port together with the endpoints this node can send its traffic
// to.
type Service struct {
	ServicePort

	// Endpoints are all endpoints reachable from this node, sorted by address and port:
	// the union of those with ForCluster and those with ForLocal set.
	Endpoints []Endpoint
	// HasAnyEndpoints is true when the service has usable endpoints somewhere in the
	// cluster, even if none is reachable from this node. A proxy rejects traffic to a
	// service without any (the client learns at once), but silently drops traffic that
	// Local policy keeps from reaching endpoints that do exist elsewhere.
	HasAnyEndpoints bool
}

// ClusterEndpoints returns the endpoints for Cluster-policy traffic; nil when the port uses
// no Cluster policy.
func (s *Service) ClusterEndpoints() []Endpoint {
	if !s.UsesClusterEndpoints() {
		return nil
	}
	return filter(s.Endpoints, func(e *Endpoint) bool { return e.ForCluster })
}

// LocalEndpoints returns the endpoints for Local-policy traffic; nil when the port uses no
// Local policy.
func (s *Service) LocalEndpoints() []Endpoint {
	if !s.UsesLocalEndpoints() {
		return nil
	}
	return filter(s.Endpoints, func(e *Endpoint) bool { return e.ForLocal })
}

// LocalEndpointCount returns how many endpoints Local-policy traffic may use, without
// allocating.
func (s *Service) LocalEndpointCount() int {
	n := 0
	for i := range s.Endpoints {
		if s.Endpoints[i].ForLocal {
			n++
		}
	}
	return n
}

// InternalEndpoints returns where traffic to the cluster IP goes: the local endpoints under
// Local internal policy, the cluster endpoints otherwise.
func (s *Service) InternalEndpoints() []Endpoint {
	if s.InternalPolicy == PolicyLocal {
		return s.LocalEndpoints()
	}
	return s.ClusterEndpoints()
}

// ExternalEndpoints returns where traffic to node ports, external IPs and load-balancer
// VIPs goes: the local endpoints under Local external policy, the cluster endpoints
// otherwise.
func (s *Service) ExternalEndpoints() []Endpoint {
	if s.ExternalPolicy == PolicyLocal {
		return s.LocalEndpoints()
	}
	return s.ClusterEndpoints()
}

// Equal reports whether s and o are the same service with the same endpoints.
func (s *Service) Equal(o *Service) bool {
	return s.HasAnyEndpoints == o.HasAnyEndpoints && s.ServicePort.Equal(&o.ServicePort) &&
		sameOrEqual(s.Endpoints, o.Endpoints)
}

// sameOrEqual is slices.Equal with a shortcut for slices sharing their backing array,
// which is what successive States from one Computer do for every unchanged port.
func sameOrEqual[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// Normalize normalizes the port and sorts and de-duplicates the endpoints.
func (s *Service) Normalize() {
	s.ServicePort.Normalize()
	slices.SortFunc(s.Endpoints, Endpoint.Compare)
	s.Endpoints = slices.CompactFunc(s.Endpoints, func(a, b Endpoint) bool { return a.Compare(b) == 0 })
}

// State is everything one IP family of a node's proxy must program.
type State struct {
	Family Family
	// Services are sorted by Name.
	Services []Service
}

// Lookup returns the service named n, or nil.
func (s *State) Lookup(n PortName) *Service {
	i, ok := slices.BinarySearchFunc(s.Services, n, func(svc Service, n PortName) int { return svc.Name.Compare(n) })
	if !ok {
		return nil
	}
	return &s.Services[i]
}

// Equal reports whether s and o describe the same family with the same services. A nil
// State equals only another nil State.
func (s *State) Equal(o *State) bool {
	if s == nil || o == nil {
		return s == o
	}
	if s.Family != o.Family || len(s.Services) != len(o.Services) {
		return false
	}
	for i := range s.Services {
		if !s.Services[i].Equal(&o.Services[i]) {
			return false
		}
	}
	return true
}

// Normalize sorts services and normalizes each, so a State built by hand is canonical.
// Of two services with the same name, the later one is kept.
func (s *State) Normalize() {
	for i := range s.Services {
		s.Services[i].Normalize()
	}
	slices.SortStableFunc(s.Services, func(a, b Service) int { return a.Name.Compare(b.Name) })
	out := s.Services[:0]
	for i := range s.Services {
		if i+1 < len(s.Services) && s.Services[i+1].Name == s.Services[i].Name {
			continue
		}
		out = append(out, s.Services[i])
	}
	s.Services = out
}

// Validate reports the first thing in s that a proxy could not program: an address of the
// wrong family or not valid, a zero port, services out of order.
func (s *State) Validate() error {
	if s.Family != IPv4 && s.Family != IPv6 {
		return fmt.Errorf("state: unknown family %q", s.Family)
	}
	fam := func(a netip.Addr) bool { return a.IsValid() && a.Is4() == (s.Family == IPv4) && !a.Is4In6() }
	for i := range s.Services {
		svc := &s.Services[i]
		if i > 0 && s.Services[i-1].Name.Compare(svc.Name) >= 0 {
			return fmt.Errorf("service %s: services are not sorted by name or repeat a name", svc.Name)
		}
		if !fam(svc.ClusterIP) {
			return fmt.Errorf("service %s: cluster IP %v is not a valid %s address", svc.Name, svc.ClusterIP, s.Family)
		}
		if svc.Port == 0 {
			return fmt.Errorf("service %s: port is 0", svc.Name)
		}
		for _, list := range [][]netip.Addr{svc.ExternalIPs, svc.LoadBalancerVIPs} {
			for _, a := range list {
				if !fam(a) {
					return fmt.Errorf("service %s: address %v is not a valid %s address", svc.Name, a, s.Family)
				}
			}
		}
		for _, ep := range svc.Endpoints {
			if !fam(ep.IP) || ep.Port == 0 {
				return fmt.Errorf("service %s: endpoint %s is not a valid %s address and port", svc.Name, ep, s.Family)
			}
		}
	}
	return nil
}

func sortAddrs(a []netip.Addr) []netip.Addr {
	slices.SortFunc(a, netip.Addr.Compare)
	return slices.Compact(a)
}

func comparePrefix(a, b netip.Prefix) int {
	return cmp.Or(a.Addr().Compare(b.Addr()), cmp.Compare(a.Bits(), b.Bits()))
}

func filter(eps []Endpoint, keep func(*Endpoint) bool) []Endpoint {
	out := make([]Endpoint, 0, len(eps))
	for i := range eps {
		if keep(&eps[i]) {
			out = append(out, eps[i])
		}
	}
	return out
}

// formatPort is strconv for the digest without allocating a string per call.
func appendUint(b []byte, v uint64) []byte { return strconv.AppendUint(b, v, 10) }

// InternalNoEndpoints says what happens to cluster-IP traffic when the port's internal
// policy leaves it no endpoint: proxy.Reject when the service has no usable endpoint
// anywhere, proxy.Drop when Local policy finds none on this node, proxy.Forward
// otherwise. It is the brain's decision (proxy.ResolveTrafficPolicy), read back from the
// Service's own fields.
func (s *Service) InternalNoEndpoints() proxy.NoEndpointsAction {
	return s.noEndpointsAction(s.InternalPolicy == PolicyLocal)
}

// ExternalNoEndpoints is InternalNoEndpoints for node-port, external-IP and
// load-balancer traffic.
func (s *Service) ExternalNoEndpoints() proxy.NoEndpointsAction {
	return s.noEndpointsAction(s.ExternalPolicy == PolicyLocal)
}

func (s *Service) noEndpointsAction(local bool) proxy.NoEndpointsAction {
	switch {
	case !s.HasAnyEndpoints:
		return proxy.Reject
	case local && s.LocalEndpointCount() == 0:
		return proxy.Drop
	}
	return proxy.Forward
}
