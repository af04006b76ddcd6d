//go:build linux

package app

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metaproxier"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

func init() {
	proxierFactories[kubeproxyconfig.ProxyModeNFTables] = newNFTablesProxier
}

func newNFTablesProxier(ctx context.Context, s *ProxyServer, cfg *kubeproxyconfig.KubeProxyConfiguration,
	families []v1.IPFamily, localDetectors map[v1.IPFamily]proxyutil.LocalTrafficDetector, initOnly bool) (proxy.Provider, error) {
	providers := map[v1.IPFamily]proxy.Provider{}
	for _, family := range families {
		var p *nftables.Proxier
		var err error
		if s.dryRun != nil {
			p, err = nftables.NewDryRunProxier(ctx, cfg, family, localDetectors[family], s.NodeName, s.NodeIPs[family],
				s.dryRun.writer(family, "nft script"))
		} else {
			p, err = nftables.NewProxier(ctx, cfg, family, localDetectors[family], s.NodeName, s.NodeIPs[family],
				s.Recorder, s.HealthzServer, initOnly)
		}
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
