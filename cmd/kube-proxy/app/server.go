package app

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	clientset "k8s.io/client-go/kubernetes"
	clientsetscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics"
	nodeutil "k8s.io/component-helpers/node/util"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	proxymetrics "k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/source"
	"k8s.io/kube-proxy/pkg/proxy/source/manifests"
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
	localNodeServe  localNodeServeOptions
	localNodeSource localNodeSourceOptions
	socketLB        socketLBOptions
	sourceLimits    sourceLimits // --localnode-source-max-pending-*
	// nodeAddresses makes a dry run compute for the node's addresses even
	// without manifests (trace's computed rules); localAddresses, when set,
	// are those addresses (trace's --local-addresses). See
	// setDryRunNodeAddresses.
	nodeAddresses bool
	// hostAddresses keeps a dry run on this host's interfaces (--dry-run-host-addresses).
	hostAddresses  bool
	localAddresses []net.IP
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
	manifests       *manifests.Reader
	manifestsRescan time.Duration
	// dryRun collects what the proxiers would program; nil when not a dry run.
	dryRun       *dryRunOutput
	dryRunOut    interface{ Write([]byte) (int, error) }
	dryRunFollow bool
	apiHealth    *apiHealth
	// metricsErrCh reports a metrics-server bind failure with bindAddressHardFail.
	metricsErrCh chan error
	// localNodeServe is --localnode-serve and its TLS flags (localnode_serve.go).
	localNodeServe localNodeServeOptions
	// socketLB is --socket-lb (socketlb.go).
	socketLB socketLBOptions
	// localNode feeds the proxier from --localnode-source (localnode_source.go).
	localNode *localNodeFeed
	// sourceLimits bound what the --localnode-source server can make it hold.
	sourceLimits sourceLimits
	// nodeAddrs, when set, replaces the host's interfaces as the source of
	// the node's addresses (nodeaddrs.go); nil on a live node.
	nodeAddrs proxyutil.NetworkInterfacer
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
		localNodeServe:  opts.localNodeServe,
		socketLB:        opts.socketLB,
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

	s.sourceLimits = opts.sourceLimits
	if opts.localNodeSource.address != "" {
		if err := s.connectLocalNode(ctx, opts.localNodeSource); err != nil {
			return nil, err
		}
	} else if err := s.connect(ctx, opts); err != nil {
		return nil, err
	}

	// The metrics server (and its /healthz, which reports API server trouble) comes
	// up before anything waits on the API server, so a node that cannot reach it
	// says so instead of refusing connections.
	if !opts.initOnly && !opts.dryRun {
		s.startMetricsServer(ctx)
	}

	if s.localNode != nil {
		if err := s.localNode.waitFirstState(ctx); err != nil {
			return nil, err
		}
	}
	if s.manifests != nil {
		// The manifests are read whole before this, so a Node that is
		// missing now stays missing: waiting for it only delays the answer.
		s.NodeManager, err = proxy.NewStaticNodeManager(ctx, s.Client, s.NodeName, cfg)
	} else {
		s.NodeManager, err = proxy.NewNodeManager(ctx, s.Client, s.NodeName, cfg)
	}
	if err != nil {
		return nil, err
	}
	s.setNodeIPs(ctx)
	// A dry run from --localnode-source computes for the Node it is handed
	// as one from manifests does, so that both print the same rules for the
	// same objects.
	if s.dryRun != nil && !opts.hostAddresses && (opts.manifests != "" || opts.localNodeSource.address != "" || opts.nodeAddresses || len(opts.localAddresses) > 0) {
		s.setDryRunNodeAddresses(ctx, opts.localAddresses)
	}

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

	dualStack, err := s.decideDualStack(ctx)
	if err != nil {
		return nil, err
	}

	if err, fatal := checkBadIPConfig(s, dualStack); err != nil {
		if fatal {
			return nil, fmt.Errorf("kube-proxy configuration is incorrect: %w", err)
		}
		logger.Error(err, "Kube-proxy configuration may be incomplete or incorrect")
	}

	s.Proxier, err = s.createProxier(ctx, cfg, dualStack, opts.initOnly)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// Run starts the informers, servers and proxier, and blocks until ctx is done, a
// hard bind failure, or (in a dry run) the first rules have been printed.
func (s *ProxyServer) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	v := buildVersion()
	logger.Info("Version info", "version", v.GitVersion, "commit", v.GitCommit, "treeState", v.GitTreeState, "goVersion", v.GoVersion, "platform", v.Platform)
	logger.Info("Golang settings", "GOGC", os.Getenv("GOGC"), "GOMAXPROCS", os.Getenv("GOMAXPROCS"), "GOTRACEBACK", os.Getenv("GOTRACEBACK"))

	proxymetrics.RegisterMetrics(s.Config.Mode)

	if s.Config.Linux.OOMScoreAdj != nil && s.dryRun == nil {
		if err := applyOOMScoreAdj(0, int(*s.Config.Linux.OOMScoreAdj)); err != nil {
			logger.V(2).Info("Failed to apply OOMScore", "err", err)
		}
	}

	if s.Broadcaster != nil {
		s.Broadcaster.StartRecordingToSink(ctx.Done())
		if s.manifests != nil || s.localNode != nil {
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

	if s.dryRun == nil {
		if err := s.startLocalNodeServer(ctx, s.localNodeServe); err != nil {
			return err
		}
		if err := s.startSocketLB(ctx, s.socketLB); err != nil {
			return err
		}
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
// the manifests' fake one, or from a LocalNode server (--localnode-source). The API
// server is read through the library's Kubernetes source, so the binary and a library
// proxy list and watch exactly the same objects the same way.
func (s *ProxyServer) startInformers(ctx context.Context) {
	if s.localNode != nil {
		s.startLocalNodeSource(ctx)
		return
	}
	src := source.NewKubernetes(s.Client, s.NodeName, s.Config.ConfigSyncPeriod.Duration).
		WithNodeInformer(s.NodeManager.NodeInformer())
	if !features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		src.WithoutServiceCIDRs()
	} else if s.dryRun != nil {
		src.HoldSyncedUntil(s.dryRun.holdForServiceCIDRs())
	}
	h := &informerHandler{Provider: s.Proxier, nodes: s.NodeManager, dryRun: s.dryRun}
	go func() {
		if err := src.Run(ctx, h); err != nil {
			klog.FromContext(ctx).Error(err, "Cannot read the API server")
		}
	}()
}

// informerHandler is what the API server source feeds: the proxier, the NodeManager
// (which exits the process when the Node's addresses or pod CIDRs change, as upstream
// does), and a dry run's progress counters (nil when not a dry run), which hear of
// everything after the proxier does.
type informerHandler struct {
	proxy.Provider
	nodes  *proxy.NodeManager
	dryRun *dryRunOutput
}

var (
	_ source.Handler            = &informerHandler{}
	_ source.NodeHandler        = &informerHandler{}
	_ config.ServiceCIDRHandler = &informerHandler{}
)

func (h *informerHandler) OnServiceAdd(svc *v1.Service) {
	h.Provider.OnServiceAdd(svc)
	if h.dryRun != nil {
		h.dryRun.OnServiceAdd(svc)
	}
}

func (h *informerHandler) OnServiceDelete(svc *v1.Service) {
	h.Provider.OnServiceDelete(svc)
	if h.dryRun != nil {
		h.dryRun.OnServiceDelete(svc)
	}
}

func (h *informerHandler) OnServiceSynced() {
	h.Provider.OnServiceSynced()
	if h.dryRun != nil {
		h.dryRun.OnServiceSynced()
	}
}

func (h *informerHandler) OnEndpointSliceAdd(slice *discoveryv1.EndpointSlice) {
	h.Provider.OnEndpointSliceAdd(slice)
	if h.dryRun != nil {
		h.dryRun.OnEndpointSliceAdd(slice)
	}
}

func (h *informerHandler) OnEndpointSliceDelete(slice *discoveryv1.EndpointSlice) {
	h.Provider.OnEndpointSliceDelete(slice)
	if h.dryRun != nil {
		h.dryRun.OnEndpointSliceDelete(slice)
	}
}

func (h *informerHandler) OnEndpointSlicesSynced() {
	h.Provider.OnEndpointSlicesSynced()
	if h.dryRun != nil {
		h.dryRun.OnEndpointSlicesSynced()
	}
}

func (h *informerHandler) OnServiceCIDRsChanged(cidrs []string) {
	h.Provider.OnServiceCIDRsChanged(cidrs)
	if h.dryRun != nil {
		h.dryRun.OnServiceCIDRsChanged(cidrs)
	}
}

func (h *informerHandler) OnNodeChange(node *v1.Node) { h.nodes.OnNodeChange(node) }
func (h *informerHandler) OnNodeDelete(node *v1.Node) { h.nodes.OnNodeDelete(node) }
func (h *informerHandler) OnNodeSynced()              { h.nodes.OnNodeSynced() }

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
