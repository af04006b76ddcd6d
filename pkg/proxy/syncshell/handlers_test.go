package syncshell

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/config"
)

var _ interface {
	config.ServiceHandler
	config.EndpointSliceHandler
	config.NodeTopologyHandler
	proxy.Provider
} = &Shell{}

func TestHandlers(t *testing.T) {
	web := service("web", "172.30.0.10", nil)
	web2 := web.DeepCopy()
	web2.Spec.Ports[0].Port = 8080
	eps := slice("web", endpoint{ip: "10.0.0.1", node: node, ready: true})
	eps2 := slice("web", endpoint{ip: "10.0.0.2", node: node, ready: true})

	for _, tc := range []struct {
		name string
		// syncAtOnce sets Options.SyncWhenInitialized.
		syncAtOnce bool
		events     func(s *Shell)
		// wantQueued counts Sync requests (each reports QueuedUpdate),
		// wantSynced the backend syncs; both are totals after events.
		wantQueued, wantSynced int
		wantInitialized        bool
		// changes the trackers hold for the next sync
		wantPendingServices, wantPendingEndpoints int
	}{
		{
			name: "changes before the informers listed are recorded, not synced",
			events: func(s *Shell) {
				s.OnServiceAdd(web)
				s.OnEndpointSliceAdd(eps)
			},
			wantPendingServices: 1, wantPendingEndpoints: 1,
		},
		{
			name:       "one informer listed is not enough",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnServiceAdd(web)
			},
			wantPendingServices: 1,
		},
		{
			name:       "both listed: first sync at once, later changes queued",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnEndpointSlicesSynced()
				s.OnServiceSynced()
				s.OnServiceAdd(web)
				s.OnServiceUpdate(web, web2)
				s.OnEndpointSliceAdd(eps)
				s.OnEndpointSliceUpdate(eps, eps2)
			},
			wantSynced: 1, wantQueued: 4, wantInitialized: true,
			wantPendingServices: 1, wantPendingEndpoints: 1,
		},
		{
			name: "both listed without SyncWhenInitialized: the first sync is queued",
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
			},
			wantQueued: 1, wantInitialized: true,
		},
		{
			name:       "deleting a Service that was synced queues a sync",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceAdd(web)
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnServiceDelete(web)
			},
			wantSynced: 1, wantQueued: 1, wantInitialized: true, wantPendingServices: 1,
		},
		{
			name:       "deleting a slice that was synced queues a sync",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnEndpointSliceAdd(eps)
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnEndpointSliceDelete(eps)
			},
			wantSynced: 1, wantQueued: 1, wantInitialized: true, wantPendingEndpoints: 1,
		},
		{
			name:       "an update that changes nothing queues nothing",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnServiceUpdate(web, web.DeepCopy())
			},
			wantSynced: 1, wantInitialized: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &recorder{}
			h := &healthCounter{}
			s := newShell(t, b, func(o *Options) {
				o.SyncWhenInitialized = tc.syncAtOnce
				o.Health = h
			})
			tc.events(s)
			if h.queued != tc.wantQueued || b.calls() != tc.wantSynced {
				t.Errorf("%d syncs queued and %d run; want %d and %d", h.queued, b.calls(), tc.wantQueued, tc.wantSynced)
			}
			if s.Initialized() != tc.wantInitialized {
				t.Errorf("Initialized() = %v, want %v", s.Initialized(), tc.wantInitialized)
			}
			// Whatever happened before the informers listed must still be
			// there for the first sync.
			if got := (proxy.ServicePortMap{}).Update(s.serviceChanges).UpdatedServices.Len(); got != tc.wantPendingServices {
				t.Errorf("%d pending service changes, want %d", got, tc.wantPendingServices)
			}
			if got := (proxy.EndpointsMap{}).Update(s.endpointsChanges).UpdatedServices.Len(); got != tc.wantPendingEndpoints {
				t.Errorf("%d pending endpoint changes, want %d", got, tc.wantPendingEndpoints)
			}
		})
	}
}

func TestTopologyChangeIsQueuedAndMakesTheNextSyncFull(t *testing.T) {
	b := &recorder{}
	h := &healthCounter{}
	s := newShell(t, b, func(o *Options) { o.Health = h })
	initialize(s)
	syncNow(t, s)
	queued := h.queued
	s.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})
	if h.queued != queued+1 {
		t.Errorf("topology change queued %d syncs, want 1", h.queued-queued)
	}
	if !s.NeedsFullSync() {
		t.Error("the sync after a topology change is not full")
	}
	s.mu.Lock()
	zone := s.topology[v1.LabelTopologyZone]
	s.mu.Unlock()
	if zone != "z1" {
		t.Errorf("topology labels not stored: zone %q", zone)
	}
}
