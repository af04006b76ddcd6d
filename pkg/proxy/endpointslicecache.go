package proxy

import (
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/features"
)

// makeEndpointFunc lets a proxier wrap the standard endpoint info in its own
// Endpoint type.
type makeEndpointFunc func(info *BaseEndpointInfo, svcPortName *ServicePortName) Endpoint

// EndpointSliceCache holds the EndpointSlices of every Service, split into
// the ones already applied to an EndpointsMap and the ones pending, so that
// a sync can compute exactly how each changed Service's endpoints moved.
//
// Slices are tracked individually (not merged per Service on arrival)
// because an endpoint can move from one slice to another: a merged view
// would drop it when the old slice shrinks before the new one grows.
type EndpointSliceCache struct {
	makeEndpointInfo makeEndpointFunc
	nodeName         string
	logger           klog.Logger

	mu                  sync.Mutex
	trackerByServiceMap map[types.NamespacedName]*endpointSliceTracker
	// pendingServices names the trackers with pending slices, so that a
	// sync costs O(changes), not O(services).
	pendingServices sets.Set[types.NamespacedName]
}

// endpointSliceTracker is the per-Service state of the cache. A cluster has
// one per Service, most with one slice and nothing pending, so applied is a
// short list and pending is nil between syncs: as two maps they took ~500
// bytes per Service (a map's smallest table has room for 8 entries), ~5 MB
// at 10k Services.
type endpointSliceTracker struct {
	applied []namedSlice                  // by name
	pending map[string]*endpointSliceData // nil when nothing is pending
	// appliedEndpoints is the EndpointsMap computed from applied at the
	// last checkout. Keeping it means each change converts only the new
	// state, not the old one again.
	appliedEndpoints serviceEndpoints
}

// namedSlice is an applied EndpointSlice and its name.
type namedSlice struct {
	name  string
	slice *discovery.EndpointSlice
}

// appliedSlice returns the applied slice named name.
func (t *endpointSliceTracker) appliedSlice(name string) (*discovery.EndpointSlice, bool) {
	i, found := slices.BinarySearchFunc(t.applied, name, func(a namedSlice, name string) int { return strings.Compare(a.name, name) })
	if !found {
		return nil, false
	}
	return t.applied[i].slice, true
}

// apply applies one pending change to applied.
func (t *endpointSliceTracker) apply(name string, data *endpointSliceData) {
	i, found := slices.BinarySearchFunc(t.applied, name, func(a namedSlice, name string) int { return strings.Compare(a.name, name) })
	switch {
	case data.remove && found:
		t.applied = slices.Delete(t.applied, i, i+1)
	case data.remove:
	case found:
		t.applied[i].slice = data.endpointSlice
	default:
		t.applied = slices.Insert(t.applied, i, namedSlice{name: name, slice: data.endpointSlice})
	}
}

// endpointSliceData is one pending add/update (remove=false) or delete.
type endpointSliceData struct {
	endpointSlice *discovery.EndpointSlice
	remove        bool
}

// NewEndpointSliceCache returns an empty cache. Endpoints on nodeName are
// marked local. makeEndpointInfo may be nil.
func NewEndpointSliceCache(nodeName string, makeEndpointInfo makeEndpointFunc) *EndpointSliceCache {
	if makeEndpointInfo == nil {
		makeEndpointInfo = standardEndpointInfo
	}
	return &EndpointSliceCache{
		makeEndpointInfo:    makeEndpointInfo,
		nodeName:            nodeName,
		logger:              klog.Background().WithName("endpointslice-cache"),
		trackerByServiceMap: map[types.NamespacedName]*endpointSliceTracker{},
		pendingServices:     sets.New[types.NamespacedName](),
	}
}

func standardEndpointInfo(info *BaseEndpointInfo, _ *ServicePortName) Endpoint {
	return info
}

// endpointSliceCacheKeys returns the Service a slice belongs to and the
// slice's own name, or an error naming what is missing.
func endpointSliceCacheKeys(slice *discovery.EndpointSlice) (types.NamespacedName, string, error) {
	serviceName := slice.Labels[discovery.LabelServiceName]
	if serviceName == "" {
		return types.NamespacedName{}, "", fmt.Errorf("EndpointSlice %s/%s has no %s label", slice.Namespace, slice.Name, discovery.LabelServiceName)
	}
	if slice.Namespace == "" || slice.Name == "" {
		return types.NamespacedName{}, "", fmt.Errorf("EndpointSlice %q/%q for service %q must have a namespace and a name", slice.Namespace, slice.Name, serviceName)
	}
	return types.NamespacedName{Namespace: slice.Namespace, Name: serviceName}, slice.Name, nil
}

// updatePending records slice, of Service serviceKey and named sliceKey (see
// endpointSliceCacheKeys, which the caller has already checked), as a pending
// add/update, or delete if remove. It returns whether that changes what the
// next checkout will apply.
func (cache *EndpointSliceCache) updatePending(serviceKey types.NamespacedName, sliceKey string, slice *discovery.EndpointSlice, remove bool) bool {
	cache.mu.Lock()
	defer cache.mu.Unlock()

	tracker := cache.trackerByServiceMap[serviceKey]
	if tracker != nil {
		if pending, ok := tracker.pending[sliceKey]; ok {
			if pending.remove == remove && reflect.DeepEqual(pending.endpointSlice, slice) {
				return false
			}
		} else if applied, ok := tracker.appliedSlice(sliceKey); ok {
			if !remove && reflect.DeepEqual(applied, slice) {
				return false
			}
		} else if remove {
			return false
		}
	} else {
		if remove {
			return false
		}
		tracker = &endpointSliceTracker{}
		cache.trackerByServiceMap[serviceKey] = tracker
	}
	if tracker.pending == nil {
		tracker.pending = map[string]*endpointSliceData{}
	}
	tracker.pending[sliceKey] = &endpointSliceData{endpointSlice: slice, remove: remove}
	cache.pendingServices.Insert(serviceKey)
	return true
}

// checkoutChanges applies every pending slice and returns, per Service that
// had any, the endpoints before and after.
func (cache *EndpointSliceCache) checkoutChanges() map[types.NamespacedName]*endpointsChange {
	cache.mu.Lock()
	defer cache.mu.Unlock()

	changes := make(map[types.NamespacedName]*endpointsChange, len(cache.pendingServices))
	for serviceNN := range cache.pendingServices {
		tracker := cache.trackerByServiceMap[serviceNN]
		if tracker == nil || len(tracker.pending) == 0 {
			continue
		}
		for name, data := range tracker.pending {
			tracker.apply(name, data)
		}
		tracker.pending = nil

		current := cache.endpointsMapFromSlices(serviceNN, tracker.applied)
		changes[serviceNN] = &endpointsChange{previous: tracker.appliedEndpoints, current: current}
		tracker.appliedEndpoints = current
		if len(tracker.applied) == 0 {
			delete(cache.trackerByServiceMap, serviceNN)
		}
	}
	// Reallocate rather than clear: clearing costs the map's peak capacity,
	// which after the initial sync is every service.
	cache.pendingServices = sets.New[types.NamespacedName]()
	return changes
}

// endpointsMapFromSlices converts the slices of one Service into its
// endpoints by port, ports in name order, each port's endpoints sorted by
// String() so that results are stable and cheap to diff.
func (cache *EndpointSliceCache) endpointsMapFromSlices(serviceNN types.NamespacedName, applied []namedSlice) serviceEndpoints {
	if len(applied) == 0 {
		return nil
	}
	// applied is in name order, so which copy of an endpoint present in two
	// slices wins does not depend on the order the slices arrived in.
	byPort := map[ServicePortName]map[string]Endpoint{}
	for _, as := range applied {
		slice := as.slice
		for i := range slice.Ports {
			port := &slice.Ports[i]
			spn, portNum, ok := cache.validPort(slice, i, port, serviceNN)
			if !ok {
				continue
			}
			set := byPort[spn]
			if set == nil {
				set = make(map[string]Endpoint, len(slice.Endpoints))
				byPort[spn] = set
			}
			cache.addEndpoints(slice, &spn, portNum, set)
		}
	}

	out := make(serviceEndpoints, 0, len(byPort))
	for spn, set := range byPort {
		if len(set) == 0 {
			continue
		}
		list := make([]Endpoint, 0, len(set))
		for _, ep := range set {
			list = append(list, ep)
		}
		slices.SortFunc(list, func(a, b Endpoint) int { return strings.Compare(a.String(), b.String()) })
		out = append(out, portEndpoints{name: spn, eps: list})
	}
	slices.SortFunc(out, func(a, b portEndpoints) int { return CompareServicePortNames(a.name, b.name) })
	return out
}

func (cache *EndpointSliceCache) validPort(slice *discovery.EndpointSlice, i int, port *discovery.EndpointPort, serviceNN types.NamespacedName) (ServicePortName, int, bool) {
	field := "ports[" + strconv.Itoa(i) + "]"
	if port.Name == nil {
		cache.logger.Error(nil, "Ignoring EndpointSlice port with nil name", "endpointSlice", klog.KObj(slice), "field", field+".name")
		return ServicePortName{}, 0, false
	}
	if port.Port == nil || *port.Port <= 0 || *port.Port > 65535 {
		var value any
		if port.Port != nil {
			value = *port.Port
		}
		cache.logger.Error(nil, "Ignoring EndpointSlice port with invalid port number", "endpointSlice", klog.KObj(slice), "field", field+".port", "value", value)
		return ServicePortName{}, 0, false
	}
	if port.Protocol == nil || !validProtocol(*port.Protocol) {
		var value any
		if port.Protocol != nil {
			value = *port.Protocol
		}
		cache.logger.Error(nil, "Ignoring EndpointSlice port with unsupported protocol", "endpointSlice", klog.KObj(slice), "field", field+".protocol", "value", value)
		return ServicePortName{}, 0, false
	}
	return ServicePortName{NamespacedName: serviceNN, Port: *port.Name, Protocol: *port.Protocol}, int(*port.Port), true
}

// addEndpoints adds slice's endpoints for one port to set, keyed by
// "ip:port".
func (cache *EndpointSliceCache) addEndpoints(slice *discovery.EndpointSlice, spn *ServicePortName, portNum int, set map[string]Endpoint) {
	wantIPv6 := slice.AddressType == discovery.AddressTypeIPv6
	nodeHintsEnabled := features.DefaultFeatureGate.Enabled(features.PreferSameTrafficDistribution)
	for i := range slice.Endpoints {
		endpoint := &slice.Endpoints[i]
		if len(endpoint.Addresses) == 0 {
			cache.logger.Error(nil, "Ignoring EndpointSlice endpoint without addresses", "endpointSlice", klog.KObj(slice),
				"field", "endpoints["+strconv.Itoa(i)+"].addresses")
			continue
		}
		ip, ok := parseEndpointIP(endpoint.Addresses[0])
		if !ok || ip.Is6() != wantIPv6 {
			cache.logger.Error(nil, "Ignoring EndpointSlice endpoint with an address that is invalid or not of the slice's address type",
				"endpointSlice", klog.KObj(slice), "field", "endpoints["+strconv.Itoa(i)+"].addresses[0]",
				"value", endpoint.Addresses[0], "addressType", slice.AddressType)
			continue
		}

		isLocal := cache.nodeName != "" && endpoint.NodeName != nil && *endpoint.NodeName == cache.nodeName
		ready := endpoint.Conditions.Ready == nil || *endpoint.Conditions.Ready
		serving := endpoint.Conditions.Serving == nil || *endpoint.Conditions.Serving
		terminating := endpoint.Conditions.Terminating != nil && *endpoint.Conditions.Terminating

		var zoneHints, nodeHints sets.Set[string]
		if hints := endpoint.Hints; hints != nil {
			if len(hints.ForZones) > 0 {
				zoneHints = sets.New[string]()
				for _, z := range hints.ForZones {
					zoneHints.Insert(z.Name)
				}
			}
			if len(hints.ForNodes) > 0 && nodeHintsEnabled {
				nodeHints = sets.New[string]()
				for _, n := range hints.ForNodes {
					nodeHints.Insert(n.Name)
				}
			}
		}

		info := newBaseEndpointInfoFromAddr(ip, portNum, isLocal, ready, serving, terminating, zoneHints, nodeHints)
		// The same IP can appear twice: while an endpoint moves between
		// slices (either copy will do; the next update settles it), or when a
		// new pod reuses a terminating pod's IP, where the live pod must win.
		if _, exists := set[info.String()]; !exists || !terminating {
			made := cache.makeEndpointInfo(info, spn)
			if made == nil {
				// A nil entry would panic every consumer of the map; the
				// proxier's callback chose not to handle this endpoint.
				cache.logger.V(2).Info("Skipping endpoint the proxier declined", "endpointSlice", klog.KObj(slice),
					"field", "endpoints["+strconv.Itoa(i)+"]", "endpoint", info.String())
				continue
			}
			set[info.String()] = made
		}
	}
}

// parseEndpointIP parses an endpoint address as the API server's validation
// does (leading zeros tolerated in IPv4 for compatibility), returning IPv4
// and IPv4-mapped IPv6 addresses as IPv4. Scoped addresses are rejected:
// a zone cannot be programmed into any proxier's rules.
func parseEndpointIP(s string) (netip.Addr, bool) {
	addr, err := netip.ParseAddr(s)
	if err != nil {
		ip := netutils.ParseIPSloppy(s)
		if ip == nil {
			return netip.Addr{}, false
		}
		addr, _ = netip.AddrFromSlice(ip)
	}
	if addr.Zone() != "" {
		return netip.Addr{}, false
	}
	return addr.Unmap(), true
}

// isIPv6Family reports whether family is the IPv6 family.
func isIPv6Family(family v1.IPFamily) bool { return family == v1.IPv6Protocol }
