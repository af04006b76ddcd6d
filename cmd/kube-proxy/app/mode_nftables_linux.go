//go:build linux

package app

import (
	"context"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
)

// newNFTablesProxier builds the nftables proxier of one family. A dry run
// gets the same arguments: the proxier itself then reports to no healthz and
// opens no health check listener, and --init-only cannot accompany it.
func newNFTablesProxier(ctx context.Context, s *ProxyServer, f familySetup) (proxy.Provider, error) {
	return asProvider(nftables.NewProxierWithOptions(ctx, s.Config, f.family, f.localDetector, s.NodeName, f.nodeIP,
		s.Recorder, s.HealthzServer, f.initOnly, f.dryRunOptions()...))
}
