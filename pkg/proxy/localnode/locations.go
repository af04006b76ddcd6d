package localnode

import (
	"slices"
	"sync"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/proxy"
)

// Locations remembers the node and zone of every endpoint address in the EndpointSlices it
// is shown, because the brain's endpoints carry only whether they are local. Feed it every
// slice event before the EndpointsChangeTracker, and pass its MakeEndpoint to
// proxy.NewEndpointsChangeTracker: the endpoints that tracker builds then implement
// EndpointLocation.
//
// It is safe for concurrent use.
type Locations struct {
	mu sync.Mutex
	// slices holds, per Service and per slice name, each address's location.
	slices map[types.NamespacedName]map[string]map[string]location
}

type location struct{ node, zone string }

// NewLocations returns an empty index.
func NewLocations() *Locations {
	return &Locations{slices: map[types.NamespacedName]map[string]map[string]location{}}
}

// Update records slice, or forgets it if removed. Slices without a service label are
// ignored, as the brain ignores them.
func (l *Locations) Update(slice *discovery.EndpointSlice, removed bool) {
	if slice == nil {
		return
	}
	svc := slice.Labels[discovery.LabelServiceName]
	if svc == "" {
		return
	}
	nn := types.NamespacedName{Namespace: slice.Namespace, Name: svc}
	var locs map[string]location
	if !removed {
		locs = make(map[string]location, len(slice.Endpoints))
		for i := range slice.Endpoints {
			ep := &slice.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			ip := netutils.ParseIPSloppy(ep.Addresses[0])
			if ip == nil {
				continue
			}
			var loc location
			if ep.NodeName != nil {
				loc.node = *ep.NodeName
			}
			if ep.Zone != nil {
				loc.zone = *ep.Zone
			}
			locs[ip.String()] = loc
		}
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	bySlice := l.slices[nn]
	if removed {
		delete(bySlice, slice.Name)
		if len(bySlice) == 0 {
			delete(l.slices, nn)
		}
		return
	}
	if bySlice == nil {
		bySlice = map[string]map[string]location{}
		l.slices[nn] = bySlice
	}
	bySlice[slice.Name] = locs
}

// Lookup returns the node and zone of address ip (in net.IP.String form) of service svc.
// When the address is in several slices (it is moving between them), the slice whose name
// sorts first wins, so the answer does not depend on event order.
func (l *Locations) Lookup(svc types.NamespacedName, ip string) (node, zone string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	bySlice := l.slices[svc]
	if len(bySlice) == 1 {
		for _, locs := range bySlice {
			loc := locs[ip]
			return loc.node, loc.zone
		}
	}
	names := make([]string, 0, len(bySlice))
	for name := range bySlice {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if loc, ok := bySlice[name][ip]; ok {
			return loc.node, loc.zone
		}
	}
	return "", ""
}

// MakeEndpoint is a makeEndpointInfo callback for proxy.NewEndpointsChangeTracker that
// adds the endpoint's node and zone.
func (l *Locations) MakeEndpoint(info *proxy.BaseEndpointInfo, spn *proxy.ServicePortName) proxy.Endpoint {
	node, zone := l.Lookup(spn.NamespacedName, info.IP())
	if node == "" && zone == "" {
		return info
	}
	return &locatedEndpoint{BaseEndpointInfo: info, node: node, zone: zone}
}

type locatedEndpoint struct {
	*proxy.BaseEndpointInfo
	node, zone string
}

func (e *locatedEndpoint) NodeName() string { return e.node }
func (e *locatedEndpoint) Zone() string     { return e.zone }
