//go:build linux

package ipvs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	utilkernel "k8s.io/kube-proxy/pkg/proxy/util/kernel"
	"k8s.io/kube-proxy/pkg/proxy/util/proxierargs"
	utilipset "k8s.io/net-utils/ipset"
	utiliptables "k8s.io/net-utils/iptables"
	utilipvs "k8s.io/net-utils/ipvs"
	utilsysctl "k8s.io/net-utils/sysctl"
)

// NewDualStackProxier builds an IPv4 and an IPv6 proxier sharing the IPVS
// and ipset handles, combined by a metaproxier.
func NewDualStackProxier(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipts map[v1.IPFamily]utiliptables.Interface,
	ipvs utilipvs.Interface,
	ipset utilipset.Interface,
	sysctl utilsysctl.Interface,
	localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (proxy.Provider, error) {
	return metaproxier.NewDualStack(initOnly, func(family v1.IPFamily) (*Proxier, error) {
		return NewProxier(ctx, config, family, ipts[family], ipvs, ipset, sysctl, localDetectors[family],
			nodeName, nodeIPs[family], recorder, healthzServer, initOnly)
	})
}

// Proxier is the IPVS proxier for one IP family. It implements
// proxy.Provider through the embedded sync shell; its own part is
// rulesBackend.
type Proxier struct {
	*syncshell.Shell

	ipFamily v1.IPFamily
	ipt      utiliptables.Interface
	ipvs     utilipvs.Interface
	ipset    utilipset.Interface
	// restorer applies a sync's ip set changes with one "ipset restore";
	// nil when the ipset handle cannot (then one call per entry).
	restorer utilipset.Restorer
	netlink  NetLinkHandle
	sets     [numSets]*IPSet
	gtm      *GracefulTerminationManager

	// Constant after construction.
	scheduler         string
	masqueradeAll     bool
	masqueradeMark    string
	localDetector     proxyutil.LocalTrafficDetector
	nodeIP            net.IP
	nodePortAddresses *proxyutil.NodePortAddresses
	networkInterfacer proxyutil.NetworkInterfacer
	excludeCIDRs      []*net.IPNet
	retryInterval     time.Duration
	// dryRun receives the planned state after each sync that changed it
	// (WithDryRun); nil otherwise.
	dryRun io.Writer
	logger klog.Logger
	// local converts a changed service port into its node-local model.
	local *localnode.Computer

	// st is what the kernel holds, as far as this proxier knows; only
	// rulesBackend.Sync touches it, and the Shell never runs that
	// concurrently.
	st *state
}

var _ proxy.Provider = &Proxier{}

// NewProxier returns a single-stack IPVS proxier, after setting the sysctls
// and IPVS timeouts IPVS mode needs. With initOnly it only does that and
// returns (nil, nil).
func NewProxier(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	ipt utiliptables.Interface,
	ipvs utilipvs.Interface,
	ipset utilipset.Interface,
	sysctl utilsysctl.Interface,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
) (*Proxier, error) {
	return NewProxierWithOptions(ctx, config, ipFamily, ipt, ipvs, ipset, sysctl, localDetector, nodeName, nodeIP,
		recorder, healthzServer, initOnly)
}

// deps are what NewProxier takes from the host and tests replace. The
// options every mode shares (service health server, network interfacer,
// sync hook, dry run, conntrack) are copied in from proxieropts.Options
// and get the shared defaults.
type deps struct {
	syncshell.HostOptions
	netlink       NetLinkHandle
	conntrack     conntrack.Interface
	kernelVersion func() (*version.Version, error)
	clock         clock.WithTicker
	// noGracefulLoop leaves the termination manager's loop to the test.
	noGracefulLoop bool
}

// NewProxierWithOptions is NewProxier with Options (WithDryRun among
// them).
func NewProxierWithOptions(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	ipt utiliptables.Interface,
	ipvs utilipvs.Interface,
	ipset utilipset.Interface,
	sysctl utilsysctl.Interface,
	localDetector proxyutil.LocalTrafficDetector,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
	initOnly bool,
	opts ...Option,
) (*Proxier, error) {
	c, err := proxieropts.Collect[deps](opts)
	if err != nil {
		return nil, fmt.Errorf("ipvs proxier (%s): %w", ipFamily, err)
	}
	d := c.Own
	d.HostOptions, d.conntrack = c.HostOptions, c.Conntrack
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	if err := proxierargs.Check("ipvs", config, ipFamily); err != nil {
		return nil, err
	}
	switch {
	case ipt == nil:
		return nil, fmt.Errorf("ipvs proxier (%s): nil iptables interface", ipFamily)
	case ipvs == nil:
		return nil, fmt.Errorf("ipvs proxier (%s): nil ipvs interface", ipFamily)
	case ipset == nil:
		return nil, fmt.Errorf("ipvs proxier (%s): nil ipset interface", ipFamily)
	case sysctl == nil:
		return nil, fmt.Errorf("ipvs proxier (%s): nil sysctl interface", ipFamily)
	case d.DryRun != nil && initOnly:
		return nil, fmt.Errorf("ipvs proxier (%s): a dry run has no host to initialize", ipFamily)
	}
	if d.kernelVersion == nil {
		d.kernelVersion = utilkernel.GetVersion
	}
	// A dry run plans the Service state only; the host's sysctls and IPVS
	// timeouts are not part of it.
	if d.DryRun == nil {
		if err := prepareHost(config, ipvs, sysctl, d.kernelVersion, logger); err != nil {
			return nil, err
		}
	}
	if initOnly {
		logger.Info("System initialized and --init-only specified")
		return nil, nil
	}

	_, masqueradeMark, err := proxierargs.MasqueradeMark("ipvs", ipFamily, "iptables.masqueradeBit", config.IPTables.MasqueradeBit)
	if err != nil {
		return nil, err
	}
	scheduler := config.IPVS.Scheduler
	if scheduler == "" {
		logger.Info("IPVS scheduler not specified, use rr by default")
		scheduler = defaultScheduler
	}
	if localDetector == nil {
		localDetector = proxyutil.NewNoOpLocalDetector()
	}
	excludeCIDRs, err := parseExcludeCIDRs(ipFamily, config.IPVS.ExcludeCIDRs)
	if err != nil {
		return nil, fmt.Errorf("ipvs proxier (%s): %w", ipFamily, err)
	}
	nodePortAddresses := proxyutil.NewNodePortAddresses(ipFamily, config.NodePortAddresses)
	d.Complete(ipFamily, nodeName, recorder, nodePortAddresses, healthzServer)
	if d.DryRun != nil {
		dryRunDeps(&d, ipFamily == v1.IPv6Protocol)
	}
	if d.netlink == nil {
		d.netlink = NewNetLinkHandle(ipFamily == v1.IPv6Protocol)
	}
	if d.conntrack == nil {
		d.conntrack = conntrack.New()
	}
	logger.V(2).Info("Record nodeIP and family", "nodeIP", nodeIP, "family", ipFamily)

	p := &Proxier{
		ipFamily:          ipFamily,
		ipt:               ipt,
		ipvs:              ipvs,
		ipset:             ipset,
		netlink:           d.netlink,
		gtm:               NewGracefulTerminationManager(ipvs),
		scheduler:         scheduler,
		masqueradeAll:     config.Linux.MasqueradeAll,
		masqueradeMark:    masqueradeMark,
		localDetector:     localDetector,
		nodeIP:            nodeIP,
		nodePortAddresses: nodePortAddresses,
		networkInterfacer: d.NetworkInterfacer,
		excludeCIDRs:      excludeCIDRs,
		dryRun:            d.DryRun,
		logger:            logger,
		local:             localnode.NewComputer(localnode.Family(ipFamily)),
		st:                newState(),
	}
	if d.clock != nil {
		p.gtm.clock = d.clock
	}
	p.restorer, _ = ipset.(utilipset.Restorer)
	for id, info := range ipsetInfo {
		p.sets[id] = NewIPSet(ipset, info.name, info.setType, ipFamily == v1.IPv6Protocol, info.comment)
	}

	// As upstream, syncPeriod is both the retry interval and the longest
	// time between syncs; the shell adds the hourly full sync. Upstream
	// rewrote everything every syncPeriod; here partial syncs leave what did
	// not change alone, and once per syncPeriod Drift (check.go) compares
	// everything programmed with the kernel, turning that sync into a full
	// one, which repairs it, when anything differs.
	// The shell sees the defaults filled in above.
	shared := proxieropts.Options{HostOptions: d.HostOptions, Conntrack: d.conntrack}
	if p.Shell, err = shared.NewShell(ctx, syncshell.ProxierShell{Mode: "ipvs", Family: ipFamily, NodeName: nodeName, Config: config,
		Healthz: healthzServer, MakeServicePort: newServiceInfo, CheckRules: true, Logger: logger}, (*rulesBackend)(p)); err != nil {
		return nil, err
	}
	p.retryInterval = p.Shell.RetryInterval()
	if !d.noGracefulLoop {
		p.gtm.Run()
	}
	return p, nil
}

// prepareHost sets the sysctls and IPVS timeouts IPVS mode needs.
func prepareHost(config *kubeproxyconfig.KubeProxyConfiguration, ipvs utilipvs.Interface, sysctl utilsysctl.Interface,
	kernelVersion func() (*version.Version, error), logger klog.Logger) error {
	// vs/conntrack makes IPVS keep conntrack entries, which masquerading
	// and the iptables rules depend on.
	if err := proxyutil.EnsureSysctl(sysctl, sysctlVSConnTrack, 1); err != nil {
		return err
	}
	kv, err := kernelVersion()
	if err != nil {
		return fmt.Errorf("failed to get kernel version: %w", err)
	}
	switch {
	case kv.LessThan(version.MustParseGeneric(utilkernel.IPVSConnReuseModeMinSupportedKernelVersion)):
		logger.Error(nil, "Can't set sysctl, kernel version doesn't satisfy minimum version requirements", "sysctl", sysctlConnReuse, "minimumKernelVersion", utilkernel.IPVSConnReuseModeMinSupportedKernelVersion)
	case kv.AtLeast(version.MustParseGeneric(utilkernel.IPVSConnReuseModeFixedKernelVersion)):
		// conn_reuse_mode=1 no longer delays port reuse there
		// (https://issues.k8s.io/93297), so the host's value stays.
		logger.V(2).Info("Left as-is", "sysctl", sysctlConnReuse)
	default:
		if err := proxyutil.EnsureSysctl(sysctl, sysctlConnReuse, 0); err != nil {
			return err
		}
	}
	// Connections to a deleted real server are dropped at once rather than
	// hanging, and persistence templates of quiesced real servers expire.
	for _, s := range []struct {
		name string
		val  int
	}{{sysctlExpireNoDestConn, 1}, {sysctlExpireQuiescentTemplate, 1}, {sysctlForward, 1}} {
		if err := proxyutil.EnsureSysctl(sysctl, s.name, s.val); err != nil {
			return err
		}
	}
	if config.IPVS.StrictARP {
		// The VIPs on kube-ipvs0 must not be answered for on other links.
		if err := proxyutil.EnsureSysctl(sysctl, sysctlArpIgnore, 1); err != nil {
			return err
		}
		if err := proxyutil.EnsureSysctl(sysctl, sysctlArpAnnounce, 2); err != nil {
			return err
		}
	}
	tcp, tcpFin, udp := config.IPVS.TCPTimeout.Duration, config.IPVS.TCPFinTimeout.Duration, config.IPVS.UDPTimeout.Duration
	if tcp > 0 || tcpFin > 0 || udp > 0 {
		// As "ipvsadm --set"; 0 keeps the kernel's value.
		if err := ipvs.ConfigureTimeouts(tcp, tcpFin, udp); err != nil {
			logger.Error(err, "Failed to configure IPVS timeouts")
		}
	}
	return nil
}

// parseExcludeCIDRs returns the family's ranges whose virtual servers
// kube-proxy never deletes.
func parseExcludeCIDRs(family v1.IPFamily, cidrs []string) ([]*net.IPNet, error) {
	var out []*net.IPNet
	var errs []error
	for _, c := range cidrs {
		if netutils.IsIPv6CIDRString(c) != (family == v1.IPv6Protocol) {
			continue
		}
		_, n, err := netutils.ParseCIDRSloppy(strings.TrimSpace(c))
		if err != nil {
			errs = append(errs, fmt.Errorf("ipvs.excludeCIDRs: invalid CIDR %q: %w", c, err))
			continue
		}
		out = append(out, n)
	}
	return out, errors.Join(errs...)
}

func (p *Proxier) excluded(ip net.IP) bool {
	for _, n := range p.excludeCIDRs {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// servicePortInfo is the proxier's ServicePort: the brain's info plus what
// the rules need, computed when the Service changes.
type servicePortInfo struct {
	*proxy.BaseServicePortInfo
	nameString string
	protocol   string // lower case, as ipset spells it
}

func newServiceInfo(port *v1.ServicePort, service *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	name := proxy.ServicePortName{Port: port.Name}
	name.Namespace, name.Name = service.Namespace, service.Name
	info := &servicePortInfo{
		BaseServicePortInfo: base,
		nameString:          name.String(),
		protocol:            strings.ToLower(string(base.Protocol())),
	}
	return info
}
