//go:build linux

package app

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/pflag"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	utiliptables "k8s.io/net-utils/iptables"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/iptables"
	"k8s.io/kube-proxy/pkg/proxy/ipvs"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
)

// defaultedMode records that the mode was not chosen, for the KubeProxyDefaultMode
// warning.
var defaultedMode bool

func initForOS(bool) error { return nil }

func (o *Options) addOSFlags(fs *pflag.FlagSet) { addIPTablesBackendFlag(fs) }

// platformApplyDefaults fills in the Linux defaults after flags and file are merged.
func (o *Options) platformApplyDefaults(cfg *kubeproxyconfig.KubeProxyConfiguration) {
	if cfg.Mode == "" {
		cfg.Mode = kubeproxyconfig.ProxyModeIPTables
		defaultedMode = true
	}
	if cfg.Mode == kubeproxyconfig.ProxyModeNFTables && len(cfg.NodePortAddresses) == 0 {
		cfg.NodePortAddresses = []string{kubeproxyconfig.NodePortAddressesPrimary}
	}
	if cfg.DetectLocalMode == "" {
		o.logger.V(4).Info("Defaulting detect-local-mode", "localModeClusterCIDR", string(kubeproxyconfig.LocalModeClusterCIDR))
		cfg.DetectLocalMode = kubeproxyconfig.LocalModeClusterCIDR
	}
	o.logger.V(2).Info("DetectLocalMode", "localMode", string(cfg.DetectLocalMode))
}

// platformSetup runs before the proxier is created: the conntrack sysctls.
func (s *ProxyServer) platformSetup(ctx context.Context) error {
	if err := conntrack.SetSysctls(ctx, &s.Config.Linux.Conntrack); err != nil {
		return fmt.Errorf("could not set conntrack parameters from kube-proxy configuration: %w", err)
	}
	return nil
}

func isIPTablesBased(mode kubeproxyconfig.ProxyMode) bool {
	return mode == kubeproxyconfig.ProxyModeIPTables || mode == kubeproxyconfig.ProxyModeIPVS
}

// platformCheckSupported says which IP families the mode can proxy on this host.
func (s *ProxyServer) platformCheckSupported(ctx context.Context) (ipv4Supported, ipv6Supported, dualStackSupported bool, err error) {
	logger := klog.FromContext(ctx)
	if s.dryRun != nil {
		// A dry run programs nothing, so what the host supports does not matter.
		return true, true, true, nil
	}
	if isIPTablesBased(s.Config.Mode) {
		backend, err := s.iptablesBackend(ctx)
		if err != nil {
			return false, false, false, err
		}
		errv4 := utiliptables.NewWithBackend(utiliptables.ProtocolIPv4, backend).Present()
		errv6 := utiliptables.NewWithBackend(utiliptables.ProtocolIPv6, backend).Present()
		ipv4Supported, ipv6Supported = errv4 == nil, errv6 == nil
		switch {
		case !ipv4Supported && !ipv6Supported:
			// Almost certainly the same cause twice (no iptables binary, no modules).
			return false, false, false, fmt.Errorf("iptables is not available on this host: %w", errv4)
		case !ipv4Supported:
			logger.Info("No iptables support for family", "ipFamily", v1.IPv4Protocol, "error", errv4)
		case !ipv6Supported:
			logger.Info("No iptables support for family", "ipFamily", v1.IPv6Protocol, "error", errv6)
		}
	} else {
		ipv4Supported, ipv6Supported = true, true
	}

	if _, statErr := os.Stat("/proc/net/if_inet6"); statErr != nil {
		logger.Info("No kernel support for family", "ipFamily", v1.IPv6Protocol)
		ipv6Supported = false
	} else if content, readErr := os.ReadFile("/proc/sys/net/ipv6/conf/all/disable_ipv6"); readErr == nil && strings.TrimSpace(string(content)) == "1" {
		logger.Info("Kernel support disabled for family", "ipFamily", v1.IPv6Protocol)
		ipv6Supported = false
	}
	return ipv4Supported, ipv6Supported, ipv4Supported && ipv6Supported, nil
}

// checkModeImplemented fails for a mode this build cannot run.
func checkModeImplemented(mode kubeproxyconfig.ProxyMode) error {
	if _, ok := proxierModes[mode]; !ok {
		return fmt.Errorf("proxy mode %s is not supported by this build", mode)
	}
	return nil
}

// createProxier creates the proxy.Provider of the configured mode.
func (s *ProxyServer) createProxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, dualStack, initOnly bool) (proxy.Provider, error) {
	logger := klog.FromContext(ctx)
	mode, ok := proxierModes[cfg.Mode]
	if !ok {
		return nil, checkModeImplemented(cfg.Mode)
	}
	if cfg.Mode == kubeproxyconfig.ProxyModeIPTables && defaultedMode {
		message := "No kube-proxy mode specified: defaulting to 'iptables'. Note that in Kubernetes 1.40 the default mode will switch to 'nftables'. If you wish to continue using 'iptables' mode, you must explicitly specify 'mode: iptables' in the kube-proxy config file, or '--proxy-mode iptables' on the kube-proxy command line."
		logger.Error(nil, message)
		s.Recorder.Eventf(s.NodeRef, nil, v1.EventTypeWarning, "KubeProxyDefaultMode", "StartKubeProxy", message)
	}
	logger.Info("Using proxier", "mode", cfg.Mode, "dryRun", s.dryRun != nil)
	p, err := s.newProxiers(ctx, mode, dualStack, initOnly)
	if err != nil {
		return nil, fmt.Errorf("unable to create proxier: %w", err)
	}
	return p, nil
}

// platformCleanup removes rules of modes other than the current one, or of every
// mode with cleanupAndExit: iptables and ipvs state when switching to nftables,
// nftables state when switching to iptables or ipvs, as upstream. The socket load
// balancer is removed likewise whenever it is not to run, so that turning
// --socket-lb off really turns it off: its programs would otherwise stay attached,
// translating with the last maps, after this process stopped updating them.
func platformCleanup(ctx context.Context, mode kubeproxyconfig.ProxyMode, cleanupAndExit bool, socketLB socketLBOptions) error {
	return runCleanups(ctx, []string{"socketlb", "iptables", "ipvs", "nftables"}, platformCleanups(mode, cleanupAndExit, socketLB))
}

// platformCleanups chooses the cleanups platformCleanup runs, by name.
func platformCleanups(mode kubeproxyconfig.ProxyMode, cleanupAndExit bool, socketLB socketLBOptions) map[string]func(context.Context) bool {
	cleanups := map[string]func(context.Context) bool{}
	if !isIPTablesBased(mode) || cleanupAndExit {
		cleanups["iptables"] = iptables.CleanupLeftovers
		cleanups["ipvs"] = ipvs.CleanupLeftovers
	}
	if isIPTablesBased(mode) || cleanupAndExit {
		cleanups["nftables"] = nftables.CleanupLeftovers
	}
	if cleanupAndExit || !socketLB.enabled {
		pinPath := socketLB.pinPath
		cleanups["socketlb"] = func(ctx context.Context) bool { return cleanupSocketLB(ctx, pinPath) }
	}
	return cleanups
}

// runCleanups runs each named cleanup in order and, when any failed, every failed one
// once more. iptables and ipvs mode name some chains alike (KUBE-MARK-MASQ in nat,
// KUBE-PROXY-FIREWALL in filter): after ipvs mode, iptables mode's cleanup cannot delete
// them while ipvs mode's chains still jump there ("CHAIN_DEL failed (Device or resource
// busy)"; upstream v1.37.2 exits 1 the same way), and the ipvs cleanup that follows
// removes those jumps. No fixed order suits both modes, so a second pass does what the
// first could not; seen in a QEMU guest on a real IPVS kernel (test/vm), where --cleanup
// after ipvs mode exited 1 in 10 of 14 runs.
func runCleanups(ctx context.Context, order []string, cleanups map[string]func(context.Context) bool) error {
	var failed []string
	for _, name := range order {
		if c := cleanups[name]; c != nil && c(ctx) {
			failed = append(failed, name)
		}
	}
	if len(failed) == 0 {
		return nil
	}
	klog.FromContext(ctx).Info("Cleaning up again what another mode's rules still referenced", "failed", failed)
	var still []string
	for _, name := range failed {
		if cleanups[name](ctx) {
			still = append(still, name)
		}
	}
	if len(still) > 0 {
		return fmt.Errorf("encountered an error while tearing down rules of %s mode", strings.Join(still, ", "))
	}
	return nil
}
