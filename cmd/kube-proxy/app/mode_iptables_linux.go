//go:build linux

package app

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	utiliptables "k8s.io/net-utils/iptables"
	utilsysctl "k8s.io/net-utils/sysctl"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/iptables"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

func init() {
	proxierFactories[kubeproxyconfig.ProxyModeIPTables] = newIPTablesProxier
}

func newIPTablesProxier(ctx context.Context, s *ProxyServer, cfg *kubeproxyconfig.KubeProxyConfiguration,
	families []v1.IPFamily, localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector, initOnly bool) (proxy.Provider, error) {
	var ipts map[v1.IPFamily]utiliptables.Interface
	if s.dryRun == nil {
		backend, err := s.iptablesBackend(ctx)
		if err != nil {
			return nil, err
		}
		ipts = utiliptables.NewBestEffortWithBackend(backend)
	}
	providers := map[v1.IPFamily]proxy.Provider{}
	for _, family := range families {
		var opts []iptables.Option
		if s.dryRun != nil {
			opts = append(opts, iptables.WithDryRun(s.dryRun.writer(family, "iptables-restore input")))
		}
		p, err := iptables.NewProxierWithOptions(ctx, cfg, family, ipts[family], utilsysctl.New(),
			localDetectors[family], s.NodeName, s.NodeIPs[family], s.Recorder, s.HealthzServer, initOnly, opts...)
		if err != nil {
			return nil, fmt.Errorf("%s proxier: %w", family, err)
		}
		if p != nil {
			providers[family] = p
		}
	}
	if initOnly {
		return nil, nil
	}
	if len(families) == 2 {
		return metaproxier.NewMetaProxier(providers[v1.IPv4Protocol], providers[v1.IPv6Protocol]), nil
	}
	return providers[families[0]], nil
}
