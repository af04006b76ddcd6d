package proxy

import (
	"reflect"
	"strconv"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// makeServicePortFunc lets a proxier wrap the standard per-port info in its
// own ServicePort type.
type makeServicePortFunc func(*v1.ServicePort, *v1.Service, *BaseServicePortInfo) ServicePort

// processServiceMapChangeFunc is told about every applied change; it must
// not modify the maps.
type processServiceMapChangeFunc func(previous, current ServicePortMap)

// ServiceChangeTracker accumulates Service changes between syncs, keyed by
// Service namespace/name. It is safe for concurrent use.
type ServiceChangeTracker struct {
	ipFamily                v1.IPFamily
	makeServiceInfo         makeServicePortFunc
	processServiceMapChange processServiceMapChangeFunc
	logger                  klog.Logger

	mu sync.Mutex
	// items holds, per Service, the state at the last Update of a
	// ServicePortMap (previous) and the latest state (current). Entries
	// whose previous and current are equal are dropped.
	items map[types.NamespacedName]*serviceChange
}

type serviceChange struct {
	previous ServicePortMap
	current  ServicePortMap
}

// NewServiceChangeTracker returns a tracker for ipFamily. Both callbacks may
// be nil: without makeServiceInfo the *BaseServicePortInfo is stored as is.
func NewServiceChangeTracker(ipFamily v1.IPFamily, makeServiceInfo makeServicePortFunc, processServiceMapChange processServiceMapChangeFunc) *ServiceChangeTracker {
	return &ServiceChangeTracker{
		ipFamily:                ipFamily,
		makeServiceInfo:         makeServiceInfo,
		processServiceMapChange: processServiceMapChange,
		logger:                  klog.Background().WithName("service-tracker"),
		items:                   map[types.NamespacedName]*serviceChange{},
	}
}

// Update records the change from previous to current (either, but not both,
// may be nil for add and delete). It returns true if the tracker holds any
// pending change afterwards, whether or not this call caused it.
func (sct *ServiceChangeTracker) Update(previous, current *v1.Service) bool {
	if previous == nil && current == nil {
		return false
	}
	svc := current
	if svc == nil {
		svc = previous
	}
	recordServiceChange()
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}

	// Converting is the expensive part; do it before taking the lock.
	currentMap := sct.serviceToServiceMap(current)

	sct.mu.Lock()
	defer sct.mu.Unlock()

	change, exists := sct.items[nn]
	if !exists {
		change = &serviceChange{previous: sct.serviceToServiceMap(previous)}
		sct.items[nn] = change
	}
	change.current = currentMap
	if reflect.DeepEqual(change.previous, change.current) {
		delete(sct.items, nn)
	} else if sct.logger.V(4).Enabled() {
		sct.logger.V(4).Info("Service updated ports", "service", klog.KObj(svc), "portCount", len(change.current))
	}
	setServiceChangesPending(len(sct.items))
	return len(sct.items) > 0
}

// serviceToServiceMap converts service into the ports this tracker's family
// programs. Services a proxier must not handle, or that are malformed beyond
// use, yield nil. service is never modified.
func (sct *ServiceChangeTracker) serviceToServiceMap(service *v1.Service) ServicePortMap {
	if service == nil || proxyutil.ShouldSkipService(service) {
		return nil
	}
	clusterIPStr := proxyutil.GetClusterIPByFamily(sct.ipFamily, service)
	if clusterIPStr == "" {
		return nil
	}
	clusterIP := netutils.ParseIPSloppy(clusterIPStr)
	if clusterIP == nil {
		sct.logger.Error(nil, "Skipping service with invalid cluster IP", "service", klog.KObj(service),
			"field", "spec.clusterIPs", "value", clusterIPStr)
		return nil
	}
	if proxyutil.GetIPFamilyFromIP(clusterIP) != sct.ipFamily {
		// IPFamilies and ClusterIPs disagree: the API server would have
		// rejected this, so the object did not come from it. Programming an
		// address of the wrong family would fail the whole sync.
		sct.logger.Error(nil, "Skipping service whose cluster IP is not of its declared family", "service", klog.KObj(service),
			"field", "spec.clusterIPs", "value", clusterIPStr, "ipFamily", sct.ipFamily)
		return nil
	}

	svcName := types.NamespacedName{Namespace: service.Namespace, Name: service.Name}
	m := make(ServicePortMap, len(service.Spec.Ports))
	for i := range service.Spec.Ports {
		port := &service.Spec.Ports[i]
		if !validProtocol(port.Protocol) {
			sct.logger.Error(nil, "Skipping service port with unsupported protocol", "service", klog.KObj(service),
				"field", "spec.ports["+strconv.Itoa(i)+"].protocol", "value", port.Protocol)
			continue
		}
		if port.Port <= 0 || port.Port > 65535 {
			sct.logger.Error(nil, "Skipping service port with invalid port number", "service", klog.KObj(service),
				"field", "spec.ports["+strconv.Itoa(i)+"].port", "value", port.Port)
			continue
		}
		spn := ServicePortName{NamespacedName: svcName, Port: port.Name, Protocol: port.Protocol}
		if _, dup := m[spn]; dup {
			sct.logger.Error(nil, "Service has duplicate port name and protocol, the last one wins", "service", klog.KObj(service),
				"field", "spec.ports["+strconv.Itoa(i)+"]", "value", spn.String())
		}
		base := newBaseServiceInfo(sct.logger, service, sct.ipFamily, clusterIP, port, i)
		if sct.makeServiceInfo == nil {
			m[spn] = base
			continue
		}
		info := sct.makeServiceInfo(port, service, base)
		if info == nil {
			// A nil entry would panic every consumer of the map; the
			// proxier's callback chose not to handle this port.
			sct.logger.V(2).Info("Skipping service port the proxier declined", "service", klog.KObj(service), "field", servicePortField(i))
			continue
		}
		m[spn] = info
	}
	return m
}

// ServicePortMap maps each service port to its state.
type ServicePortMap map[ServicePortName]ServicePort

// UpdateServiceMapResult describes what a ServicePortMap.Update changed.
type UpdateServiceMapResult struct {
	// UpdatedServices lists every Service added, changed or deleted since
	// the previous Update.
	UpdatedServices sets.Set[types.NamespacedName]
}

// HealthCheckNodePorts returns the health check node port of every service
// that has one.
func (sm ServicePortMap) HealthCheckNodePorts() map[types.NamespacedName]uint16 {
	ports := make(map[types.NamespacedName]uint16)
	for spn, info := range sm {
		if info == nil {
			continue
		}
		if p := info.HealthCheckNodePort(); p > 0 && p <= 65535 {
			ports[spn.NamespacedName] = uint16(p)
		}
	}
	return ports
}

// Update applies every change pending in sct to sm, calls the tracker's
// processServiceMapChange for each, and empties the tracker.
func (sm ServicePortMap) Update(sct *ServiceChangeTracker) UpdateServiceMapResult {
	result := UpdateServiceMapResult{UpdatedServices: sets.New[types.NamespacedName]()}
	if sct == nil {
		return result
	}

	sct.mu.Lock()
	defer sct.mu.Unlock()

	for nn, change := range sct.items {
		if sct.processServiceMapChange != nil {
			sct.processServiceMapChange(change.previous, change.current)
		}
		result.UpdatedServices.Insert(nn)

		for spn, info := range change.current {
			if sct.logger.V(4).Enabled() {
				if _, exists := sm[spn]; exists {
					sct.logger.V(4).Info("Updating existing service port", "portName", spn, "servicePort", info)
				} else {
					sct.logger.V(4).Info("Adding new service port", "portName", spn, "servicePort", info)
				}
			}
			sm[spn] = info
		}
		for spn := range change.previous {
			if _, stillThere := change.current[spn]; stillThere {
				continue
			}
			if _, exists := sm[spn]; exists {
				sct.logger.V(4).Info("Removing service port", "portName", spn)
				delete(sm, spn)
			} else {
				// sm was not built only from this tracker; worth knowing.
				sct.logger.Error(nil, "Service port does not exist", "portName", spn)
			}
		}
	}
	// Reallocate rather than clear: clearing costs the map's peak capacity,
	// which after the initial sync is every service.
	sct.items = map[types.NamespacedName]*serviceChange{}
	setServiceChangesPending(0)
	return result
}
