package localnode

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
)

// EndpointLocation is implemented by proxy.Endpoint values that know the node and zone
// they run in (the brain's own endpoints do not; see Locations). Compute copies them into
// Endpoint.NodeName and Endpoint.Zone when present.
type EndpointLocation interface {
	NodeName() string
	Zone() string
}

// Compute returns the State of family for the node nodeName with topologyLabels (only
// topology.kubernetes.io/zone matters), from the brain's maps. Each service port's
// endpoints are chosen by proxy.CategorizeEndpoints.
//
// Ports of the other family, and endpoints whose address does not parse, are left out with
// a log line. Compute does not modify the maps.
func Compute(ctx context.Context, family Family, services proxy.ServicePortMap, endpoints proxy.EndpointsMap, nodeName string, topologyLabels map[string]string) *State {
	return NewComputer(family).Compute(ctx, services, endpoints, nodeName, topologyLabels)
}

// Computer computes successive States of one family, reusing the result for every
// service port whose ServicePort and endpoint list are the very same values as in the
// previous call. The brain's maps replace a port's values whenever it changes and never
// modify them in place, so after one change at 10k services only that one port is
// recomputed. Callers that mutate map values in place must use Compute instead.
//
// A Computer is not safe for concurrent use.
type Computer struct {
	family Family

	nodeName string
	zone     string
	cache    map[proxy.ServicePortName]*cached
	// order is the cache sorted by name; rebuilt only when the set of ports changes.
	order []*cached
	pass  uint64
}

type cached struct {
	// port and eps identify the inputs the result was computed from.
	port proxy.ServicePort
	eps  *proxy.Endpoint
	neps int
	seen uint64
	svc  Service
}

// NewComputer returns a Computer for family.
func NewComputer(family Family) *Computer {
	return &Computer{family: family, cache: map[proxy.ServicePortName]*cached{}}
}

// Compute is the package-level Compute with reuse of unchanged ports. The returned State
// shares slices with earlier and later States: treat all of them as read-only.
func (c *Computer) Compute(ctx context.Context, services proxy.ServicePortMap, endpoints proxy.EndpointsMap, nodeName string, topologyLabels map[string]string) *State {
	zone := topologyLabels[v1.LabelTopologyZone]
	fresh := nodeName != c.nodeName || zone != c.zone
	c.nodeName, c.zone = nodeName, zone
	return c.compute(ctx, services, endpoints, fresh, func(spn proxy.ServicePortName, sp proxy.ServicePort) *proxy.TrafficPolicy {
		tp := proxy.ResolveTrafficPolicy(sp, endpoints[spn], nodeName, topologyLabels)
		return &tp
	})
}

// ComputeResolved is Compute with each port's traffic policy already resolved, as a
// sync loop that decides it once for every backend has it (proxyrun's, from its sync
// shell): policy returns the port's policy, or nil to leave the port out. With full,
// every port is converted again; otherwise ports whose inputs are unchanged since the
// last call are reused. The returned State is read-only, as Compute's.
func (c *Computer) ComputeResolved(ctx context.Context, services proxy.ServicePortMap, endpoints proxy.EndpointsMap, full bool,
	policy func(proxy.ServicePortName, proxy.ServicePort) *proxy.TrafficPolicy) *State {
	return c.compute(ctx, services, endpoints, full, policy)
}

// compute converts every port whose inputs changed since the last call (all of them if
// fresh), taking each port's traffic policy from policy (nil: leave the port out).
func (c *Computer) compute(ctx context.Context, services proxy.ServicePortMap, endpoints proxy.EndpointsMap, fresh bool,
	policy func(proxy.ServicePortName, proxy.ServicePort) *proxy.TrafficPolicy) *State {
	logger := klog.FromContext(ctx)
	if fresh {
		clear(c.cache)
		c.order = c.order[:0]
	}
	c.pass++
	membershipChanged := false
	for spn, sp := range services {
		if sp == nil {
			continue
		}
		eps := endpoints[spn]
		var first *proxy.Endpoint
		if len(eps) > 0 {
			first = &eps[0]
		}
		e := c.cache[spn]
		if e != nil && proxy.SameServicePort(e.port, sp) && e.eps == first && e.neps == len(eps) {
			e.seen = c.pass
			continue
		}
		var svc Service
		tp := policy(spn, sp)
		ok := tp != nil
		if ok {
			svc, ok = c.convert(logger, spn, sp, tp)
		}
		if !ok {
			if e != nil {
				delete(c.cache, spn)
				membershipChanged = true
			}
			continue
		}
		if e == nil {
			e = &cached{}
			c.cache[spn] = e
			membershipChanged = true
		}
		*e = cached{port: sp, eps: first, neps: len(eps), seen: c.pass, svc: svc}
	}
	for spn, e := range c.cache {
		if e.seen != c.pass {
			delete(c.cache, spn)
			membershipChanged = true
		}
	}
	if membershipChanged || len(c.order) != len(c.cache) {
		c.order = c.order[:0]
		for _, e := range c.cache {
			c.order = append(c.order, e)
		}
		slices.SortFunc(c.order, func(a, b *cached) int { return a.svc.Name.Compare(b.svc.Name) })
	}
	st := &State{Family: c.family, Services: make([]Service, len(c.order))}
	for i, e := range c.order {
		st.Services[i] = e.svc
	}
	return st
}

func (c *Computer) convert(logger klog.Logger, spn proxy.ServicePortName, sp proxy.ServicePort, tp *proxy.TrafficPolicy) (Service, bool) {
	name := PortName{Namespace: spn.Namespace, Name: spn.Name, Port: spn.Port, Protocol: Protocol(spn.Protocol)}
	clusterIP, ok := c.addr(sp.ClusterIP())
	if !ok {
		logger.Error(nil, "Skipping service port whose cluster IP is not of this family", "servicePort", name.String(),
			"clusterIP", sp.ClusterIP().String(), "family", c.family)
		return Service{}, false
	}
	if sp.Port() <= 0 || sp.Port() > 65535 {
		logger.Error(nil, "Skipping service port with an invalid port number", "servicePort", name.String(), "port", sp.Port())
		return Service{}, false
	}
	p := ServicePort{
		Name:            name,
		ClusterIP:       clusterIP,
		Port:            uint16(sp.Port()),
		NodePort:        port16(sp.NodePort()),
		SessionAffinity: Affinity(sp.SessionAffinityType()),
		InternalPolicy:  PolicyCluster,
		ExternalPolicy:  PolicyCluster,
		// Health checks only mean something for Local external policy, where the brain
		// has already validated the port.
		HealthCheckNodePort: port16(sp.HealthCheckNodePort()),
	}
	if p.SessionAffinity == "" {
		p.SessionAffinity = AffinityNone
	}
	if p.SessionAffinity == AffinityClientIP {
		p.AffinityTimeout = time.Duration(sp.StickyMaxAgeSeconds()) * time.Second
	}
	if sp.InternalPolicyLocal() {
		p.InternalPolicy = PolicyLocal
	}
	if sp.ExternalPolicyLocal() {
		p.ExternalPolicy = PolicyLocal
	}
	p.ExternalIPs = c.addrs(sp.ExternalIPs())
	p.LoadBalancerVIPs = c.addrs(sp.LoadBalancerVIPs())
	for _, n := range sp.LoadBalancerSourceRanges() {
		if pfx, ok := c.prefix(n); ok {
			p.SourceRanges = append(p.SourceRanges, pfx)
		}
	}
	p.Normalize()

	svc := Service{ServicePort: p}
	cluster, local, all := tp.ClusterEndpoints, tp.LocalEndpoints, tp.ReachableEndpoints
	svc.HasAnyEndpoints = tp.HasEndpoints
	if len(all) == 0 {
		return svc, true
	}
	inCluster := membership(cluster, all)
	inLocal := membership(local, all)
	svc.Endpoints = make([]Endpoint, 0, len(all))
	for _, ep := range all {
		ip, err := netip.ParseAddr(ep.IP())
		if err != nil || !c.ofFamily(ip.Unmap()) {
			logger.Error(err, "Skipping endpoint with an address that is invalid or of another family", "servicePort", name.String(),
				"endpoint", ep.String(), "family", c.family)
			continue
		}
		if ep.Port() <= 0 || ep.Port() > 65535 {
			logger.Error(nil, "Skipping endpoint with an invalid port number", "servicePort", name.String(), "endpoint", ep.String())
			continue
		}
		out := Endpoint{
			IP:          ip.Unmap(),
			Port:        uint16(ep.Port()),
			Ready:       ep.IsReady(),
			Serving:     ep.IsServing(),
			Terminating: ep.IsTerminating(),
			Local:       ep.IsLocal(),
			ForCluster:  inCluster(ep),
			ForLocal:    inLocal(ep),
		}
		if loc, ok := ep.(EndpointLocation); ok {
			out.NodeName, out.Zone = loc.NodeName(), loc.Zone()
		}
		svc.Endpoints = append(svc.Endpoints, out)
	}
	slices.SortFunc(svc.Endpoints, Endpoint.Compare)
	svc.Endpoints = slices.CompactFunc(svc.Endpoints, func(a, b Endpoint) bool { return a.Compare(b) == 0 })
	return svc, true
}

// membership returns a test for "ep is in sub", where sub is a subset of all as returned
// by CategorizeEndpoints. The common cases (sub is all, or empty) need no lookup table.
func membership(sub, all []proxy.Endpoint) func(proxy.Endpoint) bool {
	switch {
	case len(sub) == 0:
		return func(proxy.Endpoint) bool { return false }
	case len(sub) == len(all):
		return func(proxy.Endpoint) bool { return true }
	}
	set := make(map[string]struct{}, len(sub))
	for _, ep := range sub {
		set[ep.String()] = struct{}{}
	}
	return func(ep proxy.Endpoint) bool {
		_, ok := set[ep.String()]
		return ok
	}
}

func (c *Computer) ofFamily(a netip.Addr) bool {
	return a.IsValid() && a.Is4() == (c.family == IPv4)
}

func (c *Computer) addr(ip net.IP) (netip.Addr, bool) {
	a, ok := netip.AddrFromSlice(ip)
	if !ok {
		return netip.Addr{}, false
	}
	a = a.Unmap()
	return a, c.ofFamily(a)
}

func (c *Computer) addrs(ips []net.IP) []netip.Addr {
	if len(ips) == 0 {
		return nil
	}
	out := make([]netip.Addr, 0, len(ips))
	for _, ip := range ips {
		if a, ok := c.addr(ip); ok {
			out = append(out, a)
		}
	}
	return out
}

func (c *Computer) prefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := c.addr(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, bits := n.Mask.Size()
	if bits == 0 {
		return netip.Prefix{}, false
	}
	// A 4-byte mask on an IPv4 address reads the same as a 16-byte one once unmapped.
	if a.Is4() && bits == 128 {
		ones -= 96
	}
	return netip.PrefixFrom(a, ones).Masked(), true
}

func port16(p int) uint16 {
	if p <= 0 || p > 65535 {
		return 0
	}
	return uint16(p)
}

// ComputeServicePort converts one service port with the traffic policy the brain
// resolved for it, without touching the Computer's cache: for a backend that is told
// which ports changed and converts only those, so a partial sync costs what the change
// costs. ok is false when the port is not of the Computer's family or has no valid port
// number (logged).
func (c *Computer) ComputeServicePort(ctx context.Context, name proxy.ServicePortName, sp proxy.ServicePort, tp *proxy.TrafficPolicy) (svc Service, ok bool) {
	if sp == nil || tp == nil {
		return Service{}, false
	}
	return c.convert(klog.FromContext(ctx), name, sp, tp)
}

// RuleOrder is a service port's endpoints in the order kube-proxy's rule generators
// list them, split by the traffic they serve. Service.Endpoints is sorted by address;
// rules list endpoints by their "ip:port" text, which is the order of the brain's
// endpoint lists and so of upstream's rules (10.0.0.10:80 before 10.0.0.9:80). The
// order decides rule order and which probability each rule gets, so a generator that
// wants rules identical to upstream's walks endpoints in this order.
type RuleOrder struct {
	// Endpoints point into Service.Endpoints, sorted by their text; Text[k] is
	// Endpoints[k].String().
	Endpoints []*Endpoint
	Text      []string
	// Cluster and Local are the positions in Endpoints, ascending, of the endpoints
	// Cluster-policy and Local-policy traffic may use: nil when the port uses no
	// such policy.
	Cluster, Local []int
}

// RuleOrder returns s's endpoints in rule order. It allocates one string per
// endpoint; callers convert a port when it changed, not at every sync.
func (s *Service) RuleOrder() RuleOrder {
	n := len(s.Endpoints)
	o := RuleOrder{Endpoints: make([]*Endpoint, n), Text: make([]string, n)}
	idx := make([]int, n)
	text := make([]string, n)
	for i := range s.Endpoints {
		idx[i] = i
		text[i] = s.Endpoints[i].String()
	}
	slices.SortFunc(idx, func(a, b int) int { return strings.Compare(text[a], text[b]) })
	useCluster, useLocal := s.UsesClusterEndpoints(), s.UsesLocalEndpoints()
	for k, i := range idx {
		ep := &s.Endpoints[i]
		o.Endpoints[k], o.Text[k] = ep, text[i]
		if useCluster && ep.ForCluster {
			o.Cluster = append(o.Cluster, k)
		}
		if useLocal && ep.ForLocal {
			o.Local = append(o.Local, k)
		}
	}
	return o
}
