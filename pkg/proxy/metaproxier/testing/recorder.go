// Package testing provides a recording proxy.Provider for tests of code that
// drives Providers (the metaproxier, the binary's event plumbing).
//
// Allowed imports: the standard library, k8s.io/api and k8s.io/kube-proxy/pkg/proxy.
package testing

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy"
)

// RecordingProvider is a proxy.Provider that records every call as a string
// such as "OnServiceAdd(ns/name)". It is safe for concurrent use.
type RecordingProvider struct {
	mu    sync.Mutex
	calls []string

	// SyncLoopStarted, if non-nil, is closed by the first SyncLoop call.
	SyncLoopStarted chan struct{}
	// SyncLoopBlock, if non-nil, makes SyncLoop block until it is closed,
	// mimicking a real proxier whose SyncLoop never returns.
	SyncLoopBlock chan struct{}
	started       bool
}

var _ proxy.Provider = &RecordingProvider{}

// NewRecordingProvider returns an empty recorder.
func NewRecordingProvider() *RecordingProvider { return &RecordingProvider{} }

func (r *RecordingProvider) record(method string, args ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("%s(%s)", method, strings.Join(args, ", ")))
}

// Calls returns the calls recorded since the last Reset.
func (r *RecordingProvider) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

// Reset forgets recorded calls.
func (r *RecordingProvider) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = nil
}

func objName(namespace, name string) string { return namespace + "/" + name }

func svcName(s *v1.Service) string {
	if s == nil {
		return "<nil>"
	}
	return objName(s.Namespace, s.Name)
}

func sliceName(s *discovery.EndpointSlice) string {
	if s == nil {
		return "<nil>"
	}
	return objName(s.Namespace, s.Name)
}

// Sync records the call.
func (r *RecordingProvider) Sync() { r.record("Sync") }

// SyncLoop records the call, signals SyncLoopStarted and blocks on SyncLoopBlock.
func (r *RecordingProvider) SyncLoop() {
	r.record("SyncLoop")
	r.mu.Lock()
	if r.SyncLoopStarted != nil && !r.started {
		r.started = true
		close(r.SyncLoopStarted)
	}
	block := r.SyncLoopBlock
	r.mu.Unlock()
	if block != nil {
		<-block
	}
}

// OnServiceAdd records the call.
func (r *RecordingProvider) OnServiceAdd(s *v1.Service) { r.record("OnServiceAdd", svcName(s)) }

// OnServiceUpdate records the call.
func (r *RecordingProvider) OnServiceUpdate(o, s *v1.Service) {
	r.record("OnServiceUpdate", svcName(o), svcName(s))
}

// OnServiceDelete records the call.
func (r *RecordingProvider) OnServiceDelete(s *v1.Service) { r.record("OnServiceDelete", svcName(s)) }

// OnServiceSynced records the call.
func (r *RecordingProvider) OnServiceSynced() { r.record("OnServiceSynced") }

// OnEndpointSliceAdd records the call.
func (r *RecordingProvider) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	r.record("OnEndpointSliceAdd", sliceName(s))
}

// OnEndpointSliceUpdate records the call.
func (r *RecordingProvider) OnEndpointSliceUpdate(o, s *discovery.EndpointSlice) {
	r.record("OnEndpointSliceUpdate", sliceName(o), sliceName(s))
}

// OnEndpointSliceDelete records the call.
func (r *RecordingProvider) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	r.record("OnEndpointSliceDelete", sliceName(s))
}

// OnEndpointSlicesSynced records the call.
func (r *RecordingProvider) OnEndpointSlicesSynced() { r.record("OnEndpointSlicesSynced") }

// OnTopologyChange records the call with the labels sorted by key.
func (r *RecordingProvider) OnTopologyChange(labels map[string]string) {
	var kv []string
	for k, v := range labels {
		kv = append(kv, k+"="+v)
	}
	slices.Sort(kv)
	r.record("OnTopologyChange", kv...)
}

// OnServiceCIDRsChanged records the call.
func (r *RecordingProvider) OnServiceCIDRsChanged(cidrs []string) {
	r.record("OnServiceCIDRsChanged", cidrs...)
}
