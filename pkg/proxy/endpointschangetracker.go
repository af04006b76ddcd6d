package proxy

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
)

// processEndpointsMapChangeFunc is told about every applied change; it must
// not modify the maps.
type processEndpointsMapChangeFunc func(oldEndpointsMap, newEndpointsMap EndpointsMap)

// EndpointsChangeTracker accumulates EndpointSlice changes of one address
// family between syncs. It is safe for concurrent use.
type EndpointsChangeTracker struct {
	addressType               discovery.AddressType
	processEndpointsMapChange processEndpointsMapChangeFunc
	endpointSliceCache        *EndpointSliceCache
	logger                    klog.Logger
	// trackerStartTime bounds the trigger times reported: changes made
	// before kube-proxy started are not its programming latency.
	trackerStartTime time.Time

	mu sync.Mutex
	// lastChangeTriggerTimes holds, per Service, the
	// EndpointsLastChangeTriggerTime of every slice update since the last
	// Update, for the network-programming-latency metric.
	lastChangeTriggerTimes map[types.NamespacedName][]time.Time
}

// NewEndpointsChangeTracker returns a tracker for ipFamily's EndpointSlices;
// endpoints on nodeName are local. Both callbacks may be nil.
func NewEndpointsChangeTracker(ipFamily v1.IPFamily, nodeName string, makeEndpointInfo makeEndpointFunc, processEndpointsMapChange processEndpointsMapChangeFunc) *EndpointsChangeTracker {
	addressType := discovery.AddressTypeIPv4
	if isIPv6Family(ipFamily) {
		addressType = discovery.AddressTypeIPv6
	}
	return &EndpointsChangeTracker{
		addressType:               addressType,
		processEndpointsMapChange: processEndpointsMapChange,
		endpointSliceCache:        NewEndpointSliceCache(nodeName, makeEndpointInfo),
		logger:                    klog.Background().WithName("endpoints-tracker"),
		trackerStartTime:          time.Now(),
		lastChangeTriggerTimes:    map[types.NamespacedName][]time.Time{},
	}
}

// EndpointSliceUpdate records an add/update of endpointSlice, or its
// deletion if removeSlice. It returns true if this call changed what the
// next sync must apply (unlike ServiceChangeTracker.Update, which reports
// whether anything at all is pending).
func (ect *EndpointsChangeTracker) EndpointSliceUpdate(endpointSlice *discovery.EndpointSlice, removeSlice bool) bool {
	if endpointSlice == nil {
		return false
	}
	if endpointSlice.AddressType != ect.addressType {
		ect.logger.V(4).Info("Ignoring EndpointSlice of another address type", "endpointSlice", klog.KObj(endpointSlice),
			"type", endpointSlice.AddressType, "expected", ect.addressType)
		return false
	}
	serviceNN, sliceName, err := endpointSliceCacheKeys(endpointSlice)
	if err != nil {
		ect.logger.Info("Ignoring EndpointSlice", "endpointSlice", klog.KObj(endpointSlice), "err", err)
		return false
	}

	recordEndpointChange()

	ect.mu.Lock()
	defer ect.mu.Unlock()

	changed := ect.endpointSliceCache.updatePending(serviceNN, sliceName, endpointSlice, removeSlice)
	if changed {
		incEndpointChangesPending()
		if removeSlice {
			// A deleted slice's trigger time is that of its last update,
			// not of the deletion; reporting it would skew the latency.
			delete(ect.lastChangeTriggerTimes, serviceNN)
		} else if t := ect.lastChangeTriggerTime(endpointSlice); !t.IsZero() && t.After(ect.trackerStartTime) {
			ect.lastChangeTriggerTimes[serviceNN] = append(ect.lastChangeTriggerTimes[serviceNN], t)
		}
	}
	return changed
}

// lastChangeTriggerTime parses the EndpointsLastChangeTriggerTime annotation,
// returning the zero time when it is absent or malformed.
func (ect *EndpointsChangeTracker) lastChangeTriggerTime(slice *discovery.EndpointSlice) time.Time {
	val, ok := slice.Annotations[v1.EndpointsLastChangeTriggerTime]
	if !ok {
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, val)
	if err != nil {
		ect.logger.Error(err, "Ignoring malformed trigger time annotation", "endpointSlice", klog.KObj(slice),
			"field", "metadata.annotations["+v1.EndpointsLastChangeTriggerTime+"]", "value", val)
		return time.Time{}
	}
	return t
}

// checkoutTriggerTimes moves the collected trigger times into into.
func (ect *EndpointsChangeTracker) checkoutTriggerTimes(into map[types.NamespacedName][]time.Time) {
	ect.mu.Lock()
	defer ect.mu.Unlock()
	for nn, times := range ect.lastChangeTriggerTimes {
		into[nn] = append(into[nn], times...)
	}
	ect.lastChangeTriggerTimes = map[types.NamespacedName][]time.Time{}
}

// UpdateEndpointsMapResult describes what an EndpointsMap.Update changed.
type UpdateEndpointsMapResult struct {
	// UpdatedServices lists every Service whose endpoints were added,
	// changed or deleted since the previous Update.
	UpdatedServices sets.Set[types.NamespacedName]
	// ConntrackCleanupRequired is true if any changed Service has a UDP
	// port, before or after the change, so stale UDP flows may exist.
	ConntrackCleanupRequired bool
	// LastChangeTriggerTimes holds the trigger times of the changes, for
	// the network-programming-latency metric.
	LastChangeTriggerTimes map[types.NamespacedName][]time.Time
}

// Update applies every change pending in ect to em, calls the tracker's
// processEndpointsMapChange for each, and empties the tracker.
func (em EndpointsMap) Update(ect *EndpointsChangeTracker) UpdateEndpointsMapResult {
	result := UpdateEndpointsMapResult{
		UpdatedServices:        sets.New[types.NamespacedName](),
		LastChangeTriggerTimes: map[types.NamespacedName][]time.Time{},
	}
	if ect == nil {
		return result
	}

	resetEndpointChangesPending()
	changes := ect.endpointSliceCache.checkoutChanges()
	for nn, change := range changes {
		if ect.processEndpointsMapChange != nil {
			ect.processEndpointsMapChange(change.previous.asMap(), change.current.asMap())
		}
		result.UpdatedServices.Insert(nn)

		for _, p := range change.previous {
			if !change.current.has(p.name) {
				ect.logger.V(3).Info("Removing service endpoints", "portName", p.name)
			}
			delete(em, p.name)
		}
		for _, p := range change.current {
			if ect.logger.V(3).Enabled() {
				ect.logger.V(3).Info("Setting service endpoints", "portName", p.name, "endpoints", formatEndpointsList(p.eps))
			}
			em[p.name] = p.eps
		}

		if !result.ConntrackCleanupRequired {
			result.ConntrackCleanupRequired = change.previous.hasUDP() || change.current.hasUDP()
		}
	}
	ect.checkoutTriggerTimes(result.LastChangeTriggerTimes)
	return result
}

func formatEndpointsList(endpoints []Endpoint) []string {
	out := make([]string, 0, len(endpoints))
	for _, ep := range endpoints {
		out = append(out, ep.String())
	}
	return out
}

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
