package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	clientset "k8s.io/client-go/kubernetes"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/tools/events"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/version"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/manifest"
	proxymetrics "k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/source"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

const kubeProxy = "kube-proxy"

// serverOptions are the inputs of newProxyServer that are not configuration fields.
type serverOptions struct {
	master          string
	initOnly        bool
	manifests       string
	manifestsRescan time.Duration
	dryRun          bool
	dryRunFollow    bool
	flags           *pflag.FlagSet
}

// ProxyServer holds everything a running kube-proxy needs.
type ProxyServer struct {
	Config *kubeproxyconfig.KubeProxyConfiguration

	Client          clientset.Interface
	Broadcaster     events.EventBroadcaster
	Recorder        events.EventRecorder
	NodeRef         *v1.ObjectReference
	HealthzServer   *healthcheck.ProxyHealthServer
	NodeName        string
	PrimaryIPFamily v1.IPFamily
	NodeIPs         map[v1.IPFamily]net.IP

	podCIDRs    []string // only used for LocalModeNodeCIDR
	NodeManager *proxy.NodeManager

	Proxier proxy.Provider

	flags           *pflag.FlagSet
	manifests       *manifest.Source
	manifestsRescan time.Duration
	// dryRun collects what the proxiers would program; nil when not a dry run.
	dryRun       *dryRunOutput
	dryRunOut    interface{ Write([]byte) (int, error) }
	dryRunFollow bool
	apiHealth    *apiHealth
	// metricsErrCh reports a metrics-server bind failure with bindAddressHardFail.
	metricsErrCh chan error
}

// newProxyServer builds a ProxyServer for config; with initOnly it only performs the
// privileged initialisation.
func newProxyServer(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, opts serverOptions) (*ProxyServer, error) {
	logger := klog.FromContext(ctx)
	s := &ProxyServer{
		Config:          cfg,
		flags:           opts.flags,
		manifestsRescan: opts.manifestsRescan,
		dryRunOut:       os.Stdout,
	}
	if opts.dryRun || opts.dryRunFollow {
		s.dryRun = newDryRunOutput()
		s.dryRunFollow = opts.dryRunFollow
	}

	if err := setConfigz(cfg); err != nil {
		return nil, err
	}
	if cfg.ShowHiddenMetricsForVersion != "" {
		metrics.SetShowHidden()
	}

	var err error
	s.NodeName, err = nodeutil.GetHostname(cfg.HostnameOverride)
	if err != nil {
		return nil, fmt.Errorf("determining the node name (hostnameOverride %q): %w", cfg.HostnameOverride, err)
	}

	if opts.manifests != "" {
		s.manifests = manifest.NewSource(opts.manifests)
		res, err := s.manifests.Sync(ctx)
		if err != nil {
			return nil, fmt.Errorf("--manifests: %w", err)
		}
		logger.Info("Running without an API server, from manifests", "path", opts.manifests,
			"objects", res.Created, "rejected", len(res.Problems))
		s.Client = s.manifests.Client()
		if !manifestHasNode(s.manifests, s.NodeName) {
			logger.Info("Warning: the manifests have no Node of this node's name; node IPs fall back to --bind-address or loopback. Use --hostname-override to pick one",
				"nodeName", s.NodeName)
		}
	} else {
		s.Client, err = createClient(ctx, cfg.ClientConnection, opts.master)
		if err != nil {
			return nil, err
		}
		s.apiHealth = &apiHealth{}
	}

	// The metrics server (and its /healthz, which reports API server trouble) comes
	// up before anything waits on the API server, so a node that cannot reach it
	// says so instead of refusing connections.
	if !opts.initOnly && !opts.dryRun {
		s.startMetricsServer(ctx)
	}

	s.NodeManager, err = proxy.NewNodeManager(ctx, s.Client, s.NodeName, cfg)
	if err != nil {
		return nil, err
	}
	rawNodeIPs := s.NodeManager.NodeIPs()
	if len(rawNodeIPs) > 0 {
		logger.Info("Successfully retrieved NodeIPs", "NodeIPs", rawNodeIPs)
	}
	if len(cfg.NodeIPOverride) > 0 {
		rawNodeIPs = nil
		for _, ip := range cfg.NodeIPOverride {
			if parsed := netutils.ParseIPSloppy(ip); parsed != nil {
				rawNodeIPs = append(rawNodeIPs, parsed)
			}
		}
		logger.Info("Using nodeIPOverride instead of the Node's IPs", "NodeIPs", rawNodeIPs)
	}
	s.PrimaryIPFamily, s.NodeIPs = detectNodeIPs(ctx, rawNodeIPs, cfg.BindAddress)
	s.podCIDRs = s.NodeManager.PodCIDRs()

	cfg.NodePortAddresses = expandNodePortAddressKeywords(cfg.NodePortAddresses, s.NodeIPs)

	s.Broadcaster = events.NewBroadcaster(&events.EventSinkImpl{Interface: s.Client.EventsV1()})
	s.Recorder = s.Broadcaster.NewRecorder(clientsetscheme.Scheme, kubeProxy)
	s.NodeRef = &v1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: s.NodeName}

	if cfg.HealthzBindAddress != "" && !opts.dryRun {
		s.HealthzServer = healthcheck.NewProxyHealthServer(cfg.HealthzBindAddress, 2*cfg.SyncPeriod.Duration, s.NodeManager)
	}

	if !opts.dryRun {
		if err := s.platformSetup(ctx); err != nil {
			return nil, err
		}
	}

	if err := checkBadConfig(s); err != nil {
		logger.Error(err, "Kube-proxy configuration may be incomplete or incorrect")
	}

	ipv4Supported, ipv6Supported, dualStackSupported, err := s.platformCheckSupported(ctx)
	switch {
	case err != nil:
		return nil, err
	case (s.PrimaryIPFamily == v1.IPv4Protocol && !ipv4Supported) || (s.PrimaryIPFamily == v1.IPv6Protocol && !ipv6Supported):
		return nil, fmt.Errorf("no support for primary IP family %q", s.PrimaryIPFamily)
	}
	switch cfg.IPFamilyPolicy {
	case kubeproxyconfig.IPFamilyPolicySingleStack:
		dualStackSupported = false
	case kubeproxyconfig.IPFamilyPolicyRequireDualStack:
		if !dualStackSupported {
			return nil, fmt.Errorf("ipFamilyPolicy %s: this host cannot proxy both IPv4 (supported: %v) and IPv6 (supported: %v)",
				cfg.IPFamilyPolicy, ipv4Supported, ipv6Supported)
		}
	}
	if dualStackSupported {
		logger.Info("kube-proxy running in dual-stack mode", "primary ipFamily", s.PrimaryIPFamily)
	} else {
		logger.Info("kube-proxy running in single-stack mode", "ipFamily", s.PrimaryIPFamily)
	}

	if err, fatal := checkBadIPConfig(s, dualStackSupported); err != nil {
		if fatal {
			return nil, fmt.Errorf("kube-proxy configuration is incorrect: %w", err)
		}
		logger.Error(err, "Kube-proxy configuration may be incomplete or incorrect")
	}

	s.Proxier, err = s.createProxier(ctx, cfg, dualStackSupported, opts.initOnly)
	if err != nil {
		return nil, err
	}
	return s, nil
}

func manifestHasNode(src *manifest.Source, name string) bool {
	for _, obj := range src.Objects() {
		if n, ok := obj.(*v1.Node); ok && n.Name == name {
			return true
		}
	}
	return false
}

// checkBadConfig reports configuration that is legal but probably not intended.
func checkBadConfig(s *ProxyServer) error {
	var errs []error
	// Nothing has been seen of Services yet, so explicitly dual-stack settings are
	// the only hint that the cluster is dual-stack.
	anyDualStackConfig := false
	for _, cidrs := range [][]string{s.Config.DetectLocal.ClusterCIDRs, s.Config.NodePortAddresses, s.Config.IPVS.ExcludeCIDRs, s.podCIDRs} {
		if dual, _ := netutils.IsDualStackCIDRStrings(cidrs); dual {
			anyDualStackConfig = true
			break
		}
	}
	byFamily := proxyutil.MapCIDRsByIPFamily(s.Config.NodePortAddresses)
	other := proxyutil.OtherIPFamily(s.PrimaryIPFamily)
	switch {
	case len(s.Config.NodePortAddresses) == 0:
		errs = append(errs, errors.New("nodePortAddresses is unset; NodePort connections will be accepted on all local IPs. Consider using `--nodeport-addresses primary`"))
	case anyDualStackConfig && len(byFamily[s.PrimaryIPFamily]) == len(s.Config.NodePortAddresses):
		errs = append(errs, fmt.Errorf("cluster appears to be dual-stack but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", s.PrimaryIPFamily, other))
	case len(byFamily[s.PrimaryIPFamily]) == 0:
		errs = append(errs, fmt.Errorf("cluster appears to be %s-primary but nodePortAddresses contains only %s addresses; NodePort connections will be accepted on all local %s IPs", s.PrimaryIPFamily, other, s.PrimaryIPFamily))
	}
	return utilerrors.NewAggregate(errs)
}

// checkBadIPConfig reports settings of the wrong IP family. Only the mismatches that
// upstream always treated as fatal are fatal.
func checkBadIPConfig(s *ProxyServer, dualStackSupported bool) (err error, fatal bool) {
	var errs []error
	bad := netutils.IPv6
	if s.PrimaryIPFamily == v1.IPv6Protocol {
		bad = netutils.IPv4
	}
	clusterType := fmt.Sprintf("%s-only", s.PrimaryIPFamily)
	if dualStackSupported {
		clusterType = fmt.Sprintf("%s-primary", s.PrimaryIPFamily)
	}
	if allOfFamily(s.Config.DetectLocal.ClusterCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but clusterCIDRs contains only IPv%s addresses", clusterType, bad))
		if s.Config.DetectLocalMode == kubeproxyconfig.LocalModeClusterCIDR && !dualStackSupported {
			fatal = true
		}
	}
	if allOfFamily(s.podCIDRs, bad) {
		errs = append(errs, fmt.Errorf("cluster is %s but node.spec.podCIDRs contains only IPv%s addresses", clusterType, bad))
		if s.Config.DetectLocalMode == kubeproxyconfig.LocalModeNodeCIDR {
			fatal = true
		}
	}
	if netutils.IPFamilyOfString(s.Config.Winkernel.SourceVip) == bad {
		errs = append(errs, fmt.Errorf("cluster is %s but winkernel.sourceVip is IPv%s", clusterType, bad))
	}
	if !dualStackSupported {
		if allOfFamily(s.Config.IPVS.ExcludeCIDRs, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but ipvs.excludeCIDRs contains only IPv%s addresses", clusterType, bad))
		}
		if bindAddressOfFamily(s.Config.HealthzBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but healthzBindAddress is IPv%s", clusterType, bad))
		}
		if bindAddressOfFamily(s.Config.MetricsBindAddress, bad) {
			errs = append(errs, fmt.Errorf("cluster is %s but metricsBindAddress is IPv%s", clusterType, bad))
		}
	}
	return utilerrors.NewAggregate(errs), fatal
}

// allOfFamily reports whether cidrs is non-empty and every CIDR is of family.
func allOfFamily(cidrs []string, family netutils.IPFamily) bool {
	if len(cidrs) == 0 {
		return false
	}
	for _, c := range cidrs {
		if netutils.IPFamilyOfCIDRString(c) != family {
			return false
		}
	}
	return true
}

// bindAddressOfFamily reports whether an "IP:port" names a specific IP of family.
func bindAddressOfFamily(addr string, family netutils.IPFamily) bool {
	host, _, _ := net.SplitHostPort(addr)
	ip := netutils.ParseIPSloppy(host)
	return ip != nil && !ip.IsUnspecified() && netutils.IPFamilyOf(ip) == family
}

// createClient builds the API client from a kubeconfig and/or --master, else the
// in-cluster configuration.
func createClient(ctx context.Context, cfg componentbaseconfig.ClientConnectionConfiguration, masterOverride string) (clientset.Interface, error) {
	logger := klog.FromContext(ctx)
	var kubeConfig *rest.Config
	var err error
	if cfg.Kubeconfig == "" && masterOverride == "" {
		logger.Info("Neither kubeconfig file nor master URL was specified, falling back to in-cluster config")
		kubeConfig, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (use --kubeconfig, --master, or --manifests to run without a cluster): %w", err)
		}
	} else {
		kubeConfig, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
			&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: masterOverride}}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %q / master %q: %w", cfg.Kubeconfig, masterOverride, err)
		}
	}
	kubeConfig.AcceptContentTypes = cfg.AcceptContentTypes
	kubeConfig.ContentType = cfg.ContentType
	kubeConfig.QPS = cfg.QPS
	kubeConfig.Burst = int(cfg.Burst)
	return clientset.NewForConfig(kubeConfig)
}

// Run starts the informers, servers and proxier, and blocks until ctx is done, a
// hard bind failure, or (in a dry run) the first rules have been printed.
func (s *ProxyServer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	logger.Info("Version info", "version", version.Get())
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	proxymetrics.RegisterMetrics(s.Config.Mode)

	if s.Config.Linux.OOMScoreAdj != nil && s.dryRun == nil {
		if err := applyOOMScoreAdj(0, int(*s.Config.Linux.OOMScoreAdj)); err != nil {
			logger.V(2).Info("Failed to apply OOMScore", "err", err)
		}
	}

	if s.Broadcaster != nil {
		s.Broadcaster.StartRecordingToSink(ctx.Done())
		if s.manifests != nil {
			// Nobody reads events from the fake clientset; the log is where they go.
			if stop, err := s.Broadcaster.StartLogging(logger); err == nil {
				defer stop()
			}
		}
	}

	healthzErrCh := s.startHealthzServer(ctx)

	s.startInformers(ctx)
	if s.manifests != nil {
		defer s.runManifests(ctx)()
	}

	s.birthCry()
	go s.Proxier.SyncLoop()

	if s.dryRun != nil {
		if !s.dryRunFollow {
			return s.dryRun.waitAndPrint(ctx, s.dryRunOut)
		}
		if err := s.dryRun.startFollowing(s.dryRunOut); err != nil {
			return fmt.Errorf("dry run: %w", err)
		}
		<-ctx.Done()
		return nil
	}

	var err error
	select {
	case err = <-healthzErrCh:
		s.Recorder.Eventf(s.NodeRef, nil, v1.EventTypeWarning, "FailedToStartProxierHealthcheck", "StartKubeProxy", err.Error())
	case err = <-s.metricsErrCh:
		s.Recorder.Eventf(s.NodeRef, nil, v1.EventTypeWarning, "FailedToStartMetricServer", "StartKubeProxy", err.Error())
	case <-ctx.Done():
		return nil
	}
	return err
}

// startInformers feeds the proxier (and the NodeManager) from the API server, or from
// the manifests' fake one.
func (s *ProxyServer) startInformers(ctx context.Context) {
	// Headless Services are resolved by DNS, and Services claimed by another proxy are
	// not ours; the library's Kubernetes source selects the same way. The Node comes
	// from the NodeManager's informer instead.
	resync := s.Config.ConfigSyncPeriod.Duration
	factories := source.NewInformerFactories(s.Client, resync, "")

	// Handlers are registered before the informers start, so no initial event is lost.
	serviceConfig := config.NewServiceConfig(ctx, factories.Services.Core().V1().Services(), resync)
	serviceConfig.RegisterEventHandler(s.Proxier)
	go serviceConfig.Run(ctx.Done())

	endpointSliceConfig := config.NewEndpointSliceConfig(ctx, factories.EndpointSlices.Discovery().V1().EndpointSlices(), resync)
	endpointSliceConfig.RegisterEventHandler(s.Proxier)
	s.dryRun.track(serviceConfig, endpointSliceConfig)
	go endpointSliceConfig.Run(ctx.Done())

	if features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		serviceCIDRConfig := config.NewServiceCIDRConfig(ctx, factories.Unfiltered.Networking().V1().ServiceCIDRs(), resync)
		serviceCIDRConfig.RegisterEventHandler(s.Proxier)
		go serviceCIDRConfig.Run(ctx.Done())
	}
	factories.Start(ctx.Done())

	if s.NodeManager != nil {
		nodeConfig := config.NewNodeConfig(ctx, s.NodeManager.NodeInformer(), resync)
		nodeConfig.RegisterEventHandler(s.NodeManager)
		nodeTopologyConfig := config.NewNodeTopologyConfig(ctx, s.NodeManager.NodeInformer(), resync)
		nodeTopologyConfig.RegisterEventHandler(s.Proxier)
		go nodeConfig.Run(ctx.Done())
	}
}

// runManifests re-reads the manifests as they change, until the returned stop is
// called. Run must not return while the manifest source may still write: a rescan that
// saw the files half removed (a test's temporary directory being cleaned up) would
// delete this node's Node, and the NodeManager, which outlives Run, exits the process
// on that.
func (s *ProxyServer) runManifests(ctx context.Context) (stop func()) {
	logger := klog.FromContext(ctx)
	manifestsCtx, stopManifests := context.WithCancel(ctx)
	manifestsDone := make(chan struct{})
	go func() {
		defer close(manifestsDone)
		if err := s.manifests.Run(manifestsCtx, s.manifestsRescan); err != nil {
			logger.Error(err, "Manifest source stopped")
		}
	}()
	return func() {
		stopManifests()
		<-manifestsDone
	}
}

func (s *ProxyServer) birthCry() {
	s.Recorder.Eventf(s.NodeRef, nil, v1.EventTypeNormal, "Starting", "StartKubeProxy", "")
}

// expandNodePortAddressKeywords turns primary/localhost/all into CIDRs.
func expandNodePortAddressKeywords(addrs []string, nodeIPs map[v1.IPFamily]net.IP) []string {
	var out []string
	for _, addr := range addrs {
		switch addr {
		case kubeproxyconfig.NodePortAddressesPrimary:
			// A loopback node IP means the real one is unknown; there is nothing to pin to.
			if ip := nodeIPs[v1.IPv4Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/32")
			}
			if ip := nodeIPs[v1.IPv6Protocol]; ip != nil && !ip.IsLoopback() {
				out = append(out, ip.String()+"/128")
			}
		case kubeproxyconfig.NodePortAddressesLocalhost:
			out = append(out, "127.0.0.0/8", "::1/128")
		case kubeproxyconfig.NodePortAddressesAll:
			out = append(out, proxyutil.IPv4ZeroCIDR, proxyutil.IPv6ZeroCIDR)
		default:
			out = append(out, addr)
		}
	}
	return out
}

// detectNodeIPs picks the node IP per family: a specific --bind-address wins for its
// family, then the Node's IPs, then loopback. The primary family is that of the
// bind address, else of the Node's first IP, else IPv4.
func detectNodeIPs(ctx context.Context, rawNodeIPs []net.IP, bindAddress string) (v1.IPFamily, map[v1.IPFamily]net.IP) {
	logger := klog.FromContext(ctx)
	familyOf := func(ip net.IP) v1.IPFamily {
		if netutils.IsIPv4(ip) {
			return v1.IPv4Protocol
		}
		return v1.IPv6Protocol
	}
	primary := v1.IPv4Protocol
	nodeIPs := map[v1.IPFamily]net.IP{
		v1.IPv4Protocol: net.IPv4(127, 0, 0, 1),
		v1.IPv6Protocol: net.IPv6loopback,
	}
	if len(rawNodeIPs) > 0 {
		primary = familyOf(rawNodeIPs[0])
		nodeIPs[primary] = rawNodeIPs[0]
		// A second IP counts only if it is of the other family.
		if len(rawNodeIPs) > 1 && familyOf(rawNodeIPs[1]) != primary {
			nodeIPs[familyOf(rawNodeIPs[1])] = rawNodeIPs[1]
		}
	}
	if bindIP := netutils.ParseIPSloppy(bindAddress); bindIP != nil && !bindIP.IsUnspecified() {
		primary = familyOf(bindIP)
		nodeIPs[primary] = bindIP
	}
	if nodeIPs[primary].IsLoopback() {
		logger.Info("Can't determine this node's IP, assuming loopback; if this is incorrect, please set the --bind-address flag")
	}
	return primary, nodeIPs
}
