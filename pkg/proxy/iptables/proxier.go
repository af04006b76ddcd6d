//go:build linux

package iptables

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/proxierargs"
	utiliptables "k8s.io/net-utils/iptables"
	utilsysctl "k8s.io/net-utils/sysctl"
)

const (
	// largeClusterEndpointsThreshold is the endpoint count above which rules
	// lose their per-endpoint comments and periodic full resyncs stop, trading
	// debuggability for iptables-restore time.
	largeClusterEndpointsThreshold = 1000

	sysctlRouteLocalnet           = "net/ipv4/conf/all/route_localnet"
	sysctlNFConntrackTCPBeLiberal = "net/netfilter/nf_conntrack_tcp_be_liberal"
)

// NewDualStackProxier builds an IPv4 and an IPv6 proxier and combines them
// with a metaproxier.
func NewDualStackProxier(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipts map[v1.IPFamily]utiliptables.Interface,
	sysctl utilsysctl.Interface,
	localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (proxy.Provider, error) {
	return NewDualStackProxierWithOptions(ctx, config, ipts, sysctl, localDetectors, nodeName, nodeIPs, recorder, healthzServer, initOnly)
}

// NewDualStackProxierWithOptions is NewDualStackProxier with Options applied
// to both single-stack proxiers.
func NewDualStackProxierWithOptions(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipts map[v1.IPFamily]utiliptables.Interface,
	sysctl utilsysctl.Interface,
	localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
	opts ...Option,
) (proxy.Provider, error) {
	return metaproxier.NewDualStack(initOnly, func(family v1.IPFamily) (*Proxier, error) {
		return NewProxierWithOptions(ctx, config, family, ipts[family], sysctl, localDetectors[family], nodeName, nodeIPs[family],
			recorder, healthzServer, initOnly, opts...)
	})
}

// Proxier is the iptables proxier for one IP family. It implements
// proxy.Provider.
type Proxier struct {
	ipFamily v1.IPFamily

	// Shell runs the sync loop and implements the Provider handlers; the
	// proxier's own part is rulesBackend. Everything below is only touched
	// by rulesBackend.Sync, which the Shell never runs concurrently.
	*syncshell.Shell

	// gen renders rules, view remembers what the kernel was given, syncer
	// talks to the kernel; tables is the restore input being built, kept
	// to reuse its buffers.
	gen    *generator
	view   *view
	syncer *syncer
	tables tables
	// local converts changed service ports into the library's node-local
	// model, which the generator renders.
	local *localnode.Computer
	// driftCheck is the drift check's scratch space (drift.go).
	driftCheck driftCheck

	// Constant after construction.
	syncPeriod        time.Duration
	nodePortAddresses *proxyutil.NodePortAddresses
	networkInterfacer proxyutil.NetworkInterfacer
	logger            klog.Logger
}

var _ proxy.Provider = &Proxier{}

// NewProxier returns a single-stack iptables proxier, after setting the
// sysctls it needs. With initOnly it only sets the sysctls and returns
// (nil, nil).
func NewProxier(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	ipt utiliptables.Interface,
	sysctl utilsysctl.Interface,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (*Proxier, error) {
	return NewProxierWithOptions(ctx, config, ipFamily, ipt, sysctl, localDetector, nodeName, nodeIP, recorder, healthzServer, initOnly)
}

// NewProxierWithOptions is NewProxier with Options; see WithDryRun for the
// mode the binary uses to print rules without applying them.
func NewProxierWithOptions(ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	ipt utiliptables.Interface,
	sysctl utilsysctl.Interface,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
	opts ...Option,
) (*Proxier, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	o, err := proxieropts.Collect[ownOptions](opts)
	if err != nil {
		return nil, fmt.Errorf("iptables proxier (%s): %w", ipFamily, err)
	}
	if err := proxierargs.Check("iptables", config, ipFamily); err != nil {
		return nil, err
	}
	if ipt == nil && o.DryRun == nil {
		return nil, fmt.Errorf("iptables proxier (%s): nil iptables interface", ipFamily)
	}
	host, err := prepareHost(config, ipFamily, sysctl, o.DryRun != nil, logger)
	if err != nil {
		return nil, err
	}
	if initOnly {
		logger.Info("System initialized and --init-only specified")
		return nil, nil
	}
	gen, err := newGenerator(config, ipFamily, ipt, localDetector, nodeIP, host, logger)
	if err != nil {
		return nil, err
	}
	completeOptions(&o, ipFamily, nodeName, recorder, healthzServer, host.nodePortAddresses, logger)
	kernel := ipt
	if o.DryRun != nil {
		kernel = newDryRunIPTables(ipFamily, o.DryRun)
	}
	p := &Proxier{
		ipFamily:          ipFamily,
		gen:               gen,
		view:              newView(),
		local:             localnode.NewComputer(localnode.Family(ipFamily)),
		syncer:            &syncer{ipt: kernel, nfacct: o.Own.nfacct, family: string(ipFamily), logger: logger},
		nodePortAddresses: host.nodePortAddresses,
		networkInterfacer: o.NetworkInterfacer,
		logger:            logger,
	}

	// Once per syncPeriod the Shell asks Drift (drift.go) whether our
	// chains, their rules and the jumps to them are as written, and makes
	// the sync full if not, as upstream's periodic sync rewrote them. The
	// canary Monitor stays: it notices a whole table flushed (a firewall
	// reload) within its poll interval without reading the tables. A dry
	// run has no kernel to compare with.
	if p.Shell, err = o.NewShell(ctx, syncshell.ProxierShell{Mode: "iptables", Family: ipFamily, NodeName: nodeName, Config: config,
		Healthz: healthzServer, MakeServicePort: newServiceInfo, CheckRules: o.DryRun == nil, Logger: logger}, (*rulesBackend)(p)); err != nil {
		return nil, err
	}
	p.syncPeriod = p.Shell.RetryInterval()

	if o.DryRun == nil && !o.Own.noMonitor {
		stop := o.Own.stopCh
		if stop == nil {
			stop = wait.NeverStop
		}
		go ipt.Monitor(kubeProxyCanaryChain,
			[]utiliptables.Table{utiliptables.TableMangle, utiliptables.TableNAT, utiliptables.TableFilter},
			p.forceSyncProxyRules, p.syncPeriod, stop)
	}
	return p, nil
}

// hostSettings is what the host's configuration decides about the rules.
type hostSettings struct {
	nodePortAddresses   *proxyutil.NodePortAddresses
	localhostNodePorts  bool
	conntrackTCPLiberal bool
}

// prepareHost sets the sysctls the rules need (unless dryRun) and reads
// those that change them.
func prepareHost(config *kubeproxyconfig.KubeProxyConfiguration, ipFamily v1.IPFamily, sysctl utilsysctl.Interface, dryRun bool, logger klog.Logger) (hostSettings, error) {
	npa := proxyutil.NewNodePortAddresses(ipFamily, config.NodePortAddresses)
	h := hostSettings{
		nodePortAddresses:  npa,
		localhostNodePorts: ptr.Deref(config.IPTables.LocalhostNodePorts, true) && npa.ContainsIPv4Loopback(),
	}
	if h.localhostNodePorts && !dryRun {
		// NodePorts on 127.0.0.1 only work if the kernel routes martian
		// loopback-destined packets; see https://issues.k8s.io/90259 for the
		// exposure this opens and the KUBE-FIREWALL rule that closes it.
		logger.Info("Setting route_localnet=1 to allow node-ports on localhost; to change this either disable iptables.localhostNodePorts (--iptables-localhost-nodeports) or set nodePortAddresses (--nodeport-addresses) to filter loopback addresses")
		if sysctl == nil {
			return h, fmt.Errorf("iptables proxier (%s): nil sysctl interface but %s must be set", ipFamily, sysctlRouteLocalnet)
		}
		if err := proxyutil.EnsureSysctl(sysctl, sysctlRouteLocalnet, 1); err != nil {
			return h, fmt.Errorf("setting sysctl %s=1 for localhost NodePorts: %w", sysctlRouteLocalnet, err)
		}
	}
	// With be_liberal the kernel only marks out-of-window RSTs INVALID, so the
	// INVALID drop rule would do more harm than good.
	if sysctl != nil {
		if val, err := sysctl.GetSysctl(sysctlNFConntrackTCPBeLiberal); err == nil && val != 0 {
			h.conntrackTCPLiberal = true
			logger.Info("nf_conntrack_tcp_be_liberal set, not installing DROP rules for INVALID packets")
		}
	}
	return h, nil
}

// newGenerator checks and fixes the rules' settings.
func newGenerator(config *kubeproxyconfig.KubeProxyConfiguration, ipFamily v1.IPFamily, ipt utiliptables.Interface,
	localDetector proxyutil.LocalTrafficDetector, nodeIP net.IP, host hostSettings, logger klog.Logger) (*generator, error) {
	_, mark, err := proxierargs.MasqueradeMark("iptables", ipFamily, "iptables.masqueradeBit", config.IPTables.MasqueradeBit)
	if err != nil {
		return nil, err
	}
	logger.V(2).Info("Using iptables mark for masquerade", "mark", mark)
	if localDetector == nil {
		localDetector = proxyutil.NewNoOpLocalDetector()
	}
	// Every iptables kube-proxy supports has --random-fully; ask anyway when
	// the interface can tell, since MASQUERADE with an unknown option would
	// make every restore fail.
	randomFully := true
	if fd, ok := ipt.(utiliptables.FeatureDetector); ok {
		randomFully = fd.Features().RandomFully
	}
	return &generator{
		ipv6:                ipFamily == v1.IPv6Protocol,
		masqueradeAll:       config.Linux.MasqueradeAll,
		masqueradeMark:      mark,
		masqueradeMatch:     mark + "/" + mark,
		randomFully:         randomFully,
		localDetector:       localDetector,
		nodeIP:              nodeIP,
		localhostNodePorts:  host.localhostNodePorts,
		conntrackTCPLiberal: host.conntrackTCPLiberal,
		allNodePorts:        host.nodePortAddresses.MatchAll(),
		logger:              logger,
	}, nil
}

// forceSyncProxyRules is the canary Monitor's callback: someone flushed our
// tables, so everything, including the jumps from builtin chains, is rewritten.
func (p *Proxier) forceSyncProxyRules() {
	p.RequestFullSync()
	_ = p.SyncNow()
}

// servicePortInfo is the proxier's ServicePort: the brain's info plus every
// string the rules need, computed once when the Service changes rather than
// on every sync.
type servicePortInfo struct {
	*proxy.BaseServicePortInfo

	nameString string // "ns/svc:port"
	protocol   string // "tcp"
	// invalid, if non-empty, says why no rules may be written for this port.
	invalid string

	clusterIP, port, nodePort, hcNodePort string

	clusterPolicyChain utiliptables.Chain
	localPolicyChain   utiliptables.Chain
	firewallChain      utiliptables.Chain
	externalChain      utiliptables.Chain

	// Quoted comments, in upstream's wording.
	commentClusterIP, commentExternalIP, commentLBIP string
	commentNoEndpoints, commentNoLocalEndpoints      string
	commentHC, commentFWDrop                         string
	commentMasqExt, commentPodExt, commentMasqLocal  string
	commentRouteLocal, commentFWOther                string
}

// newServiceInfo is the tracker's makeServicePortFunc.
func newServiceInfo(port *v1.ServicePort, service *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	name := proxy.ServicePortName{Port: port.Name}
	name.Namespace, name.Name = service.Namespace, service.Name
	info := &servicePortInfo{
		BaseServicePortInfo: base,
		nameString:          name.String(),
		protocol:            strings.ToLower(string(base.Protocol())),
	}
	h := serviceChainHash(info.nameString, info.protocol)
	info.clusterPolicyChain = utiliptables.Chain(svcChainPrefix + h)
	info.localPolicyChain = utiliptables.Chain(svlChainPrefix + h)
	info.firewallChain = utiliptables.Chain(fwChainPrefix + h)
	info.externalChain = utiliptables.Chain(extChainPrefix + h)

	if !safeForRules(info.nameString) {
		info.invalid = "name contains characters that cannot be written into an iptables comment"
	}
	if info.invalid != "" {
		return info
	}

	info.clusterIP = base.ClusterIP().String()
	info.port = strconv.Itoa(base.Port())
	info.nodePort = strconv.Itoa(base.NodePort())
	info.hcNodePort = strconv.Itoa(base.HealthCheckNodePort())
	n := info.nameString
	info.commentClusterIP = `"` + n + ` cluster IP"`
	info.commentExternalIP = `"` + n + ` external IP"`
	info.commentLBIP = `"` + n + ` loadbalancer IP"`
	info.commentNoEndpoints = `"` + n + ` has no endpoints"`
	info.commentNoLocalEndpoints = `"` + n + ` has no local endpoints"`
	info.commentHC = `"` + n + ` health check node port"`
	info.commentFWDrop = `"` + n + ` traffic not accepted by ` + string(info.firewallChain) + `"`
	info.commentMasqExt = `"masquerade traffic for ` + n + ` external destinations"`
	info.commentPodExt = `"pod traffic for ` + n + ` external destinations"`
	info.commentMasqLocal = `"masquerade LOCAL traffic for ` + n + ` external destinations"`
	info.commentRouteLocal = `"route LOCAL traffic for ` + n + ` external destinations"`
	info.commentFWOther = `"other traffic to ` + n + ` will be dropped by KUBE-PROXY-FIREWALL"`
	return info
}

// safeForRules reports whether s can be put inside a double-quoted comment
// (or a chain of rules) without changing how iptables-restore splits the
// line. API-server validation guarantees it; manifests read from files and
// third-party callers might not.
func safeForRules(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '\'' {
			return false
		}
	}
	return true
}
