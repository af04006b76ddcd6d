package consumer_test

// The code blocks of docs/migrating-from-kubernetes.md, compiled and run. TestDocsCompiled
// checks that every Go block of that page appears, line for line, in this file.

import (
	"context"
	"fmt"
	"net/http"

	"k8s.io/client-go/kubernetes"
	"k8s.io/component-base/metrics/legacyregistry"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/loader"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/scheme"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/validation"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// Only for running the examples here.
import (
	"io"
	"net/http/httptest"
	"strings"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// configFromFile is the page's "from a file" block.
func configFromFile(data []byte) (*kubeproxyconfig.KubeProxyConfiguration, error) {
	// Either version; unset fields get kube-proxy's defaults. warnings name fields
	// that have no effect (a v1alpha2-only field in a v1alpha1 file, ...).
	cfg, warnings, err := loader.Load(data)
	if err != nil {
		return nil, err
	}
	for _, w := range warnings {
		fmt.Println("warning:", w)
	}
	if errs := validation.Validate(cfg); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

// configInCode is the page's "in code" block.
func configInCode() (*kubeproxyconfig.KubeProxyConfiguration, error) {
	versioned := &configv1alpha1.KubeProxyConfiguration{Mode: "nftables"}
	scheme.Scheme.Default(versioned) // v1alpha1's defaults, as for a file
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	if err := scheme.Scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	if errs := validation.Validate(cfg); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

// Example_defaultedConfiguration builds a defaulted internal KubeProxyConfiguration both
// ways.
func Example_defaultedConfiguration() {
	fromFile, err := configFromFile([]byte("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n"))
	if err != nil {
		fmt.Println(err)
		return
	}
	inCode, err := configInCode()
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, cfg := range []*kubeproxyconfig.KubeProxyConfiguration{fromFile, inCode} {
		fmt.Println(cfg.Mode, cfg.SyncPeriod.Duration, cfg.MinSyncPeriod.Duration, cfg.HealthzBindAddress, cfg.MetricsBindAddress)
	}
	// Output:
	// nftables 30s 1s 0.0.0.0:10256 127.0.0.1:10249
	// nftables 30s 1s 0.0.0.0:10256 127.0.0.1:10249
}

// healthAndMetrics is the page's "health and metrics" block: what cmd/kube-proxy does,
// for a program that embeds a proxier.
func healthAndMetrics(ctx context.Context, client kubernetes.Interface, nodeName string,
	cfg *kubeproxyconfig.KubeProxyConfiguration) (*healthcheck.ProxyHealthServer, http.Handler, error) {
	// The Node, for /healthz's node eligibility (and, as in kube-proxy, an exit when
	// its IPs or PodCIDRs change).
	nodeManager, err := proxy.NewNodeManager(ctx, client, nodeName, cfg)
	if err != nil {
		return nil, nil, err
	}
	nodeConfig := config.NewNodeConfig(ctx, nodeManager.NodeInformer(), cfg.ConfigSyncPeriod.Duration)
	nodeConfig.RegisterEventHandler(nodeManager)
	go nodeConfig.Run(ctx.Done())

	// /healthz and /livez on cfg.HealthzBindAddress; the proxier reports its syncs to
	// it (pass healthServer as the proxier constructor's healthzServer argument).
	healthServer := healthcheck.NewProxyHealthServer(cfg.HealthzBindAddress, 2*cfg.SyncPeriod.Duration, nodeManager)
	go func() { _ = healthServer.Run(ctx) }()

	// kube-proxy's metrics, in component-base's legacy registry: register once,
	// serve where you like (kube-proxy: /metrics on cfg.MetricsBindAddress).
	metrics.RegisterMetrics(cfg.Mode)
	mux := http.NewServeMux()
	mux.Handle("/metrics", legacyregistry.Handler())
	return healthServer, mux, nil
}

// Example_healthAndMetrics wires health and metrics against a fake API server.
func Example_healthAndMetrics() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(&v1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-1"},
		Status:     v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "198.18.0.1"}}},
	})
	cfg, err := configInCode()
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg.HealthzBindAddress = "127.0.0.1:0"
	healthServer, metricsHandler, err := healthAndMetrics(ctx, client, "node-1", cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("node eligible:", healthServer.NodeEligible())

	metrics.SyncProxyRulesLatency.WithLabelValues("IPv4").Observe(0.25)
	srv := httptest.NewServer(metricsHandler)
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/metrics")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "kubeproxy_sync_proxy_rules_duration_seconds_count") {
			fmt.Println(line)
		}
	}
	// Output:
	// node eligible: true
	// kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 1
}
