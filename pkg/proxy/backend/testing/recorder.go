// Package testing has recording fakes of both backend styles, for tests of code that
// drives a backend (proxyrun, adapters, sources) and for third parties testing theirs.
//
// Allowed imports: pkg/proxy/backend, pkg/proxy/localnode and the standard library.
package testing

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// FullState records every State it is synced with. Set Err to make Sync fail (the State
// is still recorded, as an attempt). It is safe for concurrent use.
type FullState struct {
	mu       sync.Mutex
	attempts []*localnode.State
	synced   []*localnode.State
	err      error
	notify   chan struct{}
}

var _ backend.FullState = &FullState{}

// NewFullState returns an empty recorder.
func NewFullState() *FullState { return &FullState{notify: make(chan struct{}, 1)} }

// Sync implements backend.FullState.
func (f *FullState) Sync(_ context.Context, st *localnode.State) error {
	f.mu.Lock()
	defer func() {
		f.mu.Unlock()
		select {
		case f.notify <- struct{}{}:
		default:
		}
	}()
	f.attempts = append(f.attempts, st)
	if f.err != nil {
		return f.err
	}
	f.synced = append(f.synced, st)
	return nil
}

// SetError makes later Syncs fail with err (nil to succeed again).
func (f *FullState) SetError(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

// Synced returns the States synced successfully, oldest first.
func (f *FullState) Synced() []*localnode.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*localnode.State(nil), f.synced...)
}

// Attempts returns every State Sync was called with, oldest first.
func (f *FullState) Attempts() []*localnode.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*localnode.State(nil), f.attempts...)
}

// Last returns the last State of family synced successfully, or nil.
func (f *FullState) Last(family localnode.Family) *localnode.State {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := len(f.synced) - 1; i >= 0; i-- {
		if f.synced[i].Family == family {
			return f.synced[i]
		}
	}
	return nil
}

// Wait blocks until cond holds for the synced States or ctx is done, and reports whether
// cond held.
func (f *FullState) Wait(ctx context.Context, cond func(synced []*localnode.State) bool) bool {
	for {
		if cond(f.Synced()) {
			return true
		}
		select {
		case <-ctx.Done():
			return cond(f.Synced())
		case <-f.notify:
		}
	}
}

// Incremental records calls as strings such as "set-svc IPv4 ns/web:http/TCP",
// "set-ep IPv4 ns/web:http/TCP 10.0.0.1:80", "del-ep ...", "del-svc ..." and "sync". Set
// Err to make Sync fail. It is safe for concurrent use.
type Incremental struct {
	mu    sync.Mutex
	calls []string
	err   error
}

var _ backend.Incremental = &Incremental{}

func (r *Incremental) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

// SetService implements backend.Incremental.
func (r *Incremental) SetService(f localnode.Family, svc *backend.ServiceInfo) {
	r.add(fmt.Sprintf("set-svc %s %s", f, svc.Name))
}

// DeleteService implements backend.Incremental.
func (r *Incremental) DeleteService(f localnode.Family, name localnode.PortName) {
	r.add(fmt.Sprintf("del-svc %s %s", f, name))
}

// SetEndpoint implements backend.Incremental.
func (r *Incremental) SetEndpoint(f localnode.Family, svc localnode.PortName, ep localnode.Endpoint) {
	r.add(fmt.Sprintf("set-ep %s %s %s", f, svc, ep))
}

// DeleteEndpoint implements backend.Incremental.
func (r *Incremental) DeleteEndpoint(f localnode.Family, svc localnode.PortName, addr netip.AddrPort) {
	r.add(fmt.Sprintf("del-ep %s %s %s", f, svc, addr))
}

// Sync implements backend.Incremental.
func (r *Incremental) Sync(context.Context) error {
	r.add("sync")
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// SetError makes later Syncs fail with err.
func (r *Incremental) SetError(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
}

// Take returns the calls recorded since the last Take.
func (r *Incremental) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}
