package proxy

import (
	"reflect"
	"slices"
)

// NoEndpointsAction says what a backend does with traffic for a service port
// that, under the applicable traffic policy, has no endpoint to go to.
type NoEndpointsAction uint8

const (
	// Forward: there are endpoints; traffic is load-balanced to them.
	Forward NoEndpointsAction = iota
	// Drop: the policy is Local and this node has no usable local endpoint,
	// but endpoints exist elsewhere. Dropping (not rejecting) lets a client
	// or load balancer time out and retry elsewhere, as upstream does.
	Drop
	// Reject: the service port has no usable endpoint anywhere, so clients
	// are told at once (ICMP unreachable / TCP reset) instead of timing out.
	Reject
)

func (a NoEndpointsAction) String() string {
	switch a {
	case Forward:
		return "forward"
	case Drop:
		return "drop"
	case Reject:
		return "reject"
	}
	return "unknown"
}

// TrafficPolicy is everything a backend needs to know about where one service
// port's traffic goes on this node. It is the one place where topology,
// traffic policies and the terminating-endpoint fallback are turned into a
// decision; every backend programs it as given instead of re-deciding.
type TrafficPolicy struct {
	// ClusterEndpoints serve Cluster-policy traffic (nil if the port never
	// uses Cluster policy); LocalEndpoints serve Local-policy traffic (nil if
	// it never uses Local policy). ReachableEndpoints is their union: every
	// endpoint some traffic may be sent to from this node.
	ClusterEndpoints, LocalEndpoints, ReachableEndpoints []Endpoint
	// HasEndpoints reports whether the port has usable endpoints anywhere in
	// the cluster, even if none is reachable from this node.
	HasEndpoints bool

	// InternalLocal and ExternalLocal are the port's traffic policies
	// (internalTrafficPolicy / externalTrafficPolicy == Local).
	InternalLocal, ExternalLocal bool
	// Internal and External say what happens to cluster-IP traffic and to
	// external (node port, external IP, load balancer) traffic.
	Internal, External NoEndpointsAction

	// UsesClusterEndpoints and UsesLocalEndpoints say whether some traffic
	// is balanced over ClusterEndpoints / LocalEndpoints, that is whether a
	// backend needs a dispatch structure (chain, map, load balancer) for
	// each set.
	UsesClusterEndpoints, UsesLocalEndpoints bool
}

// InternalEndpoints returns the endpoints cluster-IP traffic is balanced over.
func (tp *TrafficPolicy) InternalEndpoints() []Endpoint {
	if tp.InternalLocal {
		return tp.LocalEndpoints
	}
	return tp.ClusterEndpoints
}

// ExternalEndpoints returns the endpoints external traffic is balanced over.
func (tp *TrafficPolicy) ExternalEndpoints() []Endpoint {
	if tp.ExternalLocal {
		return tp.LocalEndpoints
	}
	return tp.ClusterEndpoints
}

// NoLocalInternal reports whether internal traffic is dropped for want of a
// local endpoint (counted by sync_proxy_rules_no_local_endpoints_total).
func (tp *TrafficPolicy) NoLocalInternal() bool { return tp.Internal == Drop }

// NoLocalExternal is NoLocalInternal for external traffic.
func (tp *TrafficPolicy) NoLocalExternal() bool { return tp.External == Drop }

// ResolveTrafficPolicy decides, for svc on node nodeName with the node's
// topology labels, which of endpoints serve internal and external traffic
// and what happens to traffic that has none. endpoints must already be
// restricted to ones the backend can program (see UsableEndpoints).
func ResolveTrafficPolicy(svc ServicePort, endpoints []Endpoint, nodeName string, topologyLabels map[string]string) TrafficPolicy {
	tp := TrafficPolicy{
		InternalLocal: svc.InternalPolicyLocal(),
		ExternalLocal: svc.ExternalPolicyLocal(),
	}
	tp.ClusterEndpoints, tp.LocalEndpoints, tp.ReachableEndpoints, tp.HasEndpoints =
		CategorizeEndpoints(endpoints, svc, nodeName, topologyLabels)
	tp.UsesClusterEndpoints = len(tp.ClusterEndpoints) > 0 && svc.UsesClusterEndpoints()
	tp.UsesLocalEndpoints = len(tp.LocalEndpoints) > 0 && svc.UsesLocalEndpoints()
	tp.Internal = actionFor(tp.HasEndpoints, tp.InternalLocal, len(tp.LocalEndpoints))
	tp.External = actionFor(tp.HasEndpoints, tp.ExternalLocal, len(tp.LocalEndpoints))
	return tp
}

func actionFor(hasEndpoints, local bool, localEndpoints int) NoEndpointsAction {
	switch {
	case !hasEndpoints:
		return Reject
	case local && localEndpoints == 0:
		return Drop
	}
	return Forward
}

// UsableEndpoints returns eps without the endpoints keep rejects, calling
// skipped for each one left out (for logging). It allocates only when
// something is left out, which is the rare case: at 10k services a copy per
// service port per sync would be most of a partial sync's garbage.
func UsableEndpoints(eps []Endpoint, keep func(Endpoint) bool, skipped func(Endpoint)) []Endpoint {
	bad := 0
	for _, ep := range eps {
		if !keep(ep) {
			bad++
		}
	}
	if bad == 0 {
		return eps
	}
	out := make([]Endpoint, 0, len(eps)-bad)
	for _, ep := range eps {
		if keep(ep) {
			out = append(out, ep)
		} else if skipped != nil {
			skipped(ep)
		}
	}
	return out
}

// Unchanged reports whether tp resolves to what old did: the same decisions over the
// very same endpoint values. It is the one answer to "were a port's inputs identical
// last time" that backends keeping per-port output ask before rendering a port again.
// The trackers replace an endpoint when it changes and never modify one in place, so
// comparing identities is enough and costs no string work.
func (tp *TrafficPolicy) Unchanged(old *TrafficPolicy) bool {
	if tp == old {
		return true
	}
	if tp == nil || old == nil {
		return false
	}
	return tp.HasEndpoints == old.HasEndpoints && tp.InternalLocal == old.InternalLocal && tp.ExternalLocal == old.ExternalLocal &&
		tp.Internal == old.Internal && tp.External == old.External &&
		tp.UsesClusterEndpoints == old.UsesClusterEndpoints && tp.UsesLocalEndpoints == old.UsesLocalEndpoints &&
		SameEndpoints(tp.ClusterEndpoints, old.ClusterEndpoints) && SameEndpoints(tp.LocalEndpoints, old.LocalEndpoints) &&
		SameEndpoints(tp.ReachableEndpoints, old.ReachableEndpoints)
}

// SameEndpoints reports whether a and b hold the very same endpoint values, in the same
// order (see TrafficPolicy.Unchanged).
func SameEndpoints(a, b []Endpoint) bool {
	return slices.EqualFunc(a, b, func(x, y Endpoint) bool { return sameValue(x, y) })
}

// SameServicePort reports whether a and b are the very same ServicePort value.
func SameServicePort(a, b ServicePort) bool { return sameValue(a, b) }

// sameValue compares pointers only: a value of another kind may not be comparable (the
// comparison could panic) or could have been changed in place, so it is taken as changed.
func sameValue[T any](a, b T) bool {
	// The brain's own types first: no reflection on the common path, which a full sync
	// at 10k services takes 100k times.
	switch x := any(a).(type) {
	case *BaseEndpointInfo:
		y, ok := any(b).(*BaseEndpointInfo)
		return ok && x == y
	case *BaseServicePortInfo:
		y, ok := any(b).(*BaseServicePortInfo)
		return ok && x == y
	}
	ta := reflect.TypeOf(any(a))
	if ta == nil || ta.Kind() != reflect.Pointer || ta != reflect.TypeOf(any(b)) {
		return false
	}
	return any(a) == any(b)
}
