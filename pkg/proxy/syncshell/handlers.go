package syncshell

import (
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// The event half of proxy.Provider. Changes are recorded in the trackers from
// the start, but a sync is only queued once both Services and EndpointSlices
// have been listed (Initialized): the first rules must never be written from
// half a picture. When either list completes, informerSynced runs, and once
// both have, the first sync follows (at once with SyncWhenInitialized).

// Initialized reports whether both Services and EndpointSlices have synced.
func (s *Shell) Initialized() bool { return s.initialized.Load() }

// OnServiceAdd implements config.ServiceHandler.
func (s *Shell) OnServiceAdd(service *v1.Service) { s.OnServiceUpdate(nil, service) }

// OnServiceUpdate implements config.ServiceHandler.
func (s *Shell) OnServiceUpdate(oldService, service *v1.Service) {
	if s.serviceChanges.Update(oldService, service) && s.initialized.Load() {
		s.Sync()
	}
}

// OnServiceDelete implements config.ServiceHandler.
func (s *Shell) OnServiceDelete(service *v1.Service) { s.OnServiceUpdate(service, nil) }

// OnServiceSynced implements config.ServiceHandler.
func (s *Shell) OnServiceSynced() { s.listed(&s.servicesListed, &s.slicesListed) }

// OnEndpointSliceAdd implements config.EndpointSliceHandler.
func (s *Shell) OnEndpointSliceAdd(slice *discovery.EndpointSlice) { s.sliceChanged(slice, false) }

// OnEndpointSliceUpdate implements config.EndpointSliceHandler.
func (s *Shell) OnEndpointSliceUpdate(_, slice *discovery.EndpointSlice) {
	s.sliceChanged(slice, false)
}

// OnEndpointSliceDelete implements config.EndpointSliceHandler.
func (s *Shell) OnEndpointSliceDelete(slice *discovery.EndpointSlice) { s.sliceChanged(slice, true) }

// OnEndpointSlicesSynced implements config.EndpointSliceHandler.
func (s *Shell) OnEndpointSlicesSynced() { s.listed(&s.slicesListed, &s.servicesListed) }

// OnTopologyChange implements config.NodeTopologyHandler.
func (s *Shell) OnTopologyChange(topologyLabels map[string]string) {
	s.setTopology(topologyLabels)
	s.Sync()
}

func (s *Shell) sliceChanged(slice *discovery.EndpointSlice, removed bool) {
	if s.endpointsChanges.EndpointSliceUpdate(slice, removed) && s.initialized.Load() {
		s.Sync()
	}
}

// listed records that one informer has listed everything; whether the other
// one has decides if syncing may start. Each informer calls it once per
// lifetime, so the first sync need not wait for the runner's next turn.
func (s *Shell) listed(this, other *bool) {
	s.listedMu.Lock()
	*this = true
	s.initialized.Store(*other)
	s.listedMu.Unlock()
	s.informerSynced()
}
