package consumer_test

// The Go block of the README's "Use it as a library" section, compiled. TestDocsCompiled
// checks that the README shows exactly this code.

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/kubernetes"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// myBackend programs one IP family's node-local State; this one only prints it.
type myBackend struct{}

func (myBackend) Sync(ctx context.Context, state *localnode.State) error {
	for _, svc := range state.Services {
		fmt.Println(svc.Name, svc.ClusterIP, "->", svc.InternalEndpoints())
	}
	return nil
}

func runProxy(ctx context.Context, client kubernetes.Interface, nodeName string) error {
	nodes := &proxy.NodeManager{} // holds this node's Node, for /healthz
	health := healthcheck.NewProxyHealthServer("0.0.0.0:10256", time.Minute, nodes)
	go func() { _ = health.Run(ctx) }()
	return proxyrun.Run(ctx, source.NewKubernetes(client, nodeName, 15*time.Minute), myBackend{},
		proxyrun.Options{NodeName: nodeName, MinSyncInterval: time.Second, Health: health, Node: nodes})
}

// The README's function is compiled, not run: it needs an API server.
var _ = runProxy
