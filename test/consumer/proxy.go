package consumer

import (
	"fmt"
	"net"
	"net/netip"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/runner"
	"k8s.io/kube-proxy/pkg/proxy/util"
)

// Backend is this proxy's own Endpoint implementation: the data plane gets these,
// not the trackers' values, so it never depends on their concrete type.
type Backend struct {
	Addr        netip.AddrPort
	Local       bool
	Ready       bool
	Serving     bool
	Terminating bool
	Zones       sets.Set[string]
	Nodes       sets.Set[string]
}

var _ proxy.Endpoint = Backend{}

func (b Backend) String() string              { return b.Addr.String() }
func (b Backend) IP() string                  { return b.Addr.Addr().String() }
func (b Backend) Port() int                   { return int(b.Addr.Port()) }
func (b Backend) IsLocal() bool               { return b.Local }
func (b Backend) IsReady() bool               { return b.Ready }
func (b Backend) IsServing() bool             { return b.Serving }
func (b Backend) IsTerminating() bool         { return b.Terminating }
func (b Backend) ZoneHints() sets.Set[string] { return b.Zones }
func (b Backend) NodeHints() sets.Set[string] { return b.Nodes }

// backendOf copies any Endpoint into a Backend. An endpoint whose address does
// not parse cannot be programmed; ok is false for it.
func backendOf(ep proxy.Endpoint) (Backend, bool) {
	addr, err := netip.ParseAddr(ep.IP())
	if err != nil || ep.Port() < 0 || ep.Port() > 65535 {
		return Backend{}, false
	}
	return Backend{
		Addr:        netip.AddrPortFrom(addr.Unmap(), uint16(ep.Port())),
		Local:       ep.IsLocal(),
		Ready:       ep.IsReady(),
		Serving:     ep.IsServing(),
		Terminating: ep.IsTerminating(),
		Zones:       ep.ZoneHints(),
		Nodes:       ep.NodeHints(),
	}, true
}

// servicePort is what makeServiceInfo returns: the tracker's ServicePort with
// what this proxy adds to it.
type servicePort struct {
	proxy.ServicePort
	// owner is the Service's namespace/name, kept because a data plane that
	// reports per-Service counters needs it without re-deriving it from keys.
	owner string
}

func makeServiceInfo(port *v1.ServicePort, svc *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	return &servicePort{ServicePort: base, owner: svc.Namespace + "/" + svc.Name}
}

// Service is one service port as the data plane is asked to program it.
type Service struct {
	Owner               string
	ClusterIP           string
	Port                int
	Protocol            v1.Protocol
	NodePort            int
	ExternalIPs         []string
	LoadBalancerVIPs    []string
	AffinitySeconds     int // 0: no ClientIP affinity
	ExternalPolicyLocal bool
	InternalPolicyLocal bool
	HealthCheckNodePort int
	SourceRanges        []string
	// Which endpoint sets the data plane needs, as the ServicePort decides.
	ExternallyAccessible bool
	UsesClusterEndpoints bool
	UsesLocalEndpoints   bool
	// Describe is the ServicePort's own String(), for logs.
	Describe string
	Backends []Backend
}

// Syncer programs a full snapshot into a data plane. An error makes the runner
// retry later with a fresh snapshot.
type Syncer func(map[proxy.ServicePortName]Service) error

// Options configure a Proxy.
type Options struct {
	Hostname string
	Family   v1.IPFamily
	// NodePortAddresses restricts where healthCheckNodePorts listen.
	NodePortAddresses []string
	// HealthzAddr, when set, gets a ProxyHealthServer that reflects this proxy's
	// syncs; the healthCheckNodePort answers then consult it. Otherwise those
	// answers treat the proxy as always healthy.
	HealthzAddr   string
	MinSyncPeriod time.Duration
	RetryPeriod   time.Duration
	MaxSyncPeriod time.Duration
}

// Proxy is the custom proxier. It implements config.ServiceHandler and
// config.EndpointSliceHandler, not proxy.Provider: it owns its sync loop.
type Proxy struct {
	family v1.IPFamily
	syncer Syncer

	svcTracker *proxy.ServiceChangeTracker
	epsTracker *proxy.EndpointsChangeTracker

	runner      *runner.BoundedFrequencyRunner
	requestSync func()

	nodeMgr   *proxy.NodeManager
	healthz   *healthcheck.ProxyHealthServer
	svcHealth healthcheck.ServiceHealthServer
	npa       *util.NodePortAddresses

	mu        sync.Mutex
	svcMap    proxy.ServicePortMap
	epsMap    proxy.EndpointsMap
	svcSynced bool
	epsSynced bool
	syncs     int
}

var (
	_ config.ServiceHandler       = (*Proxy)(nil)
	_ config.EndpointSliceHandler = (*Proxy)(nil)
)

// alwaysHealthy stands in for kube-proxy's health server when there is none:
// the healthCheckNodePort answers then depend only on local endpoints.
type alwaysHealthy struct{}

func (alwaysHealthy) Health() healthcheck.ProxyHealth {
	return healthcheck.ProxyHealth{Healthy: true}
}

// New builds a Proxy; call Start to run its sync loop.
func New(o Options, syncer Syncer) (*Proxy, error) {
	if syncer == nil {
		return nil, fmt.Errorf("consumer proxy for node %q: nil Syncer", o.Hostname)
	}
	if o.Family != v1.IPv4Protocol && o.Family != v1.IPv6Protocol {
		return nil, fmt.Errorf("consumer proxy for node %q: unsupported IP family %q", o.Hostname, o.Family)
	}
	if o.MinSyncPeriod <= 0 || o.RetryPeriod <= 0 || o.MaxSyncPeriod < o.MinSyncPeriod {
		return nil, fmt.Errorf("consumer proxy for node %q: bad sync periods min=%v retry=%v max=%v",
			o.Hostname, o.MinSyncPeriod, o.RetryPeriod, o.MaxSyncPeriod)
	}
	p := &Proxy{
		family: o.Family,
		syncer: syncer,
		// nil callbacks: this proxy needs no notification of map changes.
		svcTracker: proxy.NewServiceChangeTracker(o.Family, makeServiceInfo, nil),
		epsTracker: proxy.NewEndpointsChangeTracker(o.Family, o.Hostname, nil, nil),
		// The zero value: this proxy learns its Node from its own watch.
		nodeMgr: new(proxy.NodeManager),
		svcMap:  proxy.ServicePortMap{},
		epsMap:  proxy.EndpointsMap{},
		npa:     util.NewNodePortAddresses(o.Family, o.NodePortAddresses),
	}
	var checker interface {
		Health() healthcheck.ProxyHealth
	} = alwaysHealthy{}
	if o.HealthzAddr != "" {
		p.healthz = healthcheck.NewProxyHealthServer(o.HealthzAddr, o.MinSyncPeriod, p.nodeMgr)
		checker = p.healthz
	}
	p.svcHealth = healthcheck.NewServiceHealthServer(o.Hostname, nil, p.npa, checker, o.Family)
	p.runner = runner.NewBoundedFrequencyRunner("consumer-sync", p.sync, o.MinSyncPeriod, o.RetryPeriod, o.MaxSyncPeriod)
	p.requestSync = p.runner.Run
	klog.Background().V(2).Info("Consumer proxy configured", "node", o.Hostname, "family", o.Family,
		"nodePortAddresses", p.npa.String())
	return p, nil
}

// Start runs the sync loop until stop is closed.
func (p *Proxy) Start(stop <-chan struct{}) { go p.runner.Loop(stop) }

// Healthz is the ProxyHealthServer, nil without Options.HealthzAddr.
func (p *Proxy) Healthz() *healthcheck.ProxyHealthServer { return p.healthz }

// NodePortAddresses is the printable form of the healthCheckNodePort addresses.
func (p *Proxy) NodePortAddresses() string { return p.npa.String() }

// OnNodeChange records this node, which the health server's eligibility uses.
func (p *Proxy) OnNodeChange(node *v1.Node) { p.nodeMgr.OnNodeChange(node) }

// Syncs counts successful syncs.
func (p *Proxy) Syncs() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.syncs
}

// ours hides Services that name another proxy, as kube-proxy's informers do
// with their label selector.
func ours(svc *v1.Service) *v1.Service {
	if svc == nil {
		return nil
	}
	if _, other := svc.Labels[apis.LabelServiceProxyName]; other {
		return nil
	}
	return svc
}

func (p *Proxy) changed() {
	if p.healthz != nil {
		p.healthz.QueuedUpdate(p.family)
	}
	p.requestSync()
}

func (p *Proxy) OnServiceAdd(svc *v1.Service) { p.OnServiceUpdate(nil, svc) }

func (p *Proxy) OnServiceUpdate(old, svc *v1.Service) {
	if p.svcTracker.Update(ours(old), ours(svc)) {
		p.changed()
	}
}

func (p *Proxy) OnServiceDelete(svc *v1.Service) { p.OnServiceUpdate(svc, nil) }

func (p *Proxy) OnServiceSynced() {
	p.mu.Lock()
	p.svcSynced = true
	p.mu.Unlock()
	p.requestSync()
}

func (p *Proxy) OnEndpointSliceAdd(s *discovery.EndpointSlice) { p.OnEndpointSliceUpdate(nil, s) }

func (p *Proxy) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) {
	if p.epsTracker.EndpointSliceUpdate(s, false) {
		p.changed()
	}
}

func (p *Proxy) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	if p.epsTracker.EndpointSliceUpdate(s, true) {
		p.changed()
	}
}

func (p *Proxy) OnEndpointSlicesSynced() {
	p.mu.Lock()
	p.epsSynced = true
	p.mu.Unlock()
	p.requestSync()
}

// sync is the runner's function: fold the trackers' changes into the maps,
// hand the data plane a full snapshot, then publish health.
func (p *Proxy) sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.svcSynced || !p.epsSynced {
		// A partial view would delete what another instance programmed.
		return nil
	}
	p.svcMap.Update(p.svcTracker)
	p.epsMap.Update(p.epsTracker)

	snap := make(map[proxy.ServicePortName]Service, len(p.svcMap))
	logger := klog.Background()
	for name, sp := range p.svcMap {
		own, ok := sp.(*servicePort)
		if !ok {
			return fmt.Errorf("service port %s: tracker returned %T, not the makeServiceInfo type", name, sp)
		}
		s := Service{
			Owner:                own.owner,
			ClusterIP:            ipString(own.ClusterIP()),
			Port:                 own.Port(),
			Protocol:             own.Protocol(),
			NodePort:             own.NodePort(),
			ExternalIPs:          ipStrings(own.ExternalIPs()),
			LoadBalancerVIPs:     ipStrings(own.LoadBalancerVIPs()),
			ExternalPolicyLocal:  own.ExternalPolicyLocal(),
			InternalPolicyLocal:  own.InternalPolicyLocal(),
			HealthCheckNodePort:  own.HealthCheckNodePort(),
			ExternallyAccessible: own.ExternallyAccessible(),
			UsesClusterEndpoints: own.UsesClusterEndpoints(),
			UsesLocalEndpoints:   own.UsesLocalEndpoints(),
			Describe:             own.String(),
		}
		for _, r := range own.LoadBalancerSourceRanges() {
			s.SourceRanges = append(s.SourceRanges, r.String())
		}
		if own.SessionAffinityType() == v1.ServiceAffinityClientIP {
			s.AffinitySeconds = own.StickyMaxAgeSeconds()
		}
		for _, ep := range p.epsMap[name] {
			b, ok := backendOf(ep)
			if !ok {
				logger.Info("Skipping endpoint with an unusable address", "servicePort", name, "endpoint", ep.String())
				continue
			}
			s.Backends = append(s.Backends, b)
		}
		sort.Slice(s.Backends, func(i, j int) bool { return s.Backends[i].Addr.Compare(s.Backends[j].Addr) < 0 })
		snap[name] = s
	}
	if err := p.syncer(snap); err != nil {
		return fmt.Errorf("programming %d service ports: %w", len(snap), err)
	}
	if err := p.svcHealth.SyncServices(p.svcMap.HealthCheckNodePorts()); err != nil {
		logger.Error(err, "Syncing healthCheckNodePort services")
	}
	if err := p.svcHealth.SyncEndpoints(p.epsMap.LocalReadyEndpoints()); err != nil {
		logger.Error(err, "Syncing healthCheckNodePort endpoints")
	}
	if p.healthz != nil {
		p.healthz.Updated(p.family)
	}
	p.syncs++
	return nil
}

func ipString(ip net.IP) string {
	if ip == nil {
		return ""
	}
	return ip.String()
}

func ipStrings(ips []net.IP) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip.String())
	}
	return out
}

// Key builds the map key of a service port the way a data plane looking one up
// by its parts does.
func Key(namespace, name, port string, proto v1.Protocol) proxy.ServicePortName {
	return proxy.ServicePortName{
		NamespacedName: types.NamespacedName{Namespace: namespace, Name: name},
		Port:           port,
		Protocol:       proto,
	}
}
