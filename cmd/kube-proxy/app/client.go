package app

import (
	"context"
	"fmt"

	v1 "k8s.io/api/core/v1"
	clientset "k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	componentbaseconfig "k8s.io/component-base/config"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/source/manifests"
)

// connect sets s.Client: the manifests' in-memory API server with --manifests, else the
// cluster's.
func (s *ProxyServer) connect(ctx context.Context, opts serverOptions) error {
	logger := klog.FromContext(ctx)
	if opts.manifests != "" {
		s.manifests = manifests.NewReader(opts.manifests)
		res, err := s.manifests.Sync(ctx)
		if err != nil {
			return fmt.Errorf("--manifests: %w", err)
		}
		logger.Info("Running without an API server, from manifests", "path", opts.manifests,
			"objects", res.Created, "rejected", len(res.Problems))
		s.Client = s.manifests.Client()
		if !manifestHasNode(s.manifests, s.NodeName) {
			logger.Info("Warning: the manifests have no Node of this node's name; node IPs fall back to --bind-address or loopback. Use --hostname-override to pick one",
				"nodeName", s.NodeName)
		}
	} else {
		var err error
		s.Client, err = createClient(ctx, s.Config.ClientConnection, opts.master)
		if err != nil {
			return err
		}
		s.apiHealth = &apiHealth{}
	}
	return nil
}

// manifestHasNode reports whether the manifests hold the Node this kube-proxy runs as.
func manifestHasNode(src *manifests.Reader, name string) bool {
	for _, obj := range src.Objects() {
		if n, ok := obj.(*v1.Node); ok && n.Name == name {
			return true
		}
	}
	return false
}

// createClient builds the API client from a kubeconfig and/or --master, else the
// in-cluster configuration.
func createClient(ctx context.Context, cfg componentbaseconfig.ClientConnectionConfiguration, masterOverride string) (clientset.Interface, error) {
	logger := klog.FromContext(ctx)
	var kubeConfig *rest.Config
	var err error
	if cfg.Kubeconfig == "" && masterOverride == "" {
		logger.Info("Neither kubeconfig file nor master URL was specified, falling back to in-cluster config")
		kubeConfig, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("in-cluster configuration (use --kubeconfig, --master, or --manifests to run without a cluster): %w", err)
		}
	} else {
		kubeConfig, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
			&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
			&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: masterOverride}}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %q / master %q: %w", cfg.Kubeconfig, masterOverride, err)
		}
	}
	kubeConfig.AcceptContentTypes = cfg.AcceptContentTypes
	kubeConfig.ContentType = cfg.ContentType
	kubeConfig.QPS = cfg.QPS
	kubeConfig.Burst = int(cfg.Burst)
	return clientset.NewForConfig(kubeConfig)
}
