package testing

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
)

// Recorder is a source handler (config.ServiceHandler, EndpointSliceHandler
// and NodeTopologyHandler) that writes each event as a line such as
// "svc-add ns/name" or "slices-synced", for tests of sources. Embed it and add
// the node methods to record Node events too. It is safe for concurrent use.
type Recorder struct {
	mu     sync.Mutex
	events []string
}

// Add records one event line.
func (r *Recorder) Add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

// Take returns the events recorded since the last Take and forgets them.
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.events
	r.events = nil
	return e
}

// Snapshot returns a copy of the events not yet taken.
func (r *Recorder) Snapshot() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// WaitFor waits up to 30 seconds for event to be recorded, failing t if it is not.
func (r *Recorder) WaitFor(t testing.TB, event string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !slices.Contains(r.Snapshot(), event) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q event; got %v", event, r.Snapshot())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *Recorder) OnServiceAdd(s *v1.Service)       { r.Add("svc-add %s/%s", s.Namespace, s.Name) }
func (r *Recorder) OnServiceUpdate(_, s *v1.Service) { r.Add("svc-update %s/%s", s.Namespace, s.Name) }
func (r *Recorder) OnServiceDelete(s *v1.Service)    { r.Add("svc-delete %s/%s", s.Namespace, s.Name) }
func (r *Recorder) OnServiceSynced()                 { r.Add("svc-synced") }
func (r *Recorder) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	r.Add("slice-add %s/%s", s.Namespace, s.Name)
}
func (r *Recorder) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) {
	r.Add("slice-update %s/%s", s.Namespace, s.Name)
}
func (r *Recorder) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	r.Add("slice-delete %s/%s", s.Namespace, s.Name)
}
func (r *Recorder) OnEndpointSlicesSynced()              { r.Add("slices-synced") }
func (r *Recorder) OnTopologyChange(l map[string]string) { r.Add("topology %v", l) }
