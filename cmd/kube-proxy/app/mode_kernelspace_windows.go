//go:build windows

package app

import (
	"net"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/winkernel"
)

// winkernelEntryPoints returns pkg/proxy/winkernel's entry points, for kernelspace.go.
func winkernelEntryPoints() *winkernelBackend {
	return &winkernelBackend{
		checkKernel: func() error {
			_, err := winkernel.CanUseWinKernelProxier(winkernel.WindowsKernelCompatTester{})
			return err
		},
		dualStackCompatible: winkernel.DualStackCompatTester{}.DualStackCompatible,
		newProxier: func(cfg *kubeproxyconfig.KubeProxyConfiguration, family v1.IPFamily, nodeName string, nodeIP net.IP, recorder events.EventRecorder, healthz *healthcheck.ProxyHealthServer) (proxy.Provider, error) {
			// asProvider keeps a failed constructor's nil *Proxier from becoming a
			// non-nil Provider.
			return asProvider(winkernel.NewProxier(cfg, family, nodeName, nodeIP, recorder, healthz))
		},
		newDualStackProxier: winkernel.NewDualStackProxier,
		cleanupLeftovers:    winkernel.CleanupLeftovers,
	}
}
