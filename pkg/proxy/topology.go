package proxy

import (
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
// config.NodeTopologyConfig forwards only that label, so keep them in step.
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
