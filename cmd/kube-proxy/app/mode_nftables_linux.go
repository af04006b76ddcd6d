//go:build linux

package app

import (
	"context"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
)

func init() {
	proxierModes[kubeproxyconfig.ProxyModeNFTables] = proxierMode{dryRunKind: "nft script", newProxier: newNFTablesProxier}
}

func newNFTablesProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	if f.dryRun != nil {
		return asProvider(nftables.NewProxierWithOptions(ctx, s.Config, f.family, f.localDetector, s.NodeName, f.nodeIP,
			nil, nil, false, f.dryRunOptions()...))
	}
	return asProvider(nftables.NewProxier(ctx, s.Config, f.family, f.localDetector, s.NodeName, f.nodeIP,
		s.Recorder, s.HealthzServer, f.initOnly))
}
