package proxyrun

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
)

// DefaultMaxSyncInterval is used when Options.MaxSyncInterval is 0: kube-proxy's default
// --iptables-sync-period.
const DefaultMaxSyncInterval = 30 * time.Second

// HealthRecorder is told when a family has a change queued and when it synced;
// *healthcheck.ProxyHealthServer implements it.
type HealthRecorder = syncshell.HealthRecorder

// Options configure a Proxy. The zero value runs IPv4 only, with no minimum interval
// between syncs.
type Options struct {
	// NodeName is this node: endpoints on it are local, and node hints name it.
	NodeName string
	// Families lists the IP families to proxy, primary first; IPv4 only when empty.
	Families []localnode.Family
	// MinSyncInterval folds changes arriving closer together than this into one sync
	// (kube-proxy's --*-min-sync-period, 1s by default there).
	MinSyncInterval time.Duration
	// MaxSyncInterval is the longest time between syncs even without changes; a sync
	// without change calls no backend. DefaultMaxSyncInterval when 0.
	MaxSyncInterval time.Duration
	// RetryInterval is how soon a failed sync is retried; MinSyncInterval, or 1s if that
	// is 0, when 0.
	RetryInterval time.Duration
	// Health, when set, hears of queued changes and successful syncs per family.
	Health HealthRecorder
	// ServiceHealth, when set for a family, is given that family's health-check node ports
	// and local endpoint counts after each successful sync.
	ServiceHealth map[localnode.Family]healthcheck.ServiceHealthServer
	// Node, when set, is given this node's Node object as the source delivers it (every
	// source of pkg/proxy/source does). Pass the &proxy.NodeManager{} that the
	// healthcheck.ProxyHealthServer in Health was built with: its /healthz answers 200
	// only once the Node is known and while it is not being deleted or tainted
	// ToBeDeletedByClusterAutoscaler, as kube-proxy's does.
	Node config.NodeHandler
}

// Stats count what a Proxy did, for measuring how much the node-local view filters.
type Stats struct {
	// Events is the number of object events received (adds, updates, deletes, topology
	// changes); synced signals are not counted.
	Events uint64
	// Syncs is the number of family syncs that ran.
	Syncs uint64
	// Revisions is the number of new States handed to the backend.
	Revisions uint64
	// BackendCalls counts backend Syncs, including retries; Failures those that failed.
	BackendCalls, Failures uint64
}

// Proxy connects a Source to a backend. It implements source.Handler.
//
// Each family runs on its own sync shell (k8s.io/kube-proxy/pkg/proxy/syncshell), the one
// kube-proxy's own proxiers use: the shell keeps the trackers, decides traffic policy and
// reports metrics and health; the Proxy turns each shell update into a localnode.State and
// hands it to the backend when it changed.
type Proxy struct {
	opts     Options
	backend  backend.FullState
	families []*family
	locs     *localnode.Locations

	// backendMu keeps the families' shells, which sync on their own goroutines, from
	// calling the backend concurrently: backend.FullState promises one call at a time,
	// and the Differ relies on it (its Incremental's Sync is a per-family barrier).
	backendMu sync.Mutex

	events, syncs, revisions, calls, failures atomic.Uint64

	// initial is closed once every family has the source's initial objects.
	initial     chan struct{}
	initialOnce sync.Once
}

// family is one IP family: its shell and, as the shell's backend, what was last computed
// and synced.
type family struct {
	proxy *Proxy
	name  localnode.Family
	shell *syncshell.Shell
	comp  *localnode.Computer

	// Touched only by Sync, which the shell serialises.
	computed *localnode.State
	failed   bool

	mu       sync.Mutex // guards last and revision, which State reads
	last     *localnode.State
	revision uint64
}

var (
	_ source.Handler     = &Proxy{}
	_ source.NodeHandler = &Proxy{}
)

// New returns a Proxy feeding b. It does nothing until Run, or until the caller delivers
// events and calls Sync itself.
func New(b backend.FullState, opts Options) (*Proxy, error) {
	if b == nil {
		return nil, errors.New("proxyrun: nil backend")
	}
	if len(opts.Families) == 0 {
		opts.Families = []localnode.Family{localnode.IPv4}
	}
	opts.MaxSyncInterval = cmp.Or(opts.MaxSyncInterval, DefaultMaxSyncInterval)
	opts.RetryInterval = cmp.Or(opts.RetryInterval, opts.MinSyncInterval, time.Second)
	p := &Proxy{opts: opts, backend: b, locs: localnode.NewLocations(), initial: make(chan struct{})}
	for _, f := range opts.Families {
		// The shell refuses an unknown family and bad intervals.
		if slices.ContainsFunc(p.families, func(x *family) bool { return x.name == f }) {
			return nil, fmt.Errorf("proxyrun: IP family %q listed twice", f)
		}
		fam := &family{proxy: p, name: f, comp: localnode.NewComputer(f)}
		var err error
		fam.shell, err = syncshell.New(context.Background(), syncshell.Options{
			Family:        v1.IPFamily(f),
			NodeName:      opts.NodeName,
			MakeEndpoint:  p.locs.MakeEndpoint,
			MinInterval:   opts.MinSyncInterval,
			RetryInterval: opts.RetryInterval,
			MaxInterval:   opts.MaxSyncInterval,
			Health:        opts.Health,
			ServiceHealth: opts.ServiceHealth[f],
		}, fam)
		if err != nil {
			return nil, fmt.Errorf("proxyrun: %w", err)
		}
		p.families = append(p.families, fam)
	}
	return p, nil
}

// Run is New followed by Proxy.Run.
func Run(ctx context.Context, src source.Source, b backend.FullState, opts Options) error {
	p, err := New(b, opts)
	if err != nil {
		return err
	}
	return p.Run(ctx, src)
}

// Run delivers src's events to the Proxy and syncs the backend, within the configured
// intervals, until ctx is done. It returns nil then, or the source's error if it cannot
// start.
func (p *Proxy) Run(ctx context.Context, src source.Source) error {
	logger := klog.FromContext(ctx)
	// The sync loops stop with ctx, or as soon as the source fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var loops sync.WaitGroup
	for _, f := range p.families {
		loops.Go(func() { f.shell.Run(ctx) })
	}

	if hs, ok := p.opts.Health.(*healthcheck.ProxyHealthServer); ok && hs != nil && p.opts.Node == nil {
		logger.Info("Warning: Options.Health is a ProxyHealthServer but Options.Node is unset; unless something else feeds its NodeManager, /healthz will answer 503 with nodeEligible false")
	}
	srcErr := make(chan error, 1)
	go func() { srcErr <- src.Run(ctx, p) }()
	var err error
	select {
	case err = <-srcErr:
		if err == nil {
			// A source that stops early has nothing more to say; keep serving what it
			// delivered until told to stop.
			<-ctx.Done()
		}
	case <-ctx.Done():
		err = <-srcErr
	}
	cancel()
	loops.Wait()
	if err != nil {
		logger.Error(err, "Source failed")
	}
	return err
}

// Stats returns what the Proxy has done so far.
func (p *Proxy) Stats() Stats {
	return Stats{
		Events: p.events.Load(), Syncs: p.syncs.Load(), Revisions: p.revisions.Load(),
		BackendCalls: p.calls.Load(), Failures: p.failures.Load(),
	}
}

// State returns the last State of family the backend synced successfully, and its
// revision (1 for the first); nil and 0 before that.
func (p *Proxy) State(f localnode.Family) (*localnode.State, uint64) {
	for _, fam := range p.families {
		if fam.name == f {
			fam.mu.Lock()
			defer fam.mu.Unlock()
			return fam.last, fam.revision
		}
	}
	return nil, 0
}

// synced reports whether the source has delivered its initial objects to every family.
func (p *Proxy) synced() bool {
	for _, f := range p.families {
		if !f.shell.Initialized() {
			return false
		}
	}
	return true
}

// OnServiceAdd implements config.ServiceHandler.
func (p *Proxy) OnServiceAdd(svc *v1.Service) { p.OnServiceUpdate(nil, svc) }

// OnServiceUpdate implements config.ServiceHandler.
func (p *Proxy) OnServiceUpdate(old, svc *v1.Service) {
	p.events.Add(1)
	for _, f := range p.families {
		f.shell.OnServiceUpdate(old, svc)
	}
}

// OnServiceDelete implements config.ServiceHandler.
func (p *Proxy) OnServiceDelete(svc *v1.Service) { p.OnServiceUpdate(svc, nil) }

// OnServiceSynced implements config.ServiceHandler.
func (p *Proxy) OnServiceSynced() {
	for _, f := range p.families {
		f.shell.OnServiceSynced()
	}
	p.checkInitial()
}

// OnEndpointSliceAdd implements config.EndpointSliceHandler.
func (p *Proxy) OnEndpointSliceAdd(slice *discovery.EndpointSlice) { p.sliceChanged(slice, false) }

// OnEndpointSliceUpdate implements config.EndpointSliceHandler.
func (p *Proxy) OnEndpointSliceUpdate(_, slice *discovery.EndpointSlice) {
	p.sliceChanged(slice, false)
}

// OnEndpointSliceDelete implements config.EndpointSliceHandler.
func (p *Proxy) OnEndpointSliceDelete(slice *discovery.EndpointSlice) { p.sliceChanged(slice, true) }

// OnEndpointSlicesSynced implements config.EndpointSliceHandler.
func (p *Proxy) OnEndpointSlicesSynced() {
	for _, f := range p.families {
		f.shell.OnEndpointSlicesSynced()
	}
	p.checkInitial()
}

func (p *Proxy) sliceChanged(slice *discovery.EndpointSlice, removed bool) {
	if slice == nil {
		return
	}
	p.events.Add(1)
	// Locations first: the tracker reads them when it converts the slice at sync time.
	p.locs.Update(slice, removed)
	// A slice holds addresses of one family (AddressType, which is immutable): only that
	// family's shell hears of it, as metaproxier routes slices between its proxiers.
	// FQDN slices match no family.
	for _, f := range p.families {
		if !sliceOfFamily(slice, f.name) {
			continue
		}
		if removed {
			f.shell.OnEndpointSliceDelete(slice)
		} else {
			f.shell.OnEndpointSliceUpdate(nil, slice)
		}
	}
}

func sliceOfFamily(slice *discovery.EndpointSlice, f localnode.Family) bool {
	switch slice.AddressType {
	case discovery.AddressTypeIPv4:
		return f == localnode.IPv4
	case discovery.AddressTypeIPv6:
		return f == localnode.IPv6
	}
	return false
}

// OnTopologyChange implements config.NodeTopologyHandler.
func (p *Proxy) OnTopologyChange(labels map[string]string) {
	p.events.Add(1)
	for _, f := range p.families {
		f.shell.OnTopologyChange(labels)
	}
}

// Sync applies pending changes now, calling the backend for every family whose State
// changed or whose last backend call failed. Before the source has delivered its initial
// objects it does nothing, so the backend never sees a half-loaded State: a caller
// driving the Proxy by hand waits for Synced (or WaitForInitial) first, and uses
// SyncReport to learn whether the backend was handed anything.
func (p *Proxy) Sync(ctx context.Context) error {
	_, err := p.syncFamilies(ctx)
	return err
}

// Sync implements syncshell.Backend: it computes the family's State from what the shell
// resolved and hands it to the backend when it changed (or the last call failed).
func (f *family) Sync(ctx context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	p := f.proxy
	logger := klog.FromContext(ctx).WithValues("ipFamily", f.name)
	start := time.Now()
	p.syncs.Add(1)
	st := f.computed
	// A periodic sync, or one after events the trackers found irrelevant, needs no pass
	// over every service port.
	if st == nil || u.Full || u.ServicesChanged || len(u.ChangedServices()) > 0 {
		st = f.comp.ComputeResolved(ctx, u.Services, u.Endpoints, u.Full, func(spn proxy.ServicePortName, _ proxy.ServicePort) *proxy.TrafficPolicy {
			return u.Policy(spn)
		})
		f.computed = st
	}
	f.mu.Lock()
	last := f.last
	f.mu.Unlock()
	changed := !st.Equal(last)
	if !changed && !f.failed {
		return syncshell.Outcome{}, nil
	}
	p.calls.Add(1)
	p.backendMu.Lock()
	err := p.backend.Sync(ctx, st)
	p.backendMu.Unlock()
	if err != nil {
		f.failed = true
		p.failures.Add(1)
		logger.Error(err, "Backend sync failed; will retry", "services", len(st.Services))
		return syncshell.Outcome{}, fmt.Errorf("syncing %s state: %w", f.name, err)
	}
	f.failed = false
	f.mu.Lock()
	f.last = st
	if changed {
		f.revision++
	}
	revision := f.revision
	f.mu.Unlock()
	if changed {
		p.revisions.Add(1)
		// Hashing 10k services costs as much as computing them: only for a log reader.
		if v := logger.V(2); v.Enabled() {
			v.Info("Synced new node-local state", "revision", revision, "services", len(st.Services),
				"digest", st.Digest().Short(), "elapsed", time.Since(start))
		}
	}
	return syncshell.Outcome{Programmed: true}, nil
}
