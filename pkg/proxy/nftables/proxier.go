//go:build linux

package nftables

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
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
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/proxierargs"
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
	o, err := proxieropts.Collect[ownOptions](opts)
	if err != nil {
		return nil, fmt.Errorf("nftables dual-stack proxier: %w", err)
	}
	if o.Own.nft != nil {
		return nil, fmt.Errorf("nftables: WithNFTables names one family's table; build each family with NewProxierWithOptions")
	}
	// Both families' writes move the kernel's one ruleset generation; a
	// shared ledger keeps each family's drift check from taking the other's
	// writes for another program's.
	ledger := newGenLedger()
	opts = append(slices.Clone(opts), proxieropts.Set(func(o *ownOptions) { o.ledger = ledger }))
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
	if err := proxierargs.Check("nftables", config, ipFamily); err != nil {
		return nil, err
	}
	o, err := proxieropts.Collect[ownOptions](opts)
	if err != nil {
		return nil, fmt.Errorf("nftables proxier (%s): %w", ipFamily, err)
	}
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	nft := o.Own.nft
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
	} else if o.Conntrack == nil {
		o.Conntrack = conntrack.New()
	}
	o.Complete(ipFamily, nodeName, recorder, nodePortAddresses, healthzServer)

	masqueradeBit, _, err := proxierargs.MasqueradeMark("nftables", ipFamily, "nftables.masqueradeBit", config.NFTables.MasqueradeBit)
	if err != nil {
		return nil, err
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
	if o.Own.ledger != nil {
		p.syncer.driftState.ledger = o.Own.ledger
	}
	logger.V(2).Info("Using nftables mark for masquerade", "mark", p.syncer.masqueradeMark())
	if err := p.syncer.checkEndpointMaps(ctx); err != nil {
		logger.Info("The nft binary cannot declare endpoint maps; balancing with one anonymous map per service instead, as upstream does (slower to load, and every endpoint change rewrites a rule)", "err", err)
		p.syncer.useInlineMaps()
	}
	if localhostEnabled {
		metrics.SetNFTablesCounterReader(ipFamily, counterReader{nft: nft})
	}

	// Syncs that change nothing make no kernel call, so a change made from
	// outside would only be noticed at the next full sync; once per
	// syncPeriod the drift check (drift.go) compares the table with what
	// was programmed, which costs one netlink request when nothing wrote to
	// nftables since.
	if p.Shell, err = o.NewShell(ctx, syncshell.ProxierShell{Mode: "nftables", Family: ipFamily, NodeName: nodeName, Config: config,
		Healthz: healthzServer, MakeServicePort: newServiceInfo, CheckRules: true, Logger: logger}, (*rulesBackend)(p)); err != nil {
		return nil, err
	}
	return p, nil
}

// NewDryRunProxier builds a proxier that programs nothing: every nft
// transaction a sync would run is written to out (in `nft -f` syntax) and
// applied to an in-memory table instead of the kernel. It needs no
// privileges, so cmd/kube-proxy can use it to show what it would do.
// It cleans no conntrack entries and fakes the per-service health checks. It is
// NewProxierWithOptions with proxieropts.WithDryRun(out).
func NewDryRunProxier(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	out io.Writer,
) (*Proxier, error) {
	return NewProxierWithOptions(ctx, config, ipFamily, localDetector, nodeName, nodeIP, nil, nil, false, proxieropts.WithDryRun(out))
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
