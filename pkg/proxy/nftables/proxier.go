package nftables

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"
	"sigs.k8s.io/knftables"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnodeportproxy"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/runner"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// staleChainMinAge is how long a flushed chain waits before deletion: before
// kernel 6.2 a chain stays referenced for a short while after the last map
// element pointing to it is deleted.
const staleChainMinAge = time.Second

// NewDualStackProxier creates a MetaProxier over an IPv4 and an IPv6 proxier.
func NewDualStackProxier(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (proxy.Provider, error) {
	ipv4Proxier, err := NewProxier(ctx, config, v1.IPv4Protocol, localDetectors[v1.IPv4Protocol], nodeName, nodeIPs[v1.IPv4Protocol], recorder, healthzServer, initOnly)
	if err != nil {
		return nil, fmt.Errorf("unable to create ipv4 proxier: %w", err)
	}
	ipv6Proxier, err := NewProxier(ctx, config, v1.IPv6Protocol, localDetectors[v1.IPv6Protocol], nodeName, nodeIPs[v1.IPv6Protocol], recorder, healthzServer, initOnly)
	if err != nil {
		return nil, fmt.Errorf("unable to create ipv6 proxier: %w", err)
	}
	if initOnly {
		return nil, nil
	}
	return metaproxier.NewMetaProxier(ipv4Proxier, ipv6Proxier), nil
}

// Proxier is an nftables-based proxy for one IP family.
type Proxier struct {
	ipFamily v1.IPFamily
	ctx      context.Context
	logger   klog.Logger

	// TrackerHandlers implements the Service, EndpointSlice and topology
	// handlers: they feed the trackers and gate the first sync until both
	// informers have synced (Initialized).
	*proxy.TrackerHandlers
	endpointsChanges *proxy.EndpointsChangeTracker
	serviceChanges   *proxy.ServiceChangeTracker

	mu             sync.Mutex // protects the fields below
	svcPortMap     proxy.ServicePortMap
	endpointsMap   proxy.EndpointsMap
	topologyLabels map[string]string
	lastFullSync   time.Time
	// lastKernelContact is when a transaction or a table check last showed the
	// kernel still has our table; see tableMissing.
	lastKernelContact time.Time
	// tableCheckDue is set once per syncPeriod by SyncLoop's ticker.
	tableCheckDue      atomic.Bool
	needFullSync       bool
	cidrsChanged       bool
	staleCleanupQueued atomic.Bool
	syncRunner         *runner.BoundedFrequencyRunner
	syncPeriod         time.Duration

	// healthCheckPorts is what the service health server was last told to
	// serve; nil until the first sync.
	healthCheckPorts map[types.NamespacedName]uint16

	// synced caches, per service port, what the last sync derived from it.
	synced map[proxy.ServicePortName]*syncedService
	// noLocal counts service ports whose internal/external traffic policy
	// is Local with no local endpoints (sync_proxy_rules_no_local_endpoints_total).
	noLocalInternal, noLocalExternal int

	syncer *syncer

	conntrack           conntrack.Interface
	nodeName            string
	nodeIP              net.IP
	serviceHealthServer healthcheck.ServiceHealthServer
	healthzServer       *healthcheck.ProxyHealthServer

	localhostNodePortProxy *localnodeportproxy.LocalNodePortProxy
}

type syncedService struct {
	owner           string
	name            proxy.ServicePortName
	noLocalInternal bool
	noLocalExternal bool
	nodePort        *localnodeportproxy.NodePortSpec
}

var _ proxy.Provider = &Proxier{}

// NewProxier returns a new single-stack nftables proxier. With initOnly it
// only checks that nftables is usable and returns (nil, nil).
func NewProxier(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (*Proxier, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	nft, err := getNFTablesInterface(ipFamily)
	if err != nil {
		return nil, err
	}
	if initOnly {
		logger.Info("System initialized and --init-only specified")
		return nil, nil
	}
	nodePortAddresses := proxyutil.NewNodePortAddresses(ipFamily, config.NodePortAddresses)
	serviceHealthServer := healthcheck.NewServiceHealthServer(nodeName, recorder, nodePortAddresses, healthzServer, ipFamily)
	return newProxier(ctx, nft, config, ipFamily, localDetector, nodeName, nodeIP, nodePortAddresses,
		proxyutil.RealNetwork{}, conntrack.New(), serviceHealthServer, healthzServer)
}

// NewDryRunProxier builds a proxier that programs nothing: every nft
// transaction a sync would run is written to out (in `nft -f` syntax) and
// applied to an in-memory knftables fake instead of the kernel. It needs no
// privileges, so cmd/kube-proxy can use it to show what it would do.
// Conntrack cleanup and per-service health checks are faked too.
func NewDryRunProxier(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	out io.Writer,
) (*Proxier, error) {
	nft := &DryRunInterface{Interface: knftables.NewFake(familyOf(ipFamily), kubeProxyTable), Out: out}
	nodePortAddresses := proxyutil.NewNodePortAddresses(ipFamily, config.NodePortAddresses)
	return newProxier(ctx, nft, config, ipFamily, localDetector, nodeName, nodeIP, nodePortAddresses,
		proxyutil.RealNetwork{}, conntrack.NewFake(), healthcheck.NewFakeServiceHealthServer(), nil)
}

// newProxier is the constructor shared by production, dry-run and tests.
func newProxier(ctx context.Context,
	nft knftables.Interface,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	nodePortAddresses *proxyutil.NodePortAddresses,
	nw proxyutil.NetworkInterfacer,
	ct conntrack.Interface,
	serviceHealthServer healthcheck.ServiceHealthServer,
	healthzServer *healthcheck.ProxyHealthServer,
) (*Proxier, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	masqueradeBit := 14
	if config.NFTables.MasqueradeBit != nil {
		masqueradeBit = int(*config.NFTables.MasqueradeBit)
	}
	if masqueradeBit < 0 || masqueradeBit > 31 {
		return nil, fmt.Errorf("nftables masqueradeBit %d out of range [0, 31]", masqueradeBit)
	}
	if localDetector == nil {
		localDetector = proxyutil.NewNoOpLocalDetector()
	}

	p := &Proxier{
		ipFamily:            ipFamily,
		ctx:                 ctx,
		logger:              logger,
		svcPortMap:          make(proxy.ServicePortMap),
		serviceChanges:      proxy.NewServiceChangeTracker(ipFamily, newServiceInfo, nil),
		endpointsMap:        make(proxy.EndpointsMap),
		endpointsChanges:    proxy.NewEndpointsChangeTracker(ipFamily, nodeName, newEndpointInfo, nil),
		needFullSync:        true,
		syncPeriod:          config.SyncPeriod.Duration,
		synced:              map[proxy.ServicePortName]*syncedService{},
		conntrack:           ct,
		nodeName:            nodeName,
		nodeIP:              nodeIP,
		serviceHealthServer: serviceHealthServer,
		healthzServer:       healthzServer,
	}
	p.TrackerHandlers = proxy.NewTrackerHandlers(p.serviceChanges, p.endpointsChanges, p.Sync,
		func() { _ = p.syncProxyRules() }, p.setTopologyLabels)

	var rejectProtocols []v1.Protocol
	localhostEnabled := features.DefaultFeatureGate.Enabled(features.KubeProxyNFTablesLocalhostNodePorts)
	if localhostEnabled {
		if nodePortAddresses.ContainsExplicitLoopback() {
			p.localhostNodePortProxy = localnodeportproxy.NewLocalNodePortProxy(ctx, ipFamily)
			rejectProtocols = metrics.LocalhostNodePortRejectedProtocols
		} else {
			rejectProtocols = metrics.LocalhostNodePortRejectableProtocols
		}
	}

	p.syncer = newSyncer(nft, syncerConfig{
		family:            ipFamily,
		masqueradeBit:     masqueradeBit,
		masqueradeAll:     config.Linux.MasqueradeAll,
		localDetector:     localDetector,
		nodeIP:            nodeIP,
		nodePortAddresses: nodePortAddresses,
		networkInterfacer: nw,
		rejectProtocols:   rejectProtocols,
		localhostEnabled:  localhostEnabled,
		maxOps:            DefaultMaxOpsPerTransaction,
	}, logger)
	logger.V(2).Info("Using nftables mark for masquerade", "mark", p.syncer.gen.masqueradeMark)
	if err := p.syncer.checkEndpointMaps(ctx); err != nil {
		logger.Info("The nft binary cannot declare endpoint maps; balancing with one anonymous map per service instead, as upstream does (slower to load, and every endpoint change rewrites a rule)", "err", err)
		p.syncer.gen.inlineMaps = true
	}
	if localhostEnabled {
		metrics.SetNFTablesCounterReader(ipFamily, counterReader{nft: nft})
	}

	minSyncPeriod := config.MinSyncPeriod.Duration
	logger.V(2).Info("NFTables sync params", "minSyncPeriod", minSyncPeriod, "syncPeriod", p.syncPeriod, "maxSyncPeriod", proxyutil.FullSyncPeriod)
	p.syncRunner = runner.NewBoundedFrequencyRunner("sync-runner", p.syncProxyRules, minSyncPeriod, p.syncPeriod, proxyutil.FullSyncPeriod)
	return p, nil
}

// servicePortInfo caches what the backend needs per service port.
type servicePortInfo struct {
	*proxy.BaseServicePortInfo
	nameString string
	namespace  string
	name       string
	portName   string
}

func newServiceInfo(port *v1.ServicePort, service *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	spn := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: service.Namespace, Name: service.Name}, Port: port.Name}
	return &servicePortInfo{
		BaseServicePortInfo: base,
		nameString:          spn.String(),
		namespace:           service.Namespace,
		name:                service.Name,
		portName:            port.Name,
	}
}

// endpointInfo carries the precomputed endpoint chain and affinity set names.
type endpointInfo struct {
	*proxy.BaseEndpointInfo
	model *endpointModel
}

func newEndpointInfo(base *proxy.BaseEndpointInfo, spn *proxy.ServicePortName) proxy.Endpoint {
	return &endpointInfo{
		BaseEndpointInfo: base,
		model: newEndpointModel(spn.Namespace, spn.Name, strings.ToLower(string(spn.Protocol)), spn.Port,
			base.IP(), base.Port(), base.IsLocal()),
	}
}

// Sync is called to synchronize the proxier state to nftables as soon as possible.
func (p *Proxier) Sync() {
	if p.healthzServer != nil {
		p.healthzServer.QueuedUpdate(p.ipFamily)
	}
	metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(p.ipFamily)).SetToCurrentTime()
	p.syncRunner.Run()
}

// SyncLoop runs periodic work. It does not return.
func (p *Proxier) SyncLoop() {
	// Report healthy at start in case no sync ever succeeds, so that the
	// health timeout measures from now.
	if p.healthzServer != nil {
		p.healthzServer.Updated(p.ipFamily)
	}
	metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(p.ipFamily)).SetToCurrentTime()
	// The runner's own maximum interval is the hourly full sync. Asking for a
	// sync every syncPeriod lets the cheap table check in syncProxyRules notice
	// a table deleted from outside; with nothing changed, that sync makes no
	// other kernel call.
	if p.syncPeriod > 0 {
		go wait.Until(func() {
			p.tableCheckDue.Store(true)
			p.syncRunner.Run()
		}, p.syncPeriod, p.ctx.Done())
	}
	p.syncRunner.Loop(wait.NeverStop)
}

// setTopologyLabels is called when this node's topology labels change:
// they change which endpoints every service uses, so the next sync is full.
func (p *Proxier) setTopologyLabels(topologyLabels map[string]string) {
	p.mu.Lock()
	p.topologyLabels = topologyLabels
	p.needFullSync = true
	p.mu.Unlock()
	p.logger.V(4).Info("Updated proxier node topology labels", "labels", topologyLabels)
}

// OnServiceCIDRsChanged is called with the complete list of ServiceCIDRs
// whenever it changes. Traffic to unallocated IPs in this family's ranges is
// dropped.
func (p *Proxier) OnServiceCIDRsChanged(cidrs []string) {
	var mine []string
	for _, cidr := range cidrs {
		_, n, err := netutils.ParseCIDRSloppy(cidr)
		if err != nil {
			p.logger.Error(err, "Ignoring invalid ServiceCIDR", "cidr", cidr)
			continue
		}
		isV4 := len(n.Mask) == net.IPv4len
		if !isV4 && n.IP.To4() != nil {
			// IPv4-mapped IPv6 ranges are not valid ServiceCIDRs and print
			// as IPv4, which neither family's rules accept.
			p.logger.Error(nil, "Ignoring IPv4-mapped IPv6 ServiceCIDR", "cidr", cidr)
			continue
		}
		if (p.ipFamily == v1.IPv4Protocol) == isV4 {
			mine = append(mine, n.String())
		}
	}
	joined := strings.Join(mine, ",")
	p.mu.Lock()
	defer p.mu.Unlock()
	if joined != p.syncer.serviceCIDRs {
		p.syncer.serviceCIDRs = joined
		p.cidrsChanged = true
	}
}

// syncProxyRules is the sync function run by the runner. It assumes p.mu is
// not held.
func (p *Proxier) syncProxyRules() (retryError error) {
	p.mu.Lock()
	defer p.mu.Unlock()

	if !p.Initialized() {
		p.logger.V(2).Info("Not syncing nftables until Services and Endpoints have been received from master")
		return nil
	}
	ctx := p.ctx
	start := time.Now()
	doFullSync := p.needFullSync || time.Since(p.lastFullSync) > proxyutil.FullSyncPeriod
	// Syncs that change nothing make no kernel call, so a table deleted from
	// outside (nft flush ruleset, a firewall reload) would only be noticed at the
	// next change. Once per syncPeriod a tiny listing checks the table is there.
	if p.tableCheckDue.Swap(false) && !doFullSync && time.Since(p.lastKernelContact) >= p.syncPeriod/2 {
		if p.syncer.tableMissing(ctx) {
			p.logger.Info("The kube-proxy nftables table disappeared; rebuilding it with a full sync")
			doFullSync = true
		}
		p.lastKernelContact = start
	}

	defer func() {
		family := string(p.ipFamily)
		metrics.SyncProxyRulesLatency.WithLabelValues(family).Observe(metrics.SinceInSeconds(start))
		if doFullSync {
			metrics.SyncFullProxyRulesLatency.WithLabelValues(family).Observe(metrics.SinceInSeconds(start))
		} else {
			metrics.SyncPartialProxyRulesLatency.WithLabelValues(family).Observe(metrics.SinceInSeconds(start))
		}
		p.logger.V(2).Info("SyncProxyRules complete", "elapsed", time.Since(start))
	}()

	serviceUpdateResult := p.svcPortMap.Update(p.serviceChanges)
	endpointUpdateResult := p.endpointsMap.Update(p.endpointsChanges)

	if err := p.syncer.deleteStaleChains(ctx, start, staleChainMinAge); err != nil {
		p.logger.Error(err, "Unable to delete stale chains; will retry with a full sync")
		metrics.NFTablesCleanupFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		doFullSync = true
	}
	p.logger.V(2).Info("Syncing nftables rules", "fullSync", doFullSync)

	in := syncInput{full: doFullSync}
	var updated sets.Set[types.NamespacedName]
	if !doFullSync {
		updated = serviceUpdateResult.UpdatedServices.Union(endpointUpdateResult.UpdatedServices)
	}
	if doFullSync {
		clear(p.synced)
		p.noLocalInternal, p.noLocalExternal = 0, 0
	} else if serviceUpdateResult.UpdatedServices.Len() > 0 {
		// Only Service changes can remove service ports.
		for name, ss := range p.synced {
			if _, ok := p.svcPortMap[name]; !ok {
				in.removed = append(in.removed, ss.owner)
				p.forget(name)
			}
		}
	}
	nodePortsChanged := doFullSync || len(in.removed) > 0
	// The syncer lets go of each model once it is built (see syncInput), so
	// what is needed afterwards is kept by name.
	var built []proxy.ServicePortName
	if doFullSync || updated.Len() > 0 {
		for name, svc := range p.svcPortMap {
			if !doFullSync && !updated.Has(name.NamespacedName) {
				continue
			}
			m, ss := p.model(name, svc)
			if m == nil {
				if _, had := p.synced[name]; had {
					in.removed = append(in.removed, p.synced[name].owner)
					p.forget(name)
				}
				continue
			}
			p.forget(name)
			p.synced[name] = ss
			in.services = append(in.services, m)
			built = append(built, name)
			nodePortsChanged = true
		}
	}
	in.rewriteClusterIPsCheck = p.cidrsChanged

	res, err := p.syncer.sync(ctx, in)
	// Count Local-policy service ports without local endpoints from what
	// the generator decided.
	for _, name := range built {
		ss := p.synced[name]
		if ss == nil {
			continue
		}
		r := p.syncer.view.owners[ss.owner]
		if r == nil {
			continue
		}
		ss.noLocalInternal, ss.noLocalExternal = r.noLocalInternal, r.noLocalExternal
		if ss.noLocalInternal {
			p.noLocalInternal++
		}
		if ss.noLocalExternal {
			p.noLocalExternal++
		}
	}
	if err != nil {
		p.logger.Error(err, "nftables sync failed")
		metrics.NFTablesSyncFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		// The trackers' changes are consumed; only a full sync can recover.
		p.needFullSync = true
		p.logger.Info("Sync failed", "retryingTime", p.syncPeriod)
		return fmt.Errorf("nftables sync failed: %w", err)
	}
	p.needFullSync = false
	p.cidrsChanged = false
	if res.transactions > 0 {
		p.lastKernelContact = time.Now()
	}
	// Flushed chains can be deleted a second later; ask for a sync then
	// rather than leaving them until the next change or the hourly sync.
	if len(p.syncer.view.stale) > 0 && !p.staleCleanupQueued.Swap(true) {
		time.AfterFunc(staleChainMinAge, func() {
			p.staleCleanupQueued.Store(false)
			p.syncRunner.Run()
		})
	}
	if doFullSync {
		p.lastFullSync = time.Now()
	}
	p.logger.V(2).Info("Reloaded service nftables data", "numServices", len(p.svcPortMap), "operations", res.ops, "transactions", res.transactions)

	for name, times := range endpointUpdateResult.LastChangeTriggerTimes {
		for _, t := range times {
			latency := metrics.SinceInSeconds(t)
			metrics.NetworkProgrammingLatency.WithLabelValues(string(p.ipFamily)).Observe(latency)
			p.logger.V(4).Info("Network programming", "endpoint", klog.KRef(name.Namespace, name.Name), "elapsed", latency)
		}
	}
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", string(p.ipFamily)).Set(float64(p.noLocalInternal))
	metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("external", string(p.ipFamily)).Set(float64(p.noLocalExternal))
	if p.healthzServer != nil {
		p.healthzServer.Updated(p.ipFamily)
	}
	metrics.SyncProxyRulesLastTimestamp.WithLabelValues(string(p.ipFamily)).SetToCurrentTime()

	p.syncHealthChecks(doFullSync, serviceUpdateResult.UpdatedServices, endpointUpdateResult.UpdatedServices)

	if p.localhostNodePortProxy != nil && nodePortsChanged {
		var specs []localnodeportproxy.NodePortSpec
		for _, ss := range p.synced {
			if ss.nodePort != nil {
				specs = append(specs, *ss.nodePort)
			}
		}
		p.localhostNodePortProxy.SyncNodePorts(specs)
	}

	if endpointUpdateResult.ConntrackCleanupRequired {
		conntrack.CleanStaleEntries(p.conntrack, p.ipFamily, p.svcPortMap, p.endpointsMap)
	}
	return nil
}

// syncHealthChecks tells the per-service health check server which services
// it serves and how many local ready endpoints each has. Upstream recomputes
// both over every service and endpoint on every sync; at 10k services that is
// most of a one-endpoint sync's CPU. The server only looks at services with a
// health check node port, so the counts are recomputed only when the service
// set changed or one of those services had an endpoint change, and only for
// those services.
func (p *Proxier) syncHealthChecks(full bool, updatedServices, updatedEndpoints sets.Set[types.NamespacedName]) {
	servicesChanged := full || p.healthCheckPorts == nil || updatedServices.Len() > 0
	if servicesChanged {
		p.healthCheckPorts = p.svcPortMap.HealthCheckNodePorts()
		if err := p.serviceHealthServer.SyncServices(p.healthCheckPorts); err != nil {
			p.logger.Error(err, "Error syncing healthcheck services")
		}
	}
	if !servicesChanged {
		relevant := false
		for name := range updatedEndpoints {
			if _, ok := p.healthCheckPorts[name]; ok {
				relevant = true
				break
			}
		}
		if !relevant {
			return
		}
	}
	if err := p.serviceHealthServer.SyncEndpoints(localReadyEndpoints(p.endpointsMap, p.healthCheckPorts)); err != nil {
		p.logger.Error(err, "Error syncing healthcheck endpoints")
	}
}

// localReadyEndpoints counts the distinct local ready endpoint IPs of each
// service in only, as EndpointsMap.LocalReadyEndpoints does for all services
// (endpoints under any port name count, as upstream).
func localReadyEndpoints(em proxy.EndpointsMap, only map[types.NamespacedName]uint16) map[types.NamespacedName]int {
	ips := map[types.NamespacedName]sets.Set[string]{}
	for spn, eps := range em {
		if _, ok := only[spn.NamespacedName]; !ok {
			continue
		}
		for _, ep := range eps {
			if ep == nil || !ep.IsReady() || !ep.IsLocal() {
				continue
			}
			s := ips[spn.NamespacedName]
			if s == nil {
				s = sets.New[string]()
				ips[spn.NamespacedName] = s
			}
			s.Insert(ep.IP())
		}
	}
	counts := make(map[types.NamespacedName]int, len(ips))
	for name, s := range ips {
		counts[name] = s.Len()
	}
	return counts
}

// forget removes name's cached contribution to the counters.
func (p *Proxier) forget(name proxy.ServicePortName) {
	ss := p.synced[name]
	if ss == nil {
		return
	}
	if ss.noLocalInternal {
		p.noLocalInternal--
	}
	if ss.noLocalExternal {
		p.noLocalExternal--
	}
	delete(p.synced, name)
}

// model converts a service port and its endpoints (categorised by the brain)
// into the backend's model. It returns nil for a service port that cannot be
// programmed, after logging why.
func (p *Proxier) model(name proxy.ServicePortName, svc proxy.ServicePort) (*serviceModel, *syncedService) {
	logger := p.logger.WithValues("servicePort", name.String())
	clusterIP := svc.ClusterIP()
	if clusterIP == nil || (p.ipFamily == v1.IPv4Protocol) != (clusterIP.To4() != nil) {
		logger.Error(nil, "Skipping service port with a cluster IP of the wrong family or none", "clusterIP", clusterIP)
		return nil, nil
	}
	protocol := strings.ToLower(string(svc.Protocol()))
	switch protocol {
	case "tcp", "udp", "sctp":
	default:
		logger.Error(nil, "Skipping service port with unsupported protocol", "protocol", svc.Protocol())
		return nil, nil
	}
	if svc.Port() <= 0 || svc.Port() > 65535 || svc.NodePort() < 0 || svc.NodePort() > 65535 {
		logger.Error(nil, "Skipping service port with an out-of-range port", "port", svc.Port(), "nodePort", svc.NodePort())
		return nil, nil
	}

	owner := name.String()
	m := &serviceModel{
		owner:                owner,
		protocol:             protocol,
		clusterIP:            clusterIP.String(),
		port:                 svc.Port(),
		nodePort:             svc.NodePort(),
		affinity:             svc.SessionAffinityType() == v1.ServiceAffinityClientIP,
		stickySeconds:        svc.StickyMaxAgeSeconds(),
		externalPolicyLocal:  svc.ExternalPolicyLocal(),
		internalPolicyLocal:  svc.InternalPolicyLocal(),
		externallyAccessible: svc.ExternallyAccessible(),
		usesClusterEndpoints: svc.UsesClusterEndpoints(),
		usesLocalEndpoints:   svc.UsesLocalEndpoints(),
	}
	var namespace, svcName, portName string
	if info, ok := svc.(*servicePortInfo); ok {
		namespace, svcName, portName = info.namespace, info.name, info.portName
	} else {
		namespace, svcName, portName = name.Namespace, name.Name, name.Port
	}
	newServiceChains(m, namespace, svcName, portName)
	for _, ip := range svc.ExternalIPs() {
		if s := p.familyIP(ip); s != "" {
			m.externalIPs = append(m.externalIPs, s)
		}
	}
	for _, ip := range svc.LoadBalancerVIPs() {
		if s := p.familyIP(ip); s != "" {
			m.lbVIPs = append(m.lbVIPs, s)
		}
	}
	for _, cidr := range svc.LoadBalancerSourceRanges() {
		if cidr != nil && (p.ipFamily == v1.IPv4Protocol) == (cidr.IP.To4() != nil) {
			m.sourceRanges = append(m.sourceRanges, cidr)
		}
	}

	clusterEps, localEps, reachable, hasAny := proxy.CategorizeEndpoints(p.endpointsMap[name], svc, p.nodeName, p.topologyLabels)
	conv := func(eps []proxy.Endpoint) []*endpointModel {
		out := make([]*endpointModel, 0, len(eps))
		for _, ep := range eps {
			if em := p.endpointModel(logger, name, namespace, svcName, portName, protocol, ep); em != nil {
				out = append(out, em)
			}
		}
		return out
	}
	m.clusterEndpoints = conv(clusterEps)
	m.localEndpoints = conv(localEps)
	m.reachableEndpoints = conv(reachable)
	m.hasEndpoints = hasAny
	m.rejectLocalhostNodePort = m.nodePort != 0 && p.rejectsLocalhostNodePort(svc.Protocol())

	ss := &syncedService{owner: owner, name: name}
	m.name = name
	if p.localhostNodePortProxy != nil && m.nodePort != 0 && svc.Protocol() == v1.ProtocolTCP {
		eps := m.clusterEndpoints
		if m.externalPolicyLocal {
			eps = m.localEndpoints
		}
		spec := &localnodeportproxy.NodePortSpec{
			ServicePortName:     name,
			Protocol:            svc.Protocol(),
			NodePort:            m.nodePort,
			SessionAffinityType: svc.SessionAffinityType(),
			StickyMaxAgeSeconds: svc.StickyMaxAgeSeconds(),
		}
		for _, ep := range eps {
			spec.Endpoints = append(spec.Endpoints, ep.endpoint)
		}
		ss.nodePort = spec
	}
	return m, ss
}

func (p *Proxier) rejectsLocalhostNodePort(protocol v1.Protocol) bool {
	for _, rp := range p.syncer.rejectProtocols {
		if rp == protocol {
			return true
		}
	}
	return false
}

func (p *Proxier) familyIP(ip net.IP) string {
	if ip == nil || (p.ipFamily == v1.IPv4Protocol) != (ip.To4() != nil) {
		return ""
	}
	return ip.String()
}

func (p *Proxier) endpointModel(logger klog.Logger, name proxy.ServicePortName, ns, svc, portName, protocol string, ep proxy.Endpoint) *endpointModel {
	if info, ok := ep.(*endpointInfo); ok {
		return info.model
	}
	// A foreign Endpoint implementation (the interface is public); validate
	// what it gives us before putting it into rules.
	ip := net.ParseIP(ep.IP())
	if ip == nil || (p.ipFamily == v1.IPv4Protocol) != (ip.To4() != nil) || ep.Port() <= 0 || ep.Port() > 65535 {
		logger.Error(nil, "Skipping invalid endpoint", "endpoint", ep.String())
		return nil
	}
	return newEndpointModel(ns, svc, protocol, portName, ip.String(), ep.Port(), ep.IsLocal())
}
