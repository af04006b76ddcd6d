//go:build windows

package app

// The Windows platform: the kernelspace mode on pkg/proxy/winkernel. The decisions are
// in kernelspace.go and winflags.go (tested on every platform); this file only
// connects them to the platform hooks of server.go and options.go.

import (
	"context"

	"github.com/spf13/pflag"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

func (o *Options) addOSFlags(fs *pflag.FlagSet) { o.addWindowsFlags(fs) }

// platformApplyDefaults fills in the Windows defaults after flags and file are merged.
func (o *Options) platformApplyDefaults(cfg *kubeproxyconfig.KubeProxyConfiguration) {
	applyWindowsDefaults(cfg)
}

// platformSetup runs before the proxier is created; Windows has no host settings to
// change, only the node IPs winkernel expects.
func (s *ProxyServer) platformSetup(context.Context) error {
	windowsNodeIPs(s.PrimaryIPFamily, s.NodeIPs)
	return nil
}

// platformCheckSupported says which IP families HNS can proxy on this host.
func (s *ProxyServer) platformCheckSupported(context.Context) (bool, bool, bool, error) {
	return winkernelEntryPoints().checkSupported(s)
}

// checkModeImplemented fails for a mode this build cannot run on Windows.
func checkModeImplemented(mode kubeproxyconfig.ProxyMode) error {
	return winkernelEntryPoints().modeImplemented(mode)
}

// createProxier creates the kernelspace proxy.Provider.
func (s *ProxyServer) createProxier(ctx context.Context, cfg *kubeproxyconfig.KubeProxyConfiguration, dualStack, initOnly bool) (proxy.Provider, error) {
	return winkernelEntryPoints().createProxier(ctx, s, cfg, dualStack, initOnly)
}

// platformCleanup removes the HNS load balancers with --cleanup.
func platformCleanup(ctx context.Context, _ kubeproxyconfig.ProxyMode, cleanupAndExit bool, _ socketLBOptions) error {
	return winkernelEntryPoints().cleanup(ctx, cleanupAndExit)
}
