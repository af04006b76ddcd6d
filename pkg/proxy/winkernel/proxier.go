package winkernel

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apiutil "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/proxierargs"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// Proxier is the winkernel proxier for one IP family. It implements
// proxy.Provider: the embedded Shell runs the sync loop and the event
// handlers, and hands each sync to the HNS backend.
type Proxier struct {
	*syncshell.Shell

	ipFamily v1.IPFamily
	backend  *hnsBackend
}

var _ proxy.Provider = &Proxier{}

// serviceInfo is a service port with its Windows-specific annotations.
type serviceInfo struct {
	*proxy.BaseServicePortInfo
	preserveDIP          bool
	winProxyOptimization bool
}

func newServiceInfo(_ *v1.ServicePort, service *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
	return &serviceInfo{
		BaseServicePortInfo:  base,
		preserveDIP:          service.Annotations["preserve-destination"] == "true",
		winProxyOptimization: !strings.EqualFold(service.Annotations["winProxyOptimization"], "disabled"),
	}
}

// NewProxier returns the winkernel proxier of one IP family. On systems
// other than Windows it fails: there is no HNS to program.
func NewProxier(
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	nodeName string,
	nodeIP net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
) (*Proxier, error) {
	if err := proxierargs.Check("winkernel", config, ipFamily); err != nil {
		return nil, err
	}
	h, err := newPlatformHCN()
	if err != nil {
		return nil, err
	}
	var hc interface {
		Health() healthcheck.ProxyHealth
	}
	if healthzServer != nil {
		hc = healthzServer
	}
	serviceHealth := healthcheck.NewServiceHealthServer(nodeName, recorder, proxyutil.NewNodePortAddresses(ipFamily, nil), hc, ipFamily)
	return newProxierInternal(context.Background(), config, ipFamily, nodeName, nodeIP, serviceHealth, healthzServer,
		h, localHostMacProvider{}, true)
}

// NewDualStackProxier returns a dual-stack Provider over one winkernel
// proxier per IP family.
func NewDualStackProxier(
	config *kubeproxyconfig.KubeProxyConfiguration,
	nodeName string,
	nodeIPs map[v1.IPFamily]net.IP,
	recorder events.EventRecorder,
	healthzServer *healthcheck.ProxyHealthServer,
) (proxy.Provider, error) {
	return metaproxier.NewDualStack(false, func(family v1.IPFamily) (*Proxier, error) {
		p, err := NewProxier(config, family, nodeName, nodeIPs[family], recorder, healthzServer)
		if err != nil {
			return nil, fmt.Errorf("node %s, node IP %v: %w", nodeName, nodeIPs[family], err)
		}
		return p, nil
	})
}

// CleanupLeftovers deletes every HNS load balancer (--cleanup). It returns
// true if one could not be deleted. Elsewhere than on Windows there is
// nothing to clean.
func CleanupLeftovers() (encounteredError bool) {
	h, err := newPlatformHCN()
	if err != nil {
		return false
	}
	return cleanupLoadBalancers(h)
}

// networkPollInterval is how often the constructor looks for the HNS network
// the CNI plugin has not created yet.
var networkPollInterval = time.Second

// overlaySettleTime is how long the constructor waits for a new overlay
// network's remote subnet policies before reading them.
var overlaySettleTime = 10 * time.Second

// newProxierInternal builds a proxier over any hcnapi.Interface; NewProxier
// passes the Windows adapter, tests the fake.
func newProxierInternal(
	ctx context.Context,
	config *kubeproxyconfig.KubeProxyConfiguration,
	ipFamily v1.IPFamily,
	nodeName string,
	nodeIP net.IP,
	serviceHealth healthcheck.ServiceHealthServer,
	healthzServer *healthcheck.ProxyHealthServer,
	h hcnapi.Interface,
	macs HostMacProvider,
	waitForOverlay bool,
) (*Proxier, error) {
	logger := klog.LoggerWithValues(klog.FromContext(ctx), "ipFamily", ipFamily)
	if err := proxierargs.Check("winkernel", config, ipFamily); err != nil {
		return nil, err
	}
	wcfg := config.Winkernel
	feats := h.Features()
	if !feats.APIV2 {
		return nil, fmt.Errorf("winkernel proxier (%s): Windows HNS API V2 is required and this version of Windows does not support it", ipFamily)
	}
	networkName, err := getNetworkName(wcfg.NetworkName)
	if err != nil {
		return nil, fmt.Errorf("winkernel proxier (%s): %w", ipFamily, err)
	}

	network, err := h.GetNetworkByName(networkName)
	for err != nil {
		if IsHnsNotRunningError(err) || hcnapi.IsNetworkNotFound(err) || hcnapi.IsNotFound(err) {
			// The CNI plugin creates the network; wait for it, as upstream.
			logger.Error(err, "Unable to find HNS Network specified, please check network name and CNI deployment", "hnsNetworkName", networkName)
			time.Sleep(networkPollInterval)
			network, err = h.GetNetworkByName(networkName)
			continue
		}
		return nil, fmt.Errorf("winkernel proxier (%s): reading HNS network %q: %w", ipFamily, networkName, err)
	}
	if network.IsOverlay() && waitForOverlay {
		time.Sleep(overlaySettleTime)
		if network, err = h.GetNetworkByName(networkName); err != nil {
			return nil, fmt.Errorf("winkernel proxier (%s): could not find HNS network %q: %w", ipFamily, networkName, err)
		}
	}
	logger.V(1).Info("HNS network loaded", "name", network.Name, "id", network.ID, "type", network.Type)

	if wcfg.EnableDSR && !features.DefaultFeatureGate.Enabled(features.WinDSR) {
		return nil, fmt.Errorf("winkernel proxier (%s): --enable-dsr needs the WinDSR feature gate", ipFamily)
	}
	if wcfg.EnableDSR && !feats.DSR {
		return nil, fmt.Errorf("winkernel proxier (%s): --enable-dsr: this version of Windows does not support DSR", ipFamily)
	}

	if !feats.SessionAffinity {
		logger.Info("Session affinity is not supported on this version of Windows; ClientIP affinity is still requested from HNS")
	}
	cfg := planConfig{
		ipv6:                  ipFamily == v1.IPv6Protocol,
		enableDSR:             wcfg.EnableDSR,
		dsrSupported:          feats.DSR,
		forwardHealthCheckVip: wcfg.ForwardHealthCheckVip,
		healthzPort:           healthzPortOf(config.HealthzBindAddress),
	}
	var hostMAC string
	if network.IsOverlay() {
		if !features.DefaultFeatureGate.Enabled(features.WinOverlay) {
			return nil, fmt.Errorf("winkernel proxier (%s): overlay network %q needs the WinOverlay feature gate", ipFamily, networkName)
		}
		if !feats.RemoteSubnet {
			return nil, fmt.Errorf("winkernel proxier (%s): overlay network %q: this version of Windows does not support remote subnets", ipFamily, networkName)
		}
		if wcfg.SourceVip == "" {
			return nil, fmt.Errorf("winkernel proxier (%s): overlay network %q needs --source-vip", ipFamily, networkName)
		}
		if ip := net.ParseIP(wcfg.SourceVip); ip == nil {
			return nil, fmt.Errorf("winkernel proxier (%s): --source-vip %q is not an IP address", ipFamily, wcfg.SourceVip)
		}
		if nodeIP == nil || nodeIP.IsUnspecified() {
			logger.V(2).Info("Node IP unspecified, looking for the node's address")
			if resolved, rerr := apiutil.ResolveBindAddress(nodeIP); rerr == nil {
				nodeIP = resolved
			} else {
				logger.Info("Failed to find the node IP; you may need to set --bind-address", "err", rerr)
			}
		}
		if hostMAC = macs.GetHostMac(nodeIP); hostMAC == "" {
			return nil, fmt.Errorf("winkernel proxier (%s): could not find the host MAC address for node IP %s", ipFamily, nodeIP)
		}
		cfg.sourceVIP = wcfg.SourceVip
	}
	if nodeIP != nil {
		cfg.nodeIP = nodeIP.String()
	}

	b := newHNSBackend(h, ipFamily, networkName, cfg, feats, hostMAC, wcfg.RootHnsEndpointName, logger)
	p := &Proxier{ipFamily: ipFamily, backend: b}

	// A sync without changes makes no HNS call; a recreated network is
	// noticed by the rules check, one HNS call per sync period.
	if p.Shell, err = syncshell.NewProxierShell(ctx, syncshell.ProxierShell{Mode: "winkernel", Family: ipFamily, NodeName: nodeName,
		Config: config, Healthz: healthzServer, ServiceHealth: serviceHealth, MakeServicePort: newServiceInfo, CheckRules: true,
		Logger: logger}, b); err != nil {
		return nil, err
	}
	b.staleRetry = p.Shell.RetryInterval()
	return p, nil
}

// healthzPortOf returns the port of --healthz-bind-address, 0 if none.
func healthzPortOf(addr string) int {
	if addr == "" {
		return 0
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return 0
	}
	n, _ := strconv.Atoi(port)
	return n
}
