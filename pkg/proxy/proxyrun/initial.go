package proxyrun

import (
	"context"
	"errors"
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// ErrNotSynced is returned by SyncReport before the source has delivered its initial
// Services and EndpointSlices: a sync then would hand the backend a half-loaded State, so
// none runs.
var ErrNotSynced = errors.New("proxyrun: the source has not delivered its initial objects yet")

// checkInitial closes the initial channel once every family has both synced signals.
func (p *Proxy) checkInitial() {
	if p.synced() {
		p.initialOnce.Do(func() { close(p.initial) })
	}
}

// Synced returns a channel closed once the source has delivered its initial Services and
// EndpointSlices (both synced signals) to every family; from then on Sync and SyncReport
// compute and program complete States. A source that is run with `go src.Run(ctx, p)`
// delivers them on its own goroutine, so wait for this before syncing by hand.
func (p *Proxy) Synced() <-chan struct{} { return p.initial }

// WaitForInitial blocks until Synced is closed or ctx is done; it returns ctx's error in
// the second case.
func (p *Proxy) WaitForInitial(ctx context.Context) error {
	select {
	case <-p.initial:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("proxyrun: waiting for the source's initial objects: %w", context.Cause(ctx))
	}
}

// SyncReport is Sync that says what it did: changed is true when the backend was handed a
// new State of at least one family (a retry of an unchanged State after a failure does
// not count). Before the source has delivered its initial objects it does nothing and
// returns ErrNotSynced, where Sync returns nil. If Run is syncing concurrently, a change
// that Run's loop handed over while SyncReport ran is reported too.
//
// Each family syncs on its own: an error for one does not stop the others, and changed
// covers every family that succeeded.
func (p *Proxy) SyncReport(ctx context.Context) (changed bool, err error) {
	if !p.synced() {
		return false, ErrNotSynced
	}
	return p.syncFamilies(ctx)
}

// syncFamilies syncs every family and reports whether one got a new State.
func (p *Proxy) syncFamilies(ctx context.Context) (changed bool, err error) {
	var errs []error
	for _, f := range p.families {
		_, before := p.State(f.name)
		if err := f.shell.SyncContext(ctx); err != nil {
			errs = append(errs, err)
		}
		if _, after := p.State(f.name); after != before {
			changed = true
		}
	}
	return changed, errors.Join(errs...)
}

// OnNodeChange implements source.NodeHandler: the Node goes to Options.Node.
func (p *Proxy) OnNodeChange(node *v1.Node) {
	if p.opts.Node != nil {
		p.opts.Node.OnNodeChange(node)
	}
}

// OnNodeDelete implements source.NodeHandler.
func (p *Proxy) OnNodeDelete(node *v1.Node) {
	if p.opts.Node != nil {
		p.opts.Node.OnNodeDelete(node)
	}
}

// OnNodeSynced implements source.NodeHandler.
func (p *Proxy) OnNodeSynced() {
	if p.opts.Node != nil {
		p.opts.Node.OnNodeSynced()
	}
}
