package proxy

import (
	"reflect"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
)

// CategorizeEndpoints decides which of a service port's endpoints this node
// uses. It returns:
//
//   - clusterEndpoints: the endpoints for Cluster traffic policy, narrowed by
//     topology hints when they apply; nil if the port never uses Cluster
//     policy.
//   - localEndpoints: the endpoints for Local traffic policy; nil if the port
//     never uses Local policy.
//   - allReachableEndpoints: the union of the two (one of them when it
//     already contains the other, to avoid allocating).
//   - hasAnyEndpoints: whether the service has usable endpoints anywhere in
//     the cluster, even if none are reachable from here.
//
// "Usable" means Ready; when no endpoint is Ready, serving-and-terminating
// endpoints are used instead, decided separately for Cluster and Local.
//
// Only the topology.kubernetes.io/zone label of topologyLabels is consulted;
// config.NodeTopologyLabels (which every source of a Node uses) keeps only
// that label, so keep them in step.
func CategorizeEndpoints(endpoints []Endpoint, svcInfo ServicePort, nodeName string, topologyLabels map[string]string) (clusterEndpoints, localEndpoints, allReachableEndpoints []Endpoint, hasAnyEndpoints bool) {
	if len(endpoints) == 0 {
		return nil, nil, nil, false
	}

	var topologyMode string
	if svcInfo.UsesClusterEndpoints() {
		zone := topologyLabels[v1.LabelTopologyZone]
		topologyMode = topologyModeFromHints(svcInfo, endpoints, nodeName, zone)
		clusterEndpoints = filterEndpoints(endpoints, func(ep Endpoint) bool {
			return ep.IsReady() && availableForTopology(ep, topologyMode, nodeName, zone)
		})
		// Topology never filters out every ready endpoint (the mode is only
		// chosen when one matches), so an empty list here means nothing is
		// ready anywhere: fall back to terminating endpoints.
		if len(clusterEndpoints) == 0 {
			clusterEndpoints = filterEndpoints(endpoints, isServingTerminating)
		}
		if len(clusterEndpoints) > 0 {
			hasAnyEndpoints = true
		}
	}

	if !svcInfo.UsesLocalEndpoints() {
		return clusterEndpoints, nil, clusterEndpoints, hasAnyEndpoints
	}

	var hasLocalReady, hasLocalServingTerminating bool
	for _, ep := range endpoints {
		switch {
		case ep.IsReady():
			hasAnyEndpoints = true
			hasLocalReady = hasLocalReady || ep.IsLocal()
		case isServingTerminating(ep):
			hasAnyEndpoints = true
			hasLocalServingTerminating = hasLocalServingTerminating || ep.IsLocal()
		}
	}

	useServingTerminating := false
	switch {
	case hasLocalReady:
		localEndpoints = filterEndpoints(endpoints, func(ep Endpoint) bool {
			return ep.IsLocal() && ep.IsReady()
		})
	case hasLocalServingTerminating:
		useServingTerminating = true
		localEndpoints = filterEndpoints(endpoints, func(ep Endpoint) bool {
			return ep.IsLocal() && isServingTerminating(ep)
		})
	}

	if !svcInfo.UsesClusterEndpoints() {
		return nil, localEndpoints, localEndpoints, hasAnyEndpoints
	}

	if topologyMode == "" && !useServingTerminating {
		// clusterEndpoints holds every ready endpoint and localEndpoints only
		// ready ones, so the former already contains the latter.
		return clusterEndpoints, localEndpoints, clusterEndpoints, hasAnyEndpoints
	}

	// Each list may hold endpoints the other lacks: remote ones in
	// clusterEndpoints, terminating or topology-excluded local ones in
	// localEndpoints. Merge them, keeping a deterministic order.
	seen := make(map[string]struct{}, len(clusterEndpoints)+len(localEndpoints))
	allReachableEndpoints = make([]Endpoint, 0, len(clusterEndpoints)+len(localEndpoints))
	for _, list := range [][]Endpoint{clusterEndpoints, localEndpoints} {
		for _, ep := range list {
			if _, dup := seen[ep.String()]; dup {
				continue
			}
			seen[ep.String()] = struct{}{}
			allReachableEndpoints = append(allReachableEndpoints, ep)
		}
	}
	return clusterEndpoints, localEndpoints, allReachableEndpoints, hasAnyEndpoints
}

func isServingTerminating(ep Endpoint) bool {
	return ep.IsServing() && ep.IsTerminating()
}

// topologyModeFromHints picks how hints narrow Cluster endpoints:
// PreferSameNode when every ready endpoint has node hints and one names this
// node (and the gate is on); else PreferSameZone when every ready endpoint
// has zone hints and one names this node's zone; else "" (no narrowing).
// Requiring hints on every endpoint guards against acting on a half-updated
// set of slices.
func topologyModeFromHints(svcInfo ServicePort, endpoints []Endpoint, nodeName, zone string) string {
	hasReady := false
	allHaveNodeHints, hasForNode := true, false
	allHaveZoneHints, hasForZone := true, false
	for _, ep := range endpoints {
		if !ep.IsReady() {
			continue
		}
		hasReady = true
		if ep.NodeHints().Len() == 0 {
			allHaveNodeHints = false
		} else if ep.NodeHints().Has(nodeName) {
			hasForNode = true
		}
		if ep.ZoneHints().Len() == 0 {
			allHaveZoneHints = false
		} else if ep.ZoneHints().Has(zone) {
			hasForZone = true
		}
	}
	if !hasReady {
		return ""
	}

	logger := klog.Background()
	if features.DefaultFeatureGate.Enabled(features.PreferSameTrafficDistribution) {
		if allHaveNodeHints {
			if hasForNode {
				return v1.ServiceTrafficDistributionPreferSameNode
			}
			logger.V(2).Info("Ignoring same-node topology hints for service since no hints were provided for node", "service", svcInfo, "node", nodeName)
		} else {
			logger.V(7).Info("Ignoring same-node topology hints for service since one or more endpoints is missing a node hint", "service", svcInfo)
		}
	}
	if allHaveZoneHints {
		if hasForZone {
			return v1.ServiceTrafficDistributionPreferSameZone
		}
		if zone == "" {
			logger.V(2).Info("Ignoring same-zone topology hints for service since node is missing label", "service", svcInfo, "label", v1.LabelTopologyZone)
		} else {
			logger.V(2).Info("Ignoring same-zone topology hints for service since no hints were provided for zone", "service", svcInfo, "zone", zone)
		}
	} else {
		logger.V(7).Info("Ignoring same-zone topology hints for service since one or more endpoints is missing a zone hint", "service", svcInfo)
	}
	return ""
}

// availableForTopology applies an already chosen mode; the fallback to no
// topology happens when choosing the mode, never here.
func availableForTopology(ep Endpoint, topologyMode, nodeName, zone string) bool {
	switch topologyMode {
	case "":
		return true
	case v1.ServiceTrafficDistributionPreferSameNode:
		return ep.NodeHints().Has(nodeName)
	case v1.ServiceTrafficDistributionPreferSameZone:
		return ep.ZoneHints().Has(zone)
	}
	return false
}

func filterEndpoints(endpoints []Endpoint, keep func(Endpoint) bool) []Endpoint {
	out := make([]Endpoint, 0, len(endpoints))
	for _, ep := range endpoints {
		if keep(ep) {
			out = append(out, ep)
		}
	}
	return out
}

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
