package proxy

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/config"
)

var _ interface {
	config.ServiceHandler
	config.EndpointSliceHandler
	config.NodeTopologyHandler
} = &TrackerHandlers{}

type handlerCalls struct {
	queued, syncedNow int
	topology          map[string]string
}

func newTestHandlers() (*TrackerHandlers, *handlerCalls) {
	c := &handlerCalls{}
	h := NewTrackerHandlers(
		NewServiceChangeTracker(v1.IPv4Protocol, nil, nil),
		NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil),
		func() { c.queued++ },
		func() { c.syncedNow++ },
		func(labels map[string]string) { c.topology = labels },
	)
	return h, c
}

func TestTrackerHandlers(t *testing.T) {
	web := svc("ns", "web", func(s *v1.Service) {
		s.Spec.ClusterIP = "172.30.0.10"
		s.Spec.Ports = []v1.ServicePort{port("http", v1.ProtocolTCP, 80, 0)}
	})
	web2 := web.DeepCopy()
	web2.Spec.Ports[0].Port = 8080
	eps := slice("ns", "web", "web-1", []string{"10.0.0.1"}, "http:80/TCP")
	eps2 := slice("ns", "web", "web-1", []string{"10.0.0.2"}, "http:80/TCP")

	for _, tc := range []struct {
		name string
		// events run in order; wantQueued/wantNow are the totals after them
		events                func(h *TrackerHandlers)
		wantQueued, wantNow   int
		wantInitialized       bool
		wantPendingServices   int
		wantPendingEndpoints  int
		wantTopologyRecording bool
	}{
		{
			name: "changes before the informers synced are recorded, not synced",
			events: func(h *TrackerHandlers) {
				h.OnServiceAdd(web)
				h.OnEndpointSliceAdd(eps)
			},
			wantPendingServices: 1, wantPendingEndpoints: 1,
		},
		{
			name: "one informer synced is not enough",
			events: func(h *TrackerHandlers) {
				h.OnServiceSynced()
				h.OnServiceAdd(web)
			},
			wantNow: 1, wantPendingServices: 1,
		},
		{
			name: "both synced: first sync at once, later changes queued",
			events: func(h *TrackerHandlers) {
				h.OnEndpointSlicesSynced()
				h.OnServiceSynced()
				h.OnServiceAdd(web)
				h.OnServiceUpdate(web, web2)
				h.OnEndpointSliceAdd(eps)
				h.OnEndpointSliceUpdate(eps, eps2)
			},
			wantNow: 2, wantQueued: 4, wantInitialized: true,
		},
		{
			name: "deleting a synced Service queues a sync",
			events: func(h *TrackerHandlers) {
				h.OnServiceSynced()
				h.OnEndpointSlicesSynced()
				h.OnServiceAdd(web)
				_ = ServicePortMap{}.Update(h.serviceChanges)
				h.OnServiceDelete(web)
			},
			wantNow: 2, wantQueued: 2, wantInitialized: true,
		},
		{
			name: "deleting a slice that was synced queues a sync",
			events: func(h *TrackerHandlers) {
				h.OnServiceSynced()
				h.OnEndpointSlicesSynced()
				h.OnEndpointSliceAdd(eps)
				_ = EndpointsMap{}.Update(h.endpointsChanges)
				h.OnEndpointSliceDelete(eps)
			},
			wantNow: 2, wantQueued: 2, wantInitialized: true,
		},
		{
			name: "an update that changes nothing queues nothing",
			events: func(h *TrackerHandlers) {
				h.OnServiceSynced()
				h.OnEndpointSlicesSynced()
				h.OnServiceUpdate(web, web.DeepCopy())
			},
			wantNow: 2, wantInitialized: true,
		},
		{
			name: "topology change is stored, then queued",
			events: func(h *TrackerHandlers) {
				h.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})
			},
			wantQueued: 1, wantTopologyRecording: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, c := newTestHandlers()
			tc.events(h)
			if c.queued != tc.wantQueued || c.syncedNow != tc.wantNow {
				t.Errorf("QueueSync %d times, SyncNow %d times; want %d and %d", c.queued, c.syncedNow, tc.wantQueued, tc.wantNow)
			}
			if h.Initialized() != tc.wantInitialized {
				t.Errorf("Initialized() = %v, want %v", h.Initialized(), tc.wantInitialized)
			}
			// Whatever happened before the informers synced must still be
			// there for the first sync.
			if got := (ServicePortMap{}).Update(h.serviceChanges).UpdatedServices.Len(); tc.wantPendingServices > 0 && got != tc.wantPendingServices {
				t.Errorf("%d pending service changes, want %d", got, tc.wantPendingServices)
			}
			if got := (EndpointsMap{}).Update(h.endpointsChanges).UpdatedServices.Len(); tc.wantPendingEndpoints > 0 && got != tc.wantPendingEndpoints {
				t.Errorf("%d pending endpoint changes, want %d", got, tc.wantPendingEndpoints)
			}
			if tc.wantTopologyRecording && c.topology[v1.LabelTopologyZone] != "z1" {
				t.Errorf("topology labels not handed over: %v", c.topology)
			}
		})
	}
}
