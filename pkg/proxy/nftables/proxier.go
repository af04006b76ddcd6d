//go:build linux

package nftables

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodeportproxy"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
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
	return NewDualStackProxierWithOptions(ctx, config, localDetectors, nodeName, nodeIPs, recorder, healthzServer, initOnly)
}

// NewDualStackProxierWithOptions is NewDualStackProxier with Options applied
// to both single-stack proxiers. (WithNFTables, which is per family, must
// not be given here.)
func NewDualStackProxierWithOptions(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
	opts ...Option,
) (proxy.Provider, error) {
	if applyOptions(opts).nft != nil {
		return nil, fmt.Errorf("nftables: WithNFTables names one family's table; build each family with NewProxierWithOptions")
	}
	// Both families' writes move the kernel's one ruleset generation; a
	// shared ledger keeps each family's drift check from taking the other's
	// writes for another program's.
	ledger := newGenLedger()
	opts = append(slices.Clone(opts), func(o *options) { o.ledger = ledger })
	return metaproxier.NewDualStack(initOnly, func(family v1.IPFamily) (*Proxier, error) {
		return NewProxierWithOptions(ctx, config, family, localDetectors[family], nodeName, nodeIPs[family], recorder, healthzServer, initOnly, opts...)
	})
}

// Proxier is an nftables-based proxy for one IP family. The embedded Shell
// runs the sync loop and implements the Provider handlers; the proxier's own
// part is rulesBackend, which turns each Update into nft transactions.
type Proxier struct {
	*syncshell.Shell

	ipFamily v1.IPFamily
	logger   klog.Logger

	// The fields below are only touched by rulesBackend.Sync, which the
	// Shell never runs concurrently.

	// synced caches, per service port, what the last sync derived from it.
	synced map[proxy.ServicePortName]*syncedService
	syncer *syncer
	// local converts changed service ports into the library's node-local
	// model, which the rule generator's models are built from.
	local *localnode.Computer

	localhostNodePortProxy *localnodeportproxy.LocalNodePortProxy
}

type syncedService struct {
	owner    string
	nodePort *localnodeportproxy.NodePortSpec
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
	return NewProxierWithOptions(ctx, config, ipFamily, localDetector, nodeName, nodeIP, recorder, healthzServer, initOnly)
}

// NewProxierWithOptions is NewProxier with Options, the same set the
// iptables proxier takes (plus WithNFTables).
func NewProxierWithOptions(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
	opts ...Option,
) (*Proxier, error) {
	if config == nil {
		return nil, fmt.Errorf("nftables proxier (%s): nil configuration", ipFamily)
	}
	if ipFamily != v1.IPv4Protocol && ipFamily != v1.IPv6Protocol {
		return nil, fmt.Errorf("nftables proxier: invalid IP family %q", ipFamily)
	}
	o := applyOptions(opts)
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	nft := o.nft
	var elements elementWriter
	// The drift check reads the host's own table back over netlink.
	var reader *tableReader
	switch {
	case o.DryRun != nil:
		nft = NewDryRunInterface(familyOf(ipFamily), o.DryRun)
	case nft == nil:
		var err error
		if nft, err = getNFTablesInterface(ipFamily); err != nil {
			return nil, err
		}
		// The host's own table: endpoint changes may bypass nft, under the
		// gate that already makes knftables list over netlink.
		if features.DefaultFeatureGate.Enabled(features.NFTablesNetlink) {
			elements = newNetlinkElements(ipFamily)
		}
		reader = newTableReader(ipFamily == v1.IPv6Protocol)
	}
	if initOnly {
		logger.Info("System initialized and --init-only specified")
		return nil, nil
	}
	nodePortAddresses := proxyutil.NewNodePortAddresses(ipFamily, config.NodePortAddresses)
	if o.DryRun != nil {
		// A dry run touches nothing on the host (no conntrack cleanup) and
		// reports to no one.
		healthzServer = nil
	} else if o.conntrack == nil {
		o.conntrack = conntrack.New()
	}
	o.Complete(ipFamily, nodeName, recorder, nodePortAddresses, healthzServer)

	masqueradeBit := 14
	if config.NFTables.MasqueradeBit != nil {
		masqueradeBit = int(*config.NFTables.MasqueradeBit)
	}
	if masqueradeBit < 0 || masqueradeBit > 31 {
		return nil, fmt.Errorf("nftables masqueradeBit %d out of range [0, 31]", masqueradeBit)
	}

	p := &Proxier{
		ipFamily: ipFamily,
		logger:   logger,
		synced:   map[proxy.ServicePortName]*syncedService{},
		local:    localnode.NewComputer(localnode.Family(ipFamily)),
	}

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
		networkInterfacer: o.NetworkInterfacer,
		rejectProtocols:   rejectProtocols,
		localhostEnabled:  localhostEnabled,
		maxOps:            DefaultMaxOpsPerTransaction,
	}, logger)
	p.syncer.elements = elements
	p.syncer.driftState.reader = reader
	if o.ledger != nil {
		p.syncer.driftState.ledger = o.ledger
	}
	logger.V(2).Info("Using nftables mark for masquerade", "mark", p.syncer.masqueradeMark())
	if err := p.syncer.checkEndpointMaps(ctx); err != nil {
		logger.Info("The nft binary cannot declare endpoint maps; balancing with one anonymous map per service instead, as upstream does (slower to load, and every endpoint change rewrites a rule)", "err", err)
		p.syncer.useInlineMaps()
	}
	if localhostEnabled {
		metrics.SetNFTablesCounterReader(ipFamily, counterReader{nft: nft})
	}

	shellOpts := syncshell.ProxierOptions(ipFamily, nodeName, config.MinSyncPeriod.Duration, config.SyncPeriod.Duration,
		healthzServer, o.ServiceHealthServer, conntrack.StaleEntriesCleaner(o.conntrack, ipFamily))
	shellOpts.MakeServicePort = newServiceInfo
	// Syncs that change nothing make no kernel call, so a change made from
	// outside would only be noticed at the next full sync; once per
	// syncPeriod the drift check (drift.go) compares the table with what
	// was programmed, which costs one netlink request when nothing wrote to
	// nftables since.
	shellOpts.CheckInterval = shellOpts.RetryInterval
	shellOpts.Logger, shellOpts.OnSync = &logger, o.SyncHook
	logger.V(2).Info("NFTables sync params", "minSyncPeriod", shellOpts.MinInterval, "syncPeriod", shellOpts.RetryInterval, "maxSyncPeriod", shellOpts.MaxInterval)
	shell, err := syncshell.New(ctx, shellOpts, (*rulesBackend)(p))
	if err != nil {
		return nil, fmt.Errorf("nftables proxier (%s): %w", ipFamily, err)
	}
	p.Shell = shell
	return p, nil
}

// NewDryRunProxier builds a proxier that programs nothing: every nft
// transaction a sync would run is written to out (in `nft -f` syntax) and
// applied to an in-memory table instead of the kernel. It needs no
// privileges, so cmd/kube-proxy can use it to show what it would do.
// It cleans no conntrack entries and fakes the per-service health checks. It is
// NewProxierWithOptions with WithDryRun(out).
func NewDryRunProxier(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	out io.Writer,
) (*Proxier, error) {
	return NewProxierWithOptions(ctx, config, ipFamily, localDetector, nodeName, nodeIP, nil, nil, false, WithDryRun(out))
}

// servicePortInfo caches what the backend needs per service port.
type servicePortInfo struct {
	*proxy.BaseServicePortInfo
	namespace string
	name      string
	portName  string
}

func newServiceInfo(port *v1.ServicePort, service *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	return &servicePortInfo{
		BaseServicePortInfo: base,
		namespace:           service.Namespace,
		name:                service.Name,
		portName:            port.Name,
	}
}

// rulesBackend is the Proxier seen as the Shell's backend. It is a separate
// type so that its Sync does not clash with Provider's Sync.
type rulesBackend Proxier

var (
	_ syncshell.Backend      = &rulesBackend{}
	_ syncshell.DriftChecker = &rulesBackend{}
)

// Sync turns u into nft transactions: every service port's rules on a full
// sync, only the changed Services' otherwise.
func (b *rulesBackend) Sync(ctx context.Context, u *syncshell.Update) (syncshell.Outcome, error) {
	p := (*Proxier)(b)
	var out syncshell.Outcome
	start := time.Now()
	full := u.Full
	if err := p.syncer.deleteStaleChains(ctx, start, staleChainMinAge); err != nil {
		p.logger.Error(err, "Unable to delete stale chains; will retry with a full sync")
		metrics.NFTablesCleanupFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		full, out.Full = true, true
	}

	in := syncInput{full: full}
	if full {
		clear(p.synced)
	} else {
		for _, name := range u.RemovedPorts {
			if ss := p.synced[name]; ss != nil {
				in.removed = append(in.removed, ss.owner)
				delete(p.synced, name)
			}
		}
	}
	nodePortsChanged := full || len(in.removed) > 0
	in.each = func(yield func(string, *serviceModel) bool) {
		for name, svc := range u.Services {
			if !full && !u.Changed(name.NamespacedName) {
				continue
			}
			var m *serviceModel
			var ss *syncedService
			if tp := u.Policy(name); tp != nil {
				m, ss = p.model(ctx, name, svc, tp)
			}
			if m == nil {
				// A port the node-local model leaves out must not keep the
				// rules an earlier sync gave it.
				if old := p.synced[name]; old != nil {
					delete(p.synced, name)
					if !yield(old.owner, nil) {
						return
					}
				}
				continue
			}
			p.synced[name] = ss
			nodePortsChanged = true
			if !yield(m.owner, m) {
				return
			}
		}
	}
	if u.ServiceCIDRsChanged || full {
		p.syncer.setServiceCIDRs(strings.Join(u.ServiceCIDRs, ","))
	}
	in.rewriteClusterIPsCheck = u.ServiceCIDRsChanged

	res, err := p.syncer.sync(ctx, in)
	out.Programmed = res.transactions > 0
	// Flushed chains can be deleted a second later; ask for a sync then
	// rather than leaving them until the next change or the hourly sync.
	if p.syncer.staleChainsPending() {
		out.SyncAgainAfter = staleChainMinAge
	}
	if err != nil {
		metrics.NFTablesSyncFailuresTotal.WithLabelValues(string(p.ipFamily)).Inc()
		return out, fmt.Errorf("nftables sync failed: %w", err)
	}
	p.logger.V(2).Info("Reloaded service nftables data", "numServices", len(u.Services), "operations", res.ops, "transactions", res.transactions)

	if p.localhostNodePortProxy != nil && nodePortsChanged {
		var specs []localnodeportproxy.NodePortSpec
		for _, ss := range p.synced {
			if ss.nodePort != nil {
				specs = append(specs, *ss.nodePort)
			}
		}
		p.localhostNodePortProxy.SyncNodePorts(specs)
	}
	return out, nil
}

// Drift compares our table with what the syncer programmed (drift.go).
func (b *rulesBackend) Drift(ctx context.Context) ([]syncshell.Drift, error) {
	return (*Proxier)(b).syncer.drift(ctx)
}

// model converts a valid service port and its resolved traffic policy into
// the generator's model, through the library's node-local model so that
// third-party backends and this one are handed the same thing. It returns nil
// for a port the node-local model leaves out (logged to ctx's logger).
func (p *Proxier) model(ctx context.Context, name proxy.ServicePortName, svc proxy.ServicePort, tp *proxy.TrafficPolicy) (*serviceModel, *syncedService) {
	ln, ok := p.local.ComputeServicePort(ctx, name, svc, tp)
	if !ok {
		return nil, nil
	}
	return p.modelOf(name, svc, &ln)
}

// modelOf builds the generator's model of a service port from its
// node-local model.
func (p *Proxier) modelOf(name proxy.ServicePortName, svc proxy.ServicePort, ln *localnode.Service) (*serviceModel, *syncedService) {
	protocol := strings.ToLower(string(name.Protocol))
	owner := name.String()
	m := &serviceModel{
		owner:                owner,
		protocol:             protocol,
		clusterIP:            ln.ClusterIP.String(),
		port:                 int(ln.Port),
		nodePort:             int(ln.NodePort),
		affinity:             ln.SessionAffinity == localnode.AffinityClientIP,
		stickySeconds:        int(ln.AffinityTimeout / time.Second),
		externalPolicyLocal:  ln.ExternalPolicy == localnode.PolicyLocal,
		internalPolicyLocal:  ln.InternalPolicy == localnode.PolicyLocal,
		externallyAccessible: ln.ExternallyAccessible(),
		internal:             ln.InternalNoEndpoints(),
		external:             ln.ExternalNoEndpoints(),
		hasEndpoints:         ln.HasAnyEndpoints,
	}
	namespace, svcName, portName := name.Namespace, name.Name, name.Port
	if info, ok := svc.(*servicePortInfo); ok {
		namespace, svcName, portName = info.namespace, info.name, info.portName
	}
	newServiceChains(m, namespace, svcName, portName)
	for _, ip := range ln.ExternalIPs {
		m.externalIPs = append(m.externalIPs, ip.String())
	}
	for _, ip := range ln.LoadBalancerVIPs {
		m.lbVIPs = append(m.lbVIPs, ip.String())
	}
	for _, r := range ln.SourceRanges {
		m.sourceRanges = append(m.sourceRanges, &net.IPNet{IP: r.Addr().AsSlice(), Mask: net.CIDRMask(r.Bits(), r.Addr().BitLen())})
	}

	order := ln.RuleOrder()
	all := make([]endpointModel, len(order.Endpoints))
	m.reachableEndpoints = make([]*endpointModel, len(all))
	for k, ep := range order.Endpoints {
		endpoint := order.Text[k]
		all[k] = endpointModel{ip: hostOf(endpoint, ep.IP.Is6()), port: int(ep.Port), local: ep.Local, endpoint: endpoint,
			namespace: namespace, name: svcName, protocol: protocol, portName: portName}
		m.reachableEndpoints[k] = &all[k]
	}
	m.clusterEndpoints = make([]*endpointModel, len(order.Cluster))
	for j, k := range order.Cluster {
		m.clusterEndpoints[j] = &all[k]
	}
	m.localEndpoints = make([]*endpointModel, len(order.Local))
	for j, k := range order.Local {
		m.localEndpoints[j] = &all[k]
	}
	m.usesCluster = len(m.clusterEndpoints) > 0
	m.usesLocal = len(m.localEndpoints) > 0
	m.rejectLocalhostNodePort = m.nodePort != 0 && p.syncer.rejectsLocalhostNodePort(name.Protocol)

	ss := &syncedService{owner: owner}
	if p.localhostNodePortProxy != nil && m.nodePort != 0 && name.Protocol == v1.ProtocolTCP {
		eps := m.clusterEndpoints
		if m.externalPolicyLocal {
			eps = m.localEndpoints
		}
		spec := &localnodeportproxy.NodePortSpec{
			ServicePortName:     name,
			Protocol:            name.Protocol,
			NodePort:            m.nodePort,
			SessionAffinityType: v1.ServiceAffinity(ln.SessionAffinity),
			StickyMaxAgeSeconds: m.stickySeconds,
		}
		for _, ep := range eps {
			spec.Endpoints = append(spec.Endpoints, ep.endpoint)
		}
		ss.nodePort = spec
	}
	return m, ss
}

// hostOf returns the address part of an "ip:port" string ("[ip]:port" for
// IPv6) without allocating: at 10k services a full sync models 100k
// endpoints, and a second string per endpoint was a measurable share of it.
func hostOf(endpoint string, is6 bool) string {
	host := endpoint[:strings.LastIndexByte(endpoint, ':')]
	if is6 {
		host = host[1 : len(host)-1]
	}
	return host
}
