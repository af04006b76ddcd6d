package app

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// familySetup is what every mode's proxier for one IP family is built from; deciding it
// is the same for every mode, so it is done once, here.
type familySetup struct {
	family        v1.IPFamily
	nodeIP        net.IP
	localDetector proxyutil.LocalTrafficDetector
	// dryRun receives what the proxier would program, in place of the host; nil
	// unless this is a dry run.
	dryRun io.Writer
	// initOnly asks only for the privileged host preparation; the proxier may be nil.
	initOnly bool
	// nodeAddrs, when set, lists the node's addresses in place of the
	// host's interfaces (a dry run for another node, see nodeaddrs.go).
	nodeAddrs proxyutil.NetworkInterfacer
}

// proxierMode is what a mode's file registers in proxierModes.
type proxierMode struct {
	// dryRunKind names what a dry run prints for the mode, e.g. "nft script".
	dryRunKind string
	// newProxier builds the mode's proxier for one IP family.
	newProxier func(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error)
	// checkAvailable, when set, says why the mode cannot run on this host
	// (a missing kernel facility); it runs before anything on the host is
	// changed, so a refused mode leaves the host untouched.
	checkAvailable func(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration) error
}

// hostKernelInfo probes the running kernel; tests replace it.
var hostKernelInfo = newHostKernel

// checkModeAvailable refuses a mode the running kernel lacks a facility for (naming
// it, see kernelcheck.go), then runs the mode's checkAvailable, if it has one.
func checkModeAvailable(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration) error {
	unknown, err := checkKernelFor(cfg.Mode, hostKernelInfo(), os.Getenv)
	if len(unknown) > 0 {
		klog.FromContext(ctx).V(2).Info("Cannot tell whether the kernel has these; not refusing the mode for them", "mode", cfg.Mode, "unknown", unknown)
	}
	if err != nil {
		return err
	}
	if m, ok := proxierModes[cfg.Mode]; ok && m.checkAvailable != nil {
		return m.checkAvailable(ctx, cfg)
	}
	return nil
}

// proxierModes holds the modes this build implements; each mode's file registers
// itself, so a mode whose backend is absent fails with a clear error.
var proxierModes = map[kubeproxyconfig.ProxyMode]proxierMode{}

// newProxiers builds mode's proxier for each IP family this node proxies (both with
// dualStack, else the primary one), and over two of them a metaproxier. With initOnly
// it only prepares the host and returns nil.
func (s *ProxyServer) newProxiers(ctx context.Context, mode proxierMode, dualStack, initOnly bool) (proxy.Provider, error) {
	logger := klog.FromContext(ctx)
	families := []v1.IPFamily{s.PrimaryIPFamily}
	if dualStack {
		families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
	}
	localDetectors := getLocalDetectors(logger, s.PrimaryIPFamily, s.Config, s.podCIDRs)
	providers := map[v1.IPFamily]proxy.Provider{}
	for _, family := range families {
		f := familySetup{
			family:        family,
			nodeIP:        s.NodeIPs[family],
			localDetector: localDetectors[family],
			initOnly:      initOnly,
			nodeAddrs:     s.nodeAddrs,
		}
		if s.dryRun != nil {
			f.dryRun = s.dryRun.writer(family, mode.dryRunKind)
		}
		p, err := mode.newProxier(ctx, s, f)
		if err != nil {
			return nil, fmt.Errorf("%s proxier: %w", family, err)
		}
		providers[family] = p
	}
	if initOnly {
		return nil, nil
	}
	if len(families) == 2 {
		return metaproxier.NewMetaProxier(providers[v1.IPv4Protocol], providers[v1.IPv6Protocol]), nil
	}
	return providers[families[0]], nil
}

// asProvider passes on what a proxier constructor returned, turning the nil proxier of
// an initOnly run into a nil Provider rather than a Provider holding a nil pointer.
func asProvider[T any, P interface {
	*T
	proxy.Provider
}](p P, err error) (proxy.Provider, error) {
	if err != nil || p == nil {
		return nil, err
	}
	return p, nil
}

// getLocalDetectors returns, per IP family, how the proxiers tell traffic from local
// pods, as detectLocalMode says.
func getLocalDetectors(logger klog.Logger, primary v1.IPFamily, cfg *kubeproxyconfig.KubeProxyConfiguration, nodePodCIDRs []string) map[v1.IPFamily]proxyutil.LocalTrafficDetector {
	detectors := map[v1.IPFamily]proxyutil.LocalTrafficDetector{
		v1.IPv4Protocol: proxyutil.NewNoOpLocalDetector(),
		v1.IPv6Protocol: proxyutil.NewNoOpLocalDetector(),
	}
	switch cfg.DetectLocalMode {
	case kubeproxyconfig.LocalModeClusterCIDR:
		for family, cidrs := range proxyutil.MapCIDRsByIPFamily(cfg.DetectLocal.ClusterCIDRs) {
			detectors[family] = proxyutil.NewDetectLocalByCIDR(cidrs[0].String())
		}
		if !detectors[primary].IsImplemented() {
			logger.Info("Detect-local-mode set to ClusterCIDR, but no cluster CIDR specified for primary IP family", "ipFamily", primary, "clusterCIDRs", cfg.DetectLocal.ClusterCIDRs)
		}
	case kubeproxyconfig.LocalModeNodeCIDR:
		for family, cidrs := range proxyutil.MapCIDRsByIPFamily(nodePodCIDRs) {
			detectors[family] = proxyutil.NewDetectLocalByCIDR(cidrs[0].String())
		}
		if !detectors[primary].IsImplemented() {
			logger.Info("Detect-local-mode set to NodeCIDR, but no PodCIDR defined at node for primary IP family", "ipFamily", primary, "podCIDRs", nodePodCIDRs)
		}
	case kubeproxyconfig.LocalModeBridgeInterface:
		d := proxyutil.NewDetectLocalByBridgeInterface(cfg.DetectLocal.BridgeInterface)
		detectors[v1.IPv4Protocol], detectors[v1.IPv6Protocol] = d, d
	case kubeproxyconfig.LocalModeInterfaceNamePrefix:
		d := proxyutil.NewDetectLocalByInterfaceNamePrefix(cfg.DetectLocal.InterfaceNamePrefix)
		detectors[v1.IPv4Protocol], detectors[v1.IPv6Protocol] = d, d
	default:
		logger.Info("Defaulting to no-op detect-local")
	}
	return detectors
}
