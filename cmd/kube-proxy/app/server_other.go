//go:build !linux && !windows

package app

import (
	"context"
	"fmt"
	"runtime"

	"github.com/spf13/pflag"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
)

var errUnsupported = fmt.Errorf("%s/%s is not supported by this build", runtime.GOOS, runtime.GOARCH)

func initForOS(bool) error { return nil }

func (o *Options) addOSFlags(*pflag.FlagSet) {}

func (o *Options) platformApplyDefaults(*kubeproxyconfig.KubeProxyConfiguration) {}

func (s *ProxyServer) platformSetup(context.Context) error { return errUnsupported }

func (s *ProxyServer) platformCheckSupported(context.Context) (bool, bool, bool, error) {
	return false, false, false, errUnsupported
}

func checkModeImplemented(mode kubeproxyconfig.ProxyMode) error {
	return fmt.Errorf("proxy mode %s is not supported by this build: %w", mode, errUnsupported)
}

func (s *ProxyServer) createProxier(context.Context, *kubeproxyconfig.KubeProxyConfiguration, bool, bool) (proxy.Provider, error) {
	return nil, errUnsupported
}

func platformCleanup(context.Context, kubeproxyconfig.ProxyMode, bool, socketLBOptions) error {
	return errUnsupported
}
