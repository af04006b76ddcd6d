package app

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	lnserver "k8s.io/kube-proxy/pkg/proxy/localnode/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// addLocalNodeFlags registers --localnode-serve.
func addLocalNodeFlags(fs *pflag.FlagSet, address *string) {
	fs.StringVar(address, "localnode-serve", *address, "Also serve this node's node-local state (and the cluster-wide objects it is computed from) over gRPC at this address, for out-of-process backends and `kube-proxy state --socket`: unix:///path.sock (e.g. "+lnserver.DefaultAddress+") or tcp://host:port (plain TCP: bind it to loopback). Empty (the default) serves nothing.")
}

// startLocalNodeServer serves the node-local state next to normal operation, when
// --localnode-serve is set. It watches through a source of its own on the same client
// (the API server or the manifests' fake one), so the built-in proxier is untouched; a
// failure is logged and does not stop the proxy.
func (s *ProxyServer) startLocalNodeServer(ctx context.Context, address string) {
	if address == "" {
		return
	}
	logger := klog.FromContext(ctx)
	families := []localnode.Family{localnode.IPv4, localnode.IPv6}
	if s.PrimaryIPFamily == v1.IPv6Protocol {
		families = []localnode.Family{localnode.IPv6, localnode.IPv4}
	}
	srv, err := lnserver.New(lnserver.Options{Proxy: proxyrun.Options{
		NodeName: s.NodeName, Families: families,
		MinSyncInterval: s.Config.MinSyncPeriod.Duration,
	}})
	if err != nil {
		logger.Error(err, "Not serving the node-local state")
		return
	}
	src := source.NewKubernetes(s.Client, s.NodeName, s.Config.ConfigSyncPeriod.Duration)
	if !features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		// As startInformers: without the gate kube-proxy does not read ServiceCIDRs, and
		// the server would otherwise wait for a list that may never come.
		src.WithoutServiceCIDRs()
	}
	go func() {
		if err := srv.Run(ctx, src); err != nil {
			logger.Error(err, "Node-local state source failed")
		}
	}()
	go func() {
		if err := srv.Serve(ctx, lnserver.ServeOptions{Address: address, InsecureTCP: true}); err != nil {
			logger.Error(fmt.Errorf("--localnode-serve %q: %w", address, err), "Not serving the node-local state")
		}
	}()
}
