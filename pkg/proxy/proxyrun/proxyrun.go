package proxyrun

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/runner"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// DefaultMaxSyncInterval is used when Options.MaxSyncInterval is 0: kube-proxy's default
// --iptables-sync-period.
const DefaultMaxSyncInterval = 30 * time.Second

// HealthRecorder is told when a family has a change queued and when it synced;
// *healthcheck.ProxyHealthServer implements it.
type HealthRecorder interface {
	QueuedUpdate(ipFamily v1.IPFamily)
	Updated(ipFamily v1.IPFamily)
}

var _ HealthRecorder = &healthcheck.ProxyHealthServer{}

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
type Proxy struct {
	opts     Options
	backend  backend.FullState
	families []*family
	locs     *localnode.Locations

	servicesSynced, slicesSynced atomic.Bool
	runner                       atomic.Pointer[runner.BoundedFrequencyRunner]

	mu       sync.Mutex
	topology map[string]string
	// topoGen counts topology changes, so a sync can tell whether its last computation
	// used the current labels.
	topoGen uint64

	// syncMu serialises Sync; the fields below it are owned by the sync.
	syncMu sync.Mutex

	events, syncs, revisions, calls, failures atomic.Uint64
}

type family struct {
	name   localnode.Family
	ipFam  v1.IPFamily
	sct    *proxy.ServiceChangeTracker
	ect    *proxy.EndpointsChangeTracker
	svcMap proxy.ServicePortMap
	epMap  proxy.EndpointsMap
	comp   *localnode.Computer

	last     *localnode.State
	failed   bool
	revision uint64
	// computed is the State last computed, from topology generation computedGen; reused
	// while the trackers report no change.
	computed    *localnode.State
	computedGen uint64
}

var _ source.Handler = &Proxy{}

// New returns a Proxy feeding b. It does nothing until Run, or until the caller delivers
// events and calls Sync itself.
func New(b backend.FullState, opts Options) (*Proxy, error) {
	if b == nil {
		return nil, errors.New("proxyrun: nil backend")
	}
	if len(opts.Families) == 0 {
		opts.Families = []localnode.Family{localnode.IPv4}
	}
	if opts.MaxSyncInterval == 0 {
		opts.MaxSyncInterval = DefaultMaxSyncInterval
	}
	if opts.MinSyncInterval < 0 || opts.MaxSyncInterval < opts.MinSyncInterval {
		return nil, fmt.Errorf("proxyrun: sync intervals must satisfy 0 <= min (%v) <= max (%v)", opts.MinSyncInterval, opts.MaxSyncInterval)
	}
	if opts.RetryInterval == 0 {
		opts.RetryInterval = opts.MinSyncInterval
		if opts.RetryInterval == 0 {
			opts.RetryInterval = time.Second
		}
	}
	p := &Proxy{opts: opts, backend: b, locs: localnode.NewLocations(), topology: map[string]string{}}
	for _, f := range opts.Families {
		if f != localnode.IPv4 && f != localnode.IPv6 {
			return nil, fmt.Errorf("proxyrun: unknown IP family %q", f)
		}
		if slices.ContainsFunc(p.families, func(x *family) bool { return x.name == f }) {
			return nil, fmt.Errorf("proxyrun: IP family %q listed twice", f)
		}
		ipFam := v1.IPFamily(f)
		p.families = append(p.families, &family{
			name:   f,
			ipFam:  ipFam,
			sct:    proxy.NewServiceChangeTracker(ipFam, nil, nil),
			ect:    proxy.NewEndpointsChangeTracker(ipFam, opts.NodeName, p.locs.MakeEndpoint, nil),
			svcMap: proxy.ServicePortMap{},
			epMap:  proxy.EndpointsMap{},
			comp:   localnode.NewComputer(f),
		})
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
	// The sync loop stops with ctx, or as soon as the source fails.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := runner.NewBoundedFrequencyRunner("proxyrun", func() error { return p.Sync(ctx) },
		p.opts.MinSyncInterval, p.opts.RetryInterval, p.opts.MaxSyncInterval)
	p.runner.Store(r)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		r.Loop(ctx.Done())
	}()
	if p.synced() {
		r.Run()
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
	<-loopDone
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
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	for _, fam := range p.families {
		if fam.name == f {
			return fam.last, fam.revision
		}
	}
	return nil, 0
}

func (p *Proxy) synced() bool { return p.servicesSynced.Load() && p.slicesSynced.Load() }

// queue asks for a sync of fam because it has a pending change.
func (p *Proxy) queue(fam *family) {
	if p.opts.Health != nil {
		p.opts.Health.QueuedUpdate(fam.ipFam)
	}
	metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(fam.ipFam)).SetToCurrentTime()
	p.kick()
}

func (p *Proxy) kick() {
	if r := p.runner.Load(); r != nil && p.synced() {
		r.Run()
	}
}

// OnServiceAdd implements config.ServiceHandler.
func (p *Proxy) OnServiceAdd(svc *v1.Service) { p.OnServiceUpdate(nil, svc) }

// OnServiceUpdate implements config.ServiceHandler.
func (p *Proxy) OnServiceUpdate(old, svc *v1.Service) {
	p.events.Add(1)
	for _, f := range p.families {
		if f.sct.Update(old, svc) {
			p.queue(f)
		}
	}
}

// OnServiceDelete implements config.ServiceHandler.
func (p *Proxy) OnServiceDelete(svc *v1.Service) { p.OnServiceUpdate(svc, nil) }

// OnServiceSynced implements config.ServiceHandler.
func (p *Proxy) OnServiceSynced() {
	p.servicesSynced.Store(true)
	p.kick()
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
	p.slicesSynced.Store(true)
	p.kick()
}

func (p *Proxy) sliceChanged(slice *discovery.EndpointSlice, removed bool) {
	p.events.Add(1)
	// Locations first: the tracker reads them when it converts the slice at sync time.
	p.locs.Update(slice, removed)
	for _, f := range p.families {
		if f.ect.EndpointSliceUpdate(slice, removed) {
			p.queue(f)
		}
	}
}

// OnTopologyChange implements config.NodeTopologyHandler.
func (p *Proxy) OnTopologyChange(labels map[string]string) {
	p.events.Add(1)
	p.mu.Lock()
	changed := !maps.Equal(p.topology, labels)
	p.topology = maps.Clone(labels)
	if changed {
		p.topoGen++
	}
	p.mu.Unlock()
	if changed {
		for _, f := range p.families {
			p.queue(f)
		}
	}
}

// Sync applies pending changes now, calling the backend for every family whose State
// changed or whose last backend call failed. Before the source has delivered its initial
// objects it does nothing, so the backend never sees a half-loaded State. Run calls it;
// tests and benchmarks driving the Proxy by hand may too.
func (p *Proxy) Sync(ctx context.Context) error {
	if !p.synced() {
		klog.FromContext(ctx).V(2).Info("Not syncing: the source has not delivered its initial objects yet")
		return nil
	}
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	p.mu.Lock()
	topology, gen := p.topology, p.topoGen
	p.mu.Unlock()
	var errs []error
	for _, f := range p.families {
		if err := p.syncFamily(ctx, f, topology, gen); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (p *Proxy) syncFamily(ctx context.Context, f *family, topology map[string]string, topoGen uint64) error {
	logger := klog.FromContext(ctx).WithValues("ipFamily", f.name)
	start := time.Now()
	p.syncs.Add(1)
	svcResult := f.svcMap.Update(f.sct)
	epResult := f.epMap.Update(f.ect)
	st := f.computed
	// A periodic sync, or one after events the trackers found irrelevant, needs no pass
	// over every service port.
	if st == nil || len(svcResult.UpdatedServices) > 0 || len(epResult.UpdatedServices) > 0 || f.computedGen != topoGen {
		st = f.comp.Compute(ctx, f.svcMap, f.epMap, p.opts.NodeName, topology)
		f.computed, f.computedGen = st, topoGen
	}

	changed := !st.Equal(f.last)
	if changed || f.failed {
		p.calls.Add(1)
		if err := p.backend.Sync(ctx, st); err != nil {
			f.failed = true
			p.failures.Add(1)
			logger.Error(err, "Backend sync failed; will retry", "services", len(st.Services))
			return fmt.Errorf("syncing %s state: %w", f.name, err)
		}
		f.failed = false
		if changed {
			f.revision++
			p.revisions.Add(1)
			// Hashing 10k services costs as much as computing them: only for a log reader.
			if v := logger.V(2); v.Enabled() {
				v.Info("Synced new node-local state", "revision", f.revision, "services", len(st.Services),
					"digest", st.Digest().Short(), "elapsed", time.Since(start))
			}
		}
		f.last = st
	}

	fam := string(f.ipFam)
	metrics.SyncProxyRulesLatency.WithLabelValues(fam).Observe(metrics.SinceInSeconds(start))
	metrics.SyncProxyRulesLastTimestamp.WithLabelValues(fam).SetToCurrentTime()
	for _, times := range epResult.LastChangeTriggerTimes {
		for _, t := range times {
			metrics.NetworkProgrammingLatency.WithLabelValues(fam).Observe(metrics.SinceInSeconds(t))
		}
	}
	var noLocalInternal, noLocalExternal int
	for i := range st.Services {
		svc := &st.Services[i]
		if !svc.HasAnyEndpoints || svc.LocalEndpointCount() > 0 {
			continue
		}
		if svc.InternalPolicy == localnode.PolicyLocal {
			noLocalInternal++
		}
		if svc.ExternalPolicy == localnode.PolicyLocal {
			noLocalExternal++
		}
	}
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", fam).Set(float64(noLocalInternal))
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("external", fam).Set(float64(noLocalExternal))

	if hs := p.opts.ServiceHealth[f.name]; hs != nil {
		if err := hs.SyncServices(f.svcMap.HealthCheckNodePorts()); err != nil {
			logger.Error(err, "Error syncing health check services")
		}
		if err := hs.SyncEndpoints(f.epMap.LocalReadyEndpoints()); err != nil {
			logger.Error(err, "Error syncing health check endpoints")
		}
	}
	if p.opts.Health != nil {
		p.opts.Health.Updated(f.ipFam)
	}
	return nil
}
