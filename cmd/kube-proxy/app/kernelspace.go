package app

// The Windows platform's decisions for the kernelspace mode: which families it can
// proxy, which winkernel constructor to call, what --init-only, --cleanup and --dry-run
// do there. They are kept out of the windows-tagged files and take winkernel's entry
// points as functions, so that they build and are tested on every platform;
// server_windows.go calls them with the real package (mode_kernelspace_windows.go).

import (
	"context"
	"errors"
	"fmt"
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
)

// winkernelBackend is what the Windows wiring uses of pkg/proxy/winkernel, with
// upstream v1.37's signatures.
type winkernelBackend struct {
	// checkKernel fails when the host's HNS cannot run the kernelspace proxier.
	checkKernel func() error
	// dualStackCompatible says whether HNS can proxy both families on networkName.
	dualStackCompatible func(networkName string) bool
	newProxier          func(cfg *kubeproxyconfig.KubeProxyConfiguration, family v1.IPFamily, nodeName string, nodeIP net.IP, recorder events.EventRecorder, healthz *healthcheck.ProxyHealthServer) (proxy.Provider, error)
	newDualStackProxier func(cfg *kubeproxyconfig.KubeProxyConfiguration, nodeName string, nodeIPs map[v1.IPFamily]net.IP, recorder events.EventRecorder, healthz *healthcheck.ProxyHealthServer) (proxy.Provider, error)
	// cleanupLeftovers removes every HNS load balancer and reports whether any
	// removal failed.
	cleanupLeftovers func() (encounteredError bool)
}

// errNoWinkernel is returned by a Windows build that was made without the winkernel
// backend.
var errNoWinkernel = errors.New("the kernelspace proxy mode is not implemented by this build (no winkernel backend)")

// errKernelspaceDryRun explains why --dry-run fails on Windows rather than printing
// nothing: the dry run prints rule text, and HNS load balancers have none.
var errKernelspaceDryRun = errors.New("--dry-run is not supported by the kernelspace proxy mode: it programs HNS load balancers, which have no rule text to print")

// modeImplemented fails for a mode this Windows build cannot run.
func (b *winkernelBackend) modeImplemented(mode kubeproxyconfig.ProxyMode) error {
	if mode != kubeproxyconfig.ProxyModeKernelspace {
		return fmt.Errorf("proxy mode %q is not supported on Windows: the only mode there is %q", mode, kubeproxyconfig.ProxyModeKernelspace)
	}
	if b == nil {
		return errNoWinkernel
	}
	return nil
}

// checkSupported says which families the kernelspace proxier can proxy on this host:
// each family alone always, both only if HNS supports dual-stack on the configured
// network.
func (b *winkernelBackend) checkSupported(s *ProxyServer) (ipv4Supported, ipv6Supported, dualStackSupported bool, err error) {
	if s.dryRun != nil {
		return false, false, false, errKernelspaceDryRun
	}
	if b == nil {
		return false, false, false, errNoWinkernel
	}
	if err := b.checkKernel(); err != nil {
		return false, false, false, fmt.Errorf("this host cannot run the kernelspace proxier: %w", err)
	}
	return true, true, b.dualStackCompatible(s.Config.Winkernel.NetworkName), nil
}

// createProxier builds the kernelspace proxier: winkernel's own dual-stack constructor
// for both families (it builds one proxier per family over a metaproxier), else one
// proxier for the primary family.
func (b *winkernelBackend) createProxier(ctx context.Context, s *ProxyServer, cfg *kubeproxyconfig.KubeProxyConfiguration, dualStack, initOnly bool) (proxy.Provider, error) {
	if initOnly {
		// Nothing on Windows needs more privileges than the proxier itself.
		return nil, errors.New("--init-only is not implemented on Windows")
	}
	if s.dryRun != nil {
		return nil, errKernelspaceDryRun
	}
	if err := b.modeImplemented(cfg.Mode); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).Info("Using proxier", "mode", cfg.Mode, "dualStack", dualStack,
		"networkName", cfg.Winkernel.NetworkName, "enableDSR", cfg.Winkernel.EnableDSR)
	var p proxy.Provider
	var err error
	if dualStack {
		p, err = b.newDualStackProxier(cfg, s.NodeName, s.NodeIPs, s.Recorder, s.HealthzServer)
	} else {
		p, err = b.newProxier(cfg, s.PrimaryIPFamily, s.NodeName, s.NodeIPs[s.PrimaryIPFamily], s.Recorder, s.HealthzServer)
	}
	if err != nil {
		return nil, fmt.Errorf("unable to create proxier: %w", err)
	}
	return p, nil
}

// cleanup removes the HNS load balancers with --cleanup. Without it there is nothing
// to do: Windows has a single mode, so no other mode's state can be left behind.
func (b *winkernelBackend) cleanup(ctx context.Context, cleanupAndExit bool) error {
	if !cleanupAndExit {
		return nil
	}
	if b == nil {
		return errNoWinkernel
	}
	klog.FromContext(ctx).Info("Removing every HNS load balancer")
	if b.cleanupLeftovers() {
		return errors.New("encountered an error while removing HNS load balancers")
	}
	return nil
}
