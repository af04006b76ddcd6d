package proxy

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// This file holds the endpoint types both the EndpointSliceCache (which
// builds them) and the EndpointsChangeTracker (which applies them) use, so
// that the cache does not depend on the tracker.

// EndpointsMap maps each service port to its endpoints, sorted by String().
type EndpointsMap map[ServicePortName][]Endpoint

// endpointsChange is the before and after of one Service's endpoints.
type endpointsChange struct {
	previous serviceEndpoints
	current  serviceEndpoints
}

// serviceEndpoints is one Service's endpoints by port, in port name order:
// the EndpointSliceCache keeps one per Service for the process's life, and
// most Services have one or two ports. As an EndpointsMap each took ~700
// bytes (a map's smallest table has room for 8 entries), ~6 MB at 10k
// Services; as a list, ~100 bytes.
type serviceEndpoints []portEndpoints

type portEndpoints struct {
	name ServicePortName
	eps  []Endpoint
}

// has reports whether name is one of the ports.
func (se serviceEndpoints) has(name ServicePortName) bool {
	for i := range se {
		if se[i].name == name {
			return true
		}
	}
	return false
}

// hasUDP reports whether a port is UDP.
func (se serviceEndpoints) hasUDP() bool {
	for i := range se {
		if se[i].name.Protocol == v1.ProtocolUDP {
			return true
		}
	}
	return false
}

// asMap returns the ports and their endpoints as an EndpointsMap.
func (se serviceEndpoints) asMap() EndpointsMap {
	m := make(EndpointsMap, len(se))
	for _, p := range se {
		m[p.name] = p.eps
	}
	return m
}

// LocalReadyEndpoints returns, per Service, how many distinct IPs of local
// ready endpoints it has. Services with none are absent.
//
// Terminating endpoints are left out on purpose: they may still serve, but a
// node with only terminating endpoints should fail the load balancer's health
// check so that new traffic goes elsewhere. IPs, not ip:port pairs, are
// counted, so a pod backing two ports counts once.
func (em EndpointsMap) LocalReadyEndpoints() map[types.NamespacedName]int {
	return em.LocalReadyEndpointsOf(nil)
}

// LocalReadyEndpointsOf is LocalReadyEndpoints restricted to the Services for
// which want returns true (all of them if want is nil). Health checks only
// look at Services with a health check node port, a small share of a large
// cluster, so a sync recounts just those.
func (em EndpointsMap) LocalReadyEndpointsOf(want func(types.NamespacedName) bool) map[types.NamespacedName]int {
	ips := map[types.NamespacedName]sets.Set[string]{}
	for spn, eps := range em {
		if want != nil && !want(spn.NamespacedName) {
			continue
		}
		for _, ep := range eps {
			if ep == nil || !ep.IsReady() || !ep.IsLocal() {
				continue
			}
			s := ips[spn.NamespacedName]
			if s == nil {
				s = sets.New[string]()
				ips[spn.NamespacedName] = s
			}
			s.Insert(ep.IP())
		}
	}
	counts := make(map[types.NamespacedName]int, len(ips))
	for nn, s := range ips {
		counts[nn] = s.Len()
	}
	return counts
}
