package syncshell

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/runner"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/proxierargs"
)

// Backend programs one IP family's rules. The Shell calls Sync with its lock
// held, so never concurrently, and only once both informers have listed.
type Backend interface {
	// Sync programs u. A backend that cannot do what u asks returns an
	// error; the Shell then retries later with a full sync, because the
	// changes u described have been consumed from the trackers.
	Sync(ctx context.Context, u *Update) (Outcome, error)
}

// RulesChecker is implemented by backends that can cheaply tell whether
// their rules were removed behind their back (a firewall reload, `nft flush
// ruleset`). When Options.CheckInterval is set the Shell asks once per
// interval, and a "yes" turns that sync into a full one.
type RulesChecker interface {
	RulesMissing(ctx context.Context) bool
}

// Validator is implemented by backends that cannot program every service
// port or endpoint the trackers accept, beyond what the Shell already leaves
// out for every backend: what proxy.ServicePortProblem and
// proxy.EndpointProblem find for its family (a cluster IP or endpoint address
// of the other family, a port out of range), and any port or endpoint of a
// type that Options.MakeServicePort or Options.MakeEndpoint (or, when unset,
// the trackers) never made, so a backend may rely on its own types. A
// Validator adds only the backend's own reasons (a name that cannot be put
// into a rule comment) and logs why. Ports and endpoints left out count
// nowhere: they are removed before traffic policy is resolved.
//
// A backend may implement either half alone (ServicePortValidator,
// EndpointValidator); Validator is both.
type Validator interface {
	ServicePortValidator
	EndpointValidator
}

// ServicePortValidator is the service-port half of Validator.
type ServicePortValidator interface {
	ValidServicePort(name proxy.ServicePortName, svc proxy.ServicePort) bool
}

// EndpointValidator is the endpoint half of Validator.
type EndpointValidator interface {
	ValidEndpoint(name proxy.ServicePortName, ep proxy.Endpoint) bool
}

// Outcome is what a backend reports about a successful (or failed) sync.
type Outcome struct {
	// Full says the backend rewrote everything although Update.Full was
	// false (it may decide so, for example when its rule shape changes).
	Full bool
	// Programmed says the kernel (or HNS) was written to; a RulesChecker is
	// not consulted within half a CheckInterval of that.
	Programmed bool
	// SyncAgainAfter asks for another sync after this delay, for work the
	// backend must leave for later (chains the kernel does not yet let go).
	SyncAgainAfter time.Duration
	// NoPeriodicFullSync asks the Shell to skip FullSyncInterval's periodic
	// full syncs until a later Outcome says otherwise (iptables in large
	// clusters, as upstream).
	NoPeriodicFullSync bool
}

// Update is what a backend is asked to program.
type Update struct {
	// Full asks for every rule to be written (and leftovers removed), not
	// just those of changed Services.
	Full bool
	// Services and Endpoints are the current state. The backend must not
	// modify them.
	Services  proxy.ServicePortMap
	Endpoints proxy.EndpointsMap
	// ServicesChanged is set when a Service object changed since the last
	// sync, so service ports may have appeared or gone.
	ServicesChanged bool
	// RemovedPorts lists the service ports that existed at the previous sync
	// and are gone (or became unprogrammable) now.
	RemovedPorts []proxy.ServicePortName
	// ServiceCIDRs are this family's ServiceCIDRs, canonical and sorted;
	// ServiceCIDRsChanged is set when they differ from the last successful
	// sync's.
	ServiceCIDRs        []string
	ServiceCIDRsChanged bool
	// ConntrackCleanupRequired is set when a UDP service port's endpoints
	// changed; the Shell cleans stale entries after a successful sync when
	// it has a conntrack client.
	ConntrackCleanupRequired bool

	changed  sets.Set[types.NamespacedName]
	policies map[proxy.ServicePortName]*proxy.TrafficPolicy
}

// Changed reports whether the Service name's ports or endpoints changed
// since the last sync; always true for a full sync.
func (u *Update) Changed(name types.NamespacedName) bool {
	return u.Full || u.changed.Has(name)
}

// ChangedServices returns the Services Changed reports; nil for a full sync.
func (u *Update) ChangedServices() sets.Set[types.NamespacedName] {
	if u.Full {
		return nil
	}
	return u.changed
}

// Policy returns the resolved traffic policy of a service port, or nil if
// the port is not to be programmed (see Validator).
func (u *Update) Policy(name proxy.ServicePortName) *proxy.TrafficPolicy {
	return u.policies[name]
}

// NewUpdate builds an Update by hand, for testing a backend without a Shell:
// every service port's policy is resolved for nodeName and topology, and
// changed lists the changed Services of a partial update (ignored if full).
func NewUpdate(full bool, services proxy.ServicePortMap, endpoints proxy.EndpointsMap, changed sets.Set[types.NamespacedName], nodeName string, topology map[string]string) *Update {
	u := &Update{Full: full, Services: services, Endpoints: endpoints, changed: changed,
		policies: make(map[proxy.ServicePortName]*proxy.TrafficPolicy, len(services))}
	for name, svc := range services {
		tp := proxy.ResolveTrafficPolicy(svc, endpoints[name], nodeName, topology)
		u.policies[name] = &tp
	}
	return u
}

// HealthRecorder is told when a family has a change queued and when it
// synced; *healthcheck.ProxyHealthServer implements it.
type HealthRecorder interface {
	QueuedUpdate(ipFamily v1.IPFamily)
	Updated(ipFamily v1.IPFamily)
}

var _ HealthRecorder = &healthcheck.ProxyHealthServer{}

// Options configure a Shell.
type Options struct {
	// Family is the IP family this Shell proxies.
	Family v1.IPFamily
	// NodeName is this node: endpoints on it are local.
	NodeName string
	// MakeServicePort and MakeEndpoint let the backend attach its own data to
	// what the trackers produce (nil: the brain's base types).
	MakeServicePort func(*v1.ServicePort, *v1.Service, *proxy.BaseServicePortInfo) proxy.ServicePort
	MakeEndpoint    func(*proxy.BaseEndpointInfo, *proxy.ServicePortName) proxy.Endpoint
	// ProcessEndpointsMapChange is passed to the EndpointsChangeTracker.
	ProcessEndpointsMapChange func(oldEndpointsMap, newEndpointsMap proxy.EndpointsMap)

	// MinInterval folds changes arriving closer together into one sync
	// (--*-min-sync-period). RetryInterval is how soon a failed sync is
	// retried (--*-sync-period). MaxInterval is the longest time between
	// syncs without any change.
	MinInterval, RetryInterval, MaxInterval time.Duration
	// FullSyncInterval makes a sync full when the last full one is older
	// than this; 0 never does.
	FullSyncInterval time.Duration
	// CheckInterval is how often a RulesChecker backend is asked whether its
	// rules are still there; 0 never asks.
	CheckInterval time.Duration
	// SyncWhenInitialized syncs at once, on the informer-handler goroutine,
	// when the second informer has listed (kube-proxy's proxiers do); else
	// the first sync waits for the loop.
	SyncWhenInitialized bool

	// Health hears of queued changes and successful syncs (nil: nobody).
	Health HealthRecorder
	// ServiceHealth serves the health check node ports (nil: none).
	ServiceHealth healthcheck.ServiceHealthServer
	// CleanStaleConntrack, when set, is called after a successful sync in
	// which a UDP service port's endpoints changed, to delete flows to
	// endpoints that are gone (conntrack.StaleEntriesCleaner). It is a
	// function so that the shell, like the rest of the brain, builds on
	// every platform while conntrack is Linux-only.
	CleanStaleConntrack func(proxy.ServicePortMap, proxy.EndpointsMap)
	// Logger logs with the family already attached; klog.FromContext(ctx)
	// when unset.
	Logger *klog.Logger
	// OnSync, when set, is called after every sync that ran (not the ones
	// skipped before the informers listed), on the syncing goroutine, so
	// callers can wait for a sync instead of sleeping. It must not block.
	OnSync func(SyncResult)
}

// ProxierOptions returns the Options of one of kube-proxy's own proxiers,
// with upstream's timing: minSyncPeriod between syncs, syncPeriod as the
// retry interval (a non-positive one means 30s, upstream's default), an
// hourly full sync, and the first sync as soon as both informers have
// listed. healthz may be nil. The caller adds the makers, CheckInterval,
// Logger and OnSync its mode needs.
func ProxierOptions(family v1.IPFamily, nodeName string, minSyncPeriod, syncPeriod time.Duration,
	healthz *healthcheck.ProxyHealthServer, serviceHealth healthcheck.ServiceHealthServer, cleanConntrack func(proxy.ServicePortMap, proxy.EndpointsMap)) Options {
	if syncPeriod <= 0 {
		syncPeriod = 30 * time.Second
	}
	o := Options{
		Family:              family,
		NodeName:            nodeName,
		MinInterval:         minSyncPeriod,
		RetryInterval:       syncPeriod,
		MaxInterval:         FullSyncPeriod,
		FullSyncInterval:    FullSyncPeriod,
		SyncWhenInitialized: true,
		ServiceHealth:       serviceHealth,
		CleanStaleConntrack: cleanConntrack,
	}
	// A nil *ProxyHealthServer in the interface would not be nil.
	if healthz != nil {
		o.Health = healthz
	}
	return o
}

// ProxierShell is what one of kube-proxy's own proxiers hands NewProxierShell:
// ProxierOptions' arguments plus what each mode adds to them.
type ProxierShell struct {
	// Mode names the proxier ("iptables") in the log and in errors.
	Mode     string
	Family   v1.IPFamily
	NodeName string
	// Config gives MinSyncPeriod and SyncPeriod.
	Config *kubeproxyconfig.KubeProxyConfiguration
	// Healthz and ServiceHealth may be nil.
	Healthz             *healthcheck.ProxyHealthServer
	ServiceHealth       healthcheck.ServiceHealthServer
	CleanStaleConntrack func(proxy.ServicePortMap, proxy.EndpointsMap)
	MakeServicePort     func(*v1.ServicePort, *v1.Service, *proxy.BaseServicePortInfo) proxy.ServicePort
	// CheckRules asks the backend's RulesChecker or DriftChecker once per
	// sync period (the retry interval); false never asks (a dry run, which
	// has no kernel to compare with).
	CheckRules bool
	Logger     klog.Logger
	OnSync     func(SyncResult)
}

// NewProxierShell builds the Shell of one of kube-proxy's own proxiers over
// b, with ProxierOptions' timing, and logs the sync periods it chose. The
// proxier reads the retry interval it needs from Shell.RetryInterval.
func NewProxierShell(ctx context.Context, ps ProxierShell, b Backend) (*Shell, error) {
	if err := proxierargs.Check(ps.Mode, ps.Config, ps.Family); err != nil {
		return nil, err
	}
	opts := ProxierOptions(ps.Family, ps.NodeName, ps.Config.MinSyncPeriod.Duration, ps.Config.SyncPeriod.Duration,
		ps.Healthz, ps.ServiceHealth, ps.CleanStaleConntrack)
	opts.MakeServicePort = ps.MakeServicePort
	if ps.CheckRules {
		opts.CheckInterval = opts.RetryInterval
	}
	opts.Logger, opts.OnSync = &ps.Logger, ps.OnSync
	ps.Logger.V(2).Info("Sync params", "mode", ps.Mode, "minSyncPeriod", opts.MinInterval, "syncPeriod", opts.RetryInterval, "maxSyncPeriod", opts.MaxInterval)
	s, err := New(ctx, opts, b)
	if err != nil {
		return nil, fmt.Errorf("%s proxier (%s): %w", ps.Mode, ps.Family, err)
	}
	return s, nil
}

// RetryInterval is how soon a failed sync is retried (Options.RetryInterval
// after defaulting); kube-proxy's proxiers also use it as their sync period.
func (s *Shell) RetryInterval() time.Duration { return s.opts.RetryInterval }

// FullSyncPeriod is how often kube-proxy's proxiers rewrite everything even
// without a reason (proxyutil.FullSyncPeriod, upstream's hour).
const FullSyncPeriod = proxyutil.FullSyncPeriod

// SyncResult describes one finished sync, for Options.OnSync.
type SyncResult struct {
	Family   v1.IPFamily
	Full     bool
	Duration time.Duration
	// Err is the sync's error; nil when it succeeded.
	Err error
}

// Shell is one IP family's sync loop. It implements proxy.Provider: the event
// handlers (OnServiceAdd and the rest, at the end of this file), Sync,
// SyncLoop and OnServiceCIDRsChanged; a proxier embeds it and overrides
// OnServiceCIDRsChanged only if it needs to (Shell's records the CIDRs for
// Update).
type Shell struct {
	opts              Options
	now               func() time.Time // time.Now; tests move it
	backend           Backend
	checker           RulesChecker
	drifter           DriftChecker
	portValidator     ServicePortValidator
	endpointValidator EndpointValidator
	// made records the types the makers returned (see madeTypes).
	made   madeTypes
	logger klog.Logger

	serviceChanges   *proxy.ServiceChangeTracker
	endpointsChanges *proxy.EndpointsChangeTracker
	runner           *runner.BoundedFrequencyRunner

	// listedMu guards which informers have listed everything (listed);
	// initialized becomes true when both have.
	listedMu       sync.Mutex
	servicesListed bool
	slicesListed   bool
	initialized    atomic.Bool

	ctx         atomic.Pointer[context.Context]
	checkDue    atomic.Bool
	checkForced atomic.Bool
	// changeQueued is set by Sync, which the handlers call for every
	// change, so a due drift check can tell that a change is waiting.
	changeQueued atomic.Bool
	// yieldCheck cancels the drift check in progress when a change
	// arrives (nil when none runs, or the running one may not yield).
	yieldCheck   atomic.Pointer[context.CancelFunc]
	againQueued  atomic.Bool
	successCount atomic.Uint64

	mu                 sync.Mutex // guards everything below
	services           proxy.ServicePortMap
	endpoints          proxy.EndpointsMap
	topology           map[string]string
	policies           map[proxy.ServicePortName]*proxy.TrafficPolicy
	noLocalInt         int
	noLocalExt         int
	needFull           bool
	lastFull           time.Time
	lastProgrammed     time.Time
	noPeriodicFull     bool
	serviceCIDRs       []string
	cidrsChanged       bool
	healthCheckPorts   map[types.NamespacedName]uint16
	healthCheckChanged bool
	drift              *driftTracker
	// checkYielded is set when a due drift check gave way to a change;
	// the next one does not, so constant churn cannot postpone the check
	// by more than one sync.
	checkYielded bool
}

// New returns a Shell driving b. ctx is used for syncs run by the loop and
// the handlers until SyncLoop or Run replaces it.
func New(ctx context.Context, opts Options, b Backend) (*Shell, error) {
	if b == nil {
		return nil, errors.New("syncshell: nil backend")
	}
	if opts.Family != v1.IPv4Protocol && opts.Family != v1.IPv6Protocol {
		return nil, fmt.Errorf("syncshell: invalid IP family %q", opts.Family)
	}
	if opts.MinInterval < 0 || (opts.MaxInterval > 0 && opts.MaxInterval < opts.MinInterval) {
		return nil, fmt.Errorf("syncshell: sync intervals must satisfy 0 <= min (%v) <= max (%v)", opts.MinInterval, opts.MaxInterval)
	}
	if opts.MaxInterval == 0 {
		opts.MaxInterval = time.Hour
	}
	if opts.RetryInterval <= 0 {
		opts.RetryInterval = max(opts.MinInterval, time.Second)
	}
	s := &Shell{
		opts:      opts,
		now:       time.Now,
		backend:   b,
		services:  proxy.ServicePortMap{},
		endpoints: proxy.EndpointsMap{},
		policies:  map[proxy.ServicePortName]*proxy.TrafficPolicy{},
		needFull:  true,
	}
	s.checker, _ = b.(RulesChecker)
	s.drifter, _ = b.(DriftChecker)
	if s.drifter != nil {
		s.checker = nil
		s.drift = newDriftTracker(opts.CheckInterval, opts.FullSyncInterval)
	}
	s.portValidator, _ = b.(ServicePortValidator)
	s.endpointValidator, _ = b.(EndpointValidator)
	opts.MakeServicePort, opts.MakeEndpoint = s.made.wrap(opts.MakeServicePort, opts.MakeEndpoint)
	if opts.Logger != nil {
		s.logger = *opts.Logger
	} else {
		s.logger = klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", opts.Family)
	}
	s.ctx.Store(&ctx)
	s.serviceChanges = proxy.NewServiceChangeTracker(opts.Family, opts.MakeServicePort, nil)
	s.endpointsChanges = proxy.NewEndpointsChangeTracker(opts.Family, opts.NodeName, opts.MakeEndpoint, opts.ProcessEndpointsMapChange)
	s.runner = runner.NewBoundedFrequencyRunner("sync-runner", s.SyncNow,
		opts.MinInterval, opts.RetryInterval, opts.MaxInterval)
	return s, nil
}

// informerSynced runs when an informer has finished listing; it does nothing
// until both have.
func (s *Shell) informerSynced() {
	if !s.Initialized() {
		return
	}
	if s.opts.SyncWhenInitialized {
		_ = s.SyncNow()
	} else {
		// The first sync is queued for the loop, like any change.
		s.Sync()
	}
}

// Sync requests a sync as soon as MinInterval allows (proxy.Provider).
func (s *Shell) Sync() {
	s.changeQueued.Store(true)
	if cancel := s.yieldCheck.Load(); cancel != nil {
		(*cancel)()
	}
	if s.opts.Health != nil {
		s.opts.Health.QueuedUpdate(s.opts.Family)
	}
	metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(s.opts.Family)).SetToCurrentTime()
	s.runner.Run()
}

// SyncLoop runs the sync loop until the process exits (proxy.Provider).
func (s *Shell) SyncLoop() { s.Run(*s.ctx.Load()) }

// Run runs the sync loop until ctx is done. Syncs run by the loop use ctx.
func (s *Shell) Run(ctx context.Context) {
	s.ctx.Store(&ctx)
	// Report healthy at start in case no sync ever succeeds, so that the
	// health timeout measures from now.
	if s.opts.Health != nil {
		s.opts.Health.Updated(s.opts.Family)
	}
	metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(s.opts.Family)).SetToCurrentTime()
	if (s.checker != nil || s.drifter != nil) && s.opts.CheckInterval > 0 {
		// A sync without changes makes no kernel call, so a table removed
		// from outside would be noticed only at the next change: ask the
		// backend's cheap check once per interval.
		go wait.Until(func() {
			s.checkDue.Store(true)
			s.runner.Run()
		}, s.opts.CheckInterval, ctx.Done())
	}
	if s.Initialized() {
		s.runner.Run()
	}
	s.runner.Loop(ctx.Done())
}

// RequestFullSync makes the next sync full, for a backend's own detector of
// removed rules (iptables' canary Monitor) or a caller that knows the rules
// were disturbed.
func (s *Shell) RequestFullSync() {
	s.mu.Lock()
	s.needFull = true
	s.mu.Unlock()
}

// Snapshot returns the service ports and endpoints as of the last sync, for
// diagnostics and tests. The maps are copies; their values are shared and
// must not be modified.
func (s *Shell) Snapshot() (proxy.ServicePortMap, proxy.EndpointsMap) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.services), maps.Clone(s.endpoints)
}

// RequestRulesCheck makes the next sync ask the backend's RulesChecker
// whether its rules are still there, however recently they were written (for
// a caller that learned of a firewall reload, and for tests).
func (s *Shell) RequestRulesCheck() { s.checkForced.Store(true) }

// NeedsFullSync reports whether the next sync will be full: before the first
// one, after a failed one, and after RequestFullSync or a topology change.
func (s *Shell) NeedsFullSync() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.needFull
}

// Syncs returns how many syncs succeeded so far; tests and dry runs use it
// to wait for one.
func (s *Shell) Syncs() uint64 { return s.successCount.Load() }

// setTopology records the node's topology labels: new labels change which
// endpoints every Service uses, so the next sync is full.
func (s *Shell) setTopology(labels map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.topology != nil && maps.Equal(s.topology, labels) {
		return
	}
	s.topology = maps.Clone(labels)
	s.needFull = true
	s.logger.V(4).Info("Updated proxier node topology labels", "labels", labels)
}

// OnServiceCIDRsChanged records this family's ServiceCIDRs for the next
// Update (proxy.Provider). Invalid and other-family ranges are left out.
func (s *Shell) OnServiceCIDRsChanged(cidrs []string) {
	var mine []string
	for _, cidr := range cidrs {
		_, n, err := netutils.ParseCIDRSloppy(cidr)
		if err != nil {
			s.logger.Error(err, "Ignoring invalid ServiceCIDR", "cidr", cidr)
			continue
		}
		isV4 := len(n.Mask) == net.IPv4len
		if !isV4 && n.IP.To4() != nil {
			// IPv4-mapped IPv6 ranges are not valid ServiceCIDRs and print
			// as IPv4, which neither family's rules accept.
			s.logger.Error(nil, "Ignoring IPv4-mapped IPv6 ServiceCIDR", "cidr", cidr)
			continue
		}
		if (s.opts.Family == v1.IPv4Protocol) == isV4 {
			mine = append(mine, n.String())
		}
	}
	slices.Sort(mine)
	mine = slices.Compact(mine)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(mine, s.serviceCIDRs) {
		s.serviceCIDRs = mine
		s.cidrsChanged = true
	}
}

// SyncNow runs one sync on the calling goroutine and returns its error. A
// sync before both informers have listed does nothing.
func (s *Shell) SyncNow() error { return s.SyncContext(*s.ctx.Load()) }

// SyncContext is SyncNow with the context the backend is given.
func (s *Shell) SyncContext(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.Initialized() {
		s.logger.V(2).Info("Not syncing until Services and EndpointSlices have been received")
		return nil
	}
	start := s.now()
	full := s.needFull ||
		(s.opts.FullSyncInterval > 0 && !s.noPeriodicFull && start.Sub(s.lastFull) > s.opts.FullSyncInterval)
	forced := s.checkForced.Swap(false)
	due := s.checkDue.Swap(false)
	changeQueued := s.changeQueued.Swap(false)
	checkAgain := false
	if !full && s.drifter != nil && (forced || due) {
		var yielded bool
		full, yielded = s.driftBeforeSync(ctx, start, forced, changeQueued)
		if yielded {
			// The check runs on the next sync, MinInterval from now.
			s.checkDue.Store(true)
			checkAgain = true
		}
	}
	if !full && s.checker != nil && (forced || (due && start.Sub(s.lastProgrammed) >= s.opts.CheckInterval/2)) {
		if s.checker.RulesMissing(ctx) {
			s.logger.Info("Rules were removed behind kube-proxy's back; rewriting them with a full sync")
			full = true
		}
		s.lastProgrammed = start
	}

	svcResult := s.services.Update(s.serviceChanges)
	epResult := s.endpoints.Update(s.endpointsChanges)
	u := &Update{
		Full:                     full,
		Services:                 s.services,
		Endpoints:                s.endpoints,
		ServicesChanged:          svcResult.UpdatedServices.Len() > 0,
		ServiceCIDRs:             s.serviceCIDRs,
		ServiceCIDRsChanged:      s.cidrsChanged,
		ConntrackCleanupRequired: epResult.ConntrackCleanupRequired,
		policies:                 s.policies,
	}
	if !full {
		u.changed = svcResult.UpdatedServices.Union(epResult.UpdatedServices)
	}
	u.RemovedPorts = s.resolvePolicies(u)
	if u.ServicesChanged || full {
		s.healthCheckChanged = true
	}
	s.logger.V(2).Info("Syncing rules", "fullSync", full)

	out, err := s.backend.Sync(ctx, u)
	full = full || out.Full
	elapsed := metrics.SinceInSeconds(start)
	family := string(s.opts.Family)
	metrics.SyncProxyRulesLatency.WithLabelValues(family).Observe(elapsed)
	if full {
		metrics.SyncFullProxyRulesLatency.WithLabelValues(family).Observe(elapsed)
	} else {
		metrics.SyncPartialProxyRulesLatency.WithLabelValues(family).Observe(elapsed)
	}
	if out.Programmed {
		s.lastProgrammed = s.now()
	}
	s.noPeriodicFull = out.NoPeriodicFullSync
	if out.SyncAgainAfter > 0 && !s.againQueued.Swap(true) {
		time.AfterFunc(out.SyncAgainAfter, func() {
			s.againQueued.Store(false)
			s.runner.Run()
		})
	}
	if err != nil {
		// The trackers' changes are consumed; only a full sync can bring
		// the rules back in line with them.
		s.needFull = true
		s.logger.Error(err, "Sync failed", "retryingTime", s.opts.RetryInterval)
		err = fmt.Errorf("%s sync: %w", family, err)
		s.notify(full, start, err)
		return err
	}
	s.needFull = false
	s.cidrsChanged = false
	if full {
		s.lastFull = s.now()
	}
	s.logger.V(2).Info("SyncProxyRules complete", "elapsed", time.Since(start), "fullSync", full, "servicePorts", len(s.services))
	s.report(u, epResult)
	s.successCount.Add(1)
	s.notify(full, start, nil)
	if checkAgain {
		s.runner.Run()
	}
	return nil
}

func (s *Shell) notify(full bool, start time.Time, err error) {
	if s.opts.OnSync != nil {
		s.opts.OnSync(SyncResult{Family: s.opts.Family, Full: full, Duration: s.now().Sub(start), Err: err})
	}
}

// resolvePolicies brings the per-port traffic policies up to date for the
// ports u says changed (all of them for a full sync) and returns the ports
// whose policy went away. The no-local-endpoint counts follow the cache.
func (s *Shell) resolvePolicies(u *Update) []proxy.ServicePortName {
	var removed []proxy.ServicePortName
	if u.Full || u.ServicesChanged {
		for name := range s.policies {
			if _, ok := s.services[name]; !ok {
				removed = append(removed, name)
				s.forgetPolicy(name)
			}
		}
	}
	for name, svc := range s.services {
		if !u.Changed(name.NamespacedName) {
			continue
		}
		s.forgetPolicy(name)
		if !s.validServicePort(name, svc) {
			removed = append(removed, name)
			continue
		}
		eps := proxy.UsableEndpoints(s.endpoints[name], func(ep proxy.Endpoint) bool { return s.validEndpoint(name, ep) }, nil)
		tp := proxy.ResolveTrafficPolicy(svc, eps, s.opts.NodeName, s.topology)
		s.policies[name] = &tp
		if tp.NoLocalInternal() {
			s.noLocalInt++
		}
		if tp.NoLocalExternal() {
			s.noLocalExt++
		}
	}
	slices.SortFunc(removed, proxy.CompareServicePortNames)
	return removed
}

// validServicePort applies every backend's floor, then the backend's Validator.
func (s *Shell) validServicePort(name proxy.ServicePortName, svc proxy.ServicePort) bool {
	why := s.made.portProblem(svc)
	if why == "" {
		why = proxy.ServicePortProblem(s.opts.Family, svc)
	}
	if why != "" {
		s.logger.Error(nil, "Skipping service port with invalid data", "servicePort", name.String(), "reason", why)
		return false
	}
	return s.portValidator == nil || s.portValidator.ValidServicePort(name, svc)
}

// validEndpoint applies every backend's floor, then the backend's Validator.
func (s *Shell) validEndpoint(name proxy.ServicePortName, ep proxy.Endpoint) bool {
	why := s.made.endpointProblem(ep)
	if why == "" {
		why = proxy.EndpointProblem(s.opts.Family, ep)
	}
	if why != "" {
		s.logger.Error(nil, "Skipping invalid endpoint", "servicePort", name.String(), "endpoint", ep.String(), "reason", why)
		return false
	}
	return s.endpointValidator == nil || s.endpointValidator.ValidEndpoint(name, ep)
}

func (s *Shell) forgetPolicy(name proxy.ServicePortName) {
	tp := s.policies[name]
	if tp == nil {
		return
	}
	if tp.NoLocalInternal() {
		s.noLocalInt--
	}
	if tp.NoLocalExternal() {
		s.noLocalExt--
	}
	delete(s.policies, name)
}

// report runs after a successful sync: metrics, health, conntrack.
func (s *Shell) report(u *Update, epResult proxy.UpdateEndpointsMapResult) {
	family := string(s.opts.Family)
	for name, times := range epResult.LastChangeTriggerTimes {
		for _, t := range times {
			latency := metrics.SinceInSeconds(t)
			metrics.NetworkProgrammingLatency.WithLabelValues(family).Observe(latency)
			s.logger.V(4).Info("Network programming", "endpoint", klog.KRef(name.Namespace, name.Name), "elapsed", latency)
		}
	}
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", family).Set(float64(s.noLocalInt))
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("external", family).Set(float64(s.noLocalExt))
	if s.opts.Health != nil {
		s.opts.Health.Updated(s.opts.Family)
	}
	metrics.SyncProxyRulesLastTimestamp.WithLabelValues(family).SetToCurrentTime()
	s.syncServiceHealth(u)
	if u.ConntrackCleanupRequired && s.opts.CleanStaleConntrack != nil {
		s.opts.CleanStaleConntrack(s.services, s.endpoints)
	}
}

// syncServiceHealth tells the per-service health check server which Services
// it serves and how many local ready endpoints each has. Upstream recounts
// every Service's endpoints on every sync; at 10k services that is most of a
// one-endpoint sync's CPU. The server only looks at Services with a health
// check node port, so only those are counted, and only when the Service set
// changed or one of them had an endpoint change.
func (s *Shell) syncServiceHealth(u *Update) {
	hs := s.opts.ServiceHealth
	if hs == nil {
		return
	}
	recount := s.healthCheckChanged || s.healthCheckPorts == nil
	if recount {
		s.healthCheckPorts = s.services.HealthCheckNodePorts()
		if err := hs.SyncServices(s.healthCheckPorts); err != nil {
			s.logger.Error(err, "Error syncing healthcheck services")
		}
		s.healthCheckChanged = false
	} else {
		for name := range u.ChangedServices() {
			if _, ok := s.healthCheckPorts[name]; ok {
				recount = true
				break
			}
		}
	}
	if !recount {
		return
	}
	counts := s.endpoints.LocalReadyEndpointsOf(func(name types.NamespacedName) bool {
		_, ok := s.healthCheckPorts[name]
		return ok
	})
	if err := hs.SyncEndpoints(counts); err != nil {
		s.logger.Error(err, "Error syncing healthcheck endpoints")
	}
}

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
