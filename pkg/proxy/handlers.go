package proxy

import (
	"sync"
	"sync/atomic"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// TrackerHandlers is the event half of Provider for a proxier that keeps its
// state in a ServiceChangeTracker and an EndpointsChangeTracker. This module's
// proxiers get it through their sync shell (pkg/proxy/syncshell), which embeds
// it; a proxier written directly against Provider (as Calico's is) embeds the
// *TrackerHandlers returned by NewTrackerHandlers and still implements Sync,
// SyncLoop and OnServiceCIDRsChanged itself.
//
// It gates syncing on the informers: changes are recorded from the start,
// but a sync is only requested once both Services and EndpointSlices have
// been listed (Initialized), so that the first rules are never written from
// half a picture. When either list completes, syncNow runs a sync at once
// rather than waiting for the rate limiter (the proxier's sync is expected
// to do nothing until Initialized).
type TrackerHandlers struct {
	serviceChanges   *ServiceChangeTracker
	endpointsChanges *EndpointsChangeTracker
	queueSync        func()
	syncNow          func()
	topologyChanged  func(topologyLabels map[string]string)

	mu                   sync.Mutex
	servicesSynced       bool
	endpointSlicesSynced bool
	initialized          atomic.Bool
}

// NewTrackerHandlers returns handlers that record changes in services and
// endpoints. queueSync asks for a (rate-limited) sync, typically the
// proxier's Sync; syncNow syncs synchronously; topologyChanged stores the
// node's new topology labels (and marks that every Service needs
// re-evaluating) before queueSync is called.
func NewTrackerHandlers(services *ServiceChangeTracker, endpoints *EndpointsChangeTracker, queueSync, syncNow func(), topologyChanged func(topologyLabels map[string]string)) *TrackerHandlers {
	return &TrackerHandlers{
		serviceChanges:   services,
		endpointsChanges: endpoints,
		queueSync:        queueSync,
		syncNow:          syncNow,
		topologyChanged:  topologyChanged,
	}
}

// Initialized reports whether both Services and EndpointSlices have synced.
func (h *TrackerHandlers) Initialized() bool { return h.initialized.Load() }

// OnServiceAdd implements config.ServiceHandler.
func (h *TrackerHandlers) OnServiceAdd(service *v1.Service) { h.OnServiceUpdate(nil, service) }

// OnServiceUpdate implements config.ServiceHandler.
func (h *TrackerHandlers) OnServiceUpdate(oldService, service *v1.Service) {
	if h.serviceChanges.Update(oldService, service) && h.initialized.Load() {
		h.queueSync()
	}
}

// OnServiceDelete implements config.ServiceHandler.
func (h *TrackerHandlers) OnServiceDelete(service *v1.Service) { h.OnServiceUpdate(service, nil) }

// OnServiceSynced implements config.ServiceHandler.
func (h *TrackerHandlers) OnServiceSynced() {
	h.informerSynced(&h.servicesSynced, &h.endpointSlicesSynced)
}

// informerSynced records that one informer has listed everything; the other
// one decides whether syncing may start. Once per informer and lifetime, so
// it syncs right away instead of waiting for the runner.
func (h *TrackerHandlers) informerSynced(this, other *bool) {
	h.mu.Lock()
	*this = true
	h.initialized.Store(*other)
	h.mu.Unlock()
	h.syncNow()
}

// OnEndpointSliceAdd implements config.EndpointSliceHandler.
func (h *TrackerHandlers) OnEndpointSliceAdd(endpointSlice *discovery.EndpointSlice) {
	h.endpointSliceChanged(endpointSlice, false)
}

// OnEndpointSliceUpdate implements config.EndpointSliceHandler.
func (h *TrackerHandlers) OnEndpointSliceUpdate(_, endpointSlice *discovery.EndpointSlice) {
	h.endpointSliceChanged(endpointSlice, false)
}

// OnEndpointSliceDelete implements config.EndpointSliceHandler.
func (h *TrackerHandlers) OnEndpointSliceDelete(endpointSlice *discovery.EndpointSlice) {
	h.endpointSliceChanged(endpointSlice, true)
}

func (h *TrackerHandlers) endpointSliceChanged(endpointSlice *discovery.EndpointSlice, removed bool) {
	if h.endpointsChanges.EndpointSliceUpdate(endpointSlice, removed) && h.initialized.Load() {
		h.queueSync()
	}
}

// OnEndpointSlicesSynced implements config.EndpointSliceHandler.
func (h *TrackerHandlers) OnEndpointSlicesSynced() {
	h.informerSynced(&h.endpointSlicesSynced, &h.servicesSynced)
}

// OnTopologyChange implements config.NodeTopologyHandler.
func (h *TrackerHandlers) OnTopologyChange(topologyLabels map[string]string) {
	h.topologyChanged(topologyLabels)
	h.queueSync()
}
