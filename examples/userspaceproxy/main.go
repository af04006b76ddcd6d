//go:build linux

package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	manifestsource "k8s.io/kube-proxy/pkg/proxy/source/manifests"
)

func main() {
	klog.InitFlags(nil)
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the cluster to proxy for (in-cluster config when empty and --manifests is not set)")
	manifests := flag.String("manifests", "", "read Services, EndpointSlices and Nodes from this file or directory instead of a cluster")
	node := flag.String("node", "", "this node's name (defaults to the hostname)")
	iface := flag.String("interface", DefaultInterface, "dummy interface to hold service addresses (created if missing)")
	ipv6 := flag.Bool("ipv6", false, "proxy IPv6 services as well")
	minSync := flag.Duration("min-sync-period", time.Second, "shortest time between syncs")
	socket := flag.String("socket", "", "read the node-local state from a kube-proxy serving it (--localnode-serve), e.g. "+client.DefaultAddress+", instead of watching a cluster or manifests: the proxy then runs out of process")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	if *socket != "" {
		err = runFromSocket(ctx, *socket, *iface, *ipv6)
	} else {
		err = run(ctx, *kubeconfig, *manifests, *node, *iface, *ipv6, *minSync)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "userspaceproxy:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, kubeconfig, manifests, node, iface string, ipv6 bool, minSync time.Duration) error {
	if node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no --node and no hostname: %w", err)
		}
		node = h
	}
	var src source.Source
	if manifests != "" {
		src = manifestsource.New(manifests, node, 0)
	} else {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return fmt.Errorf("loading kubeconfig %q: %w", kubeconfig, err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
		src = source.NewKubernetes(client, node, 15*time.Minute)
	}
	p := New(Options{Interface: iface})
	defer p.Close()
	families := []localnode.Family{localnode.IPv4}
	if ipv6 {
		families = append(families, localnode.IPv6)
	}
	return proxyrun.Run(ctx, src, p, proxyrun.Options{NodeName: node, Families: families, MinSyncInterval: minSync})
}

// runFromSocket is the out-of-process route: the brain runs in the kube-proxy serving the
// socket, and this process only programs the States it is sent. The backend is the same
// one run() hands to proxyrun.
func runFromSocket(ctx context.Context, socket, iface string, ipv6 bool) error {
	p := New(Options{Interface: iface})
	defer p.Close()
	families := []localnode.Family{localnode.IPv4}
	if ipv6 {
		families = append(families, localnode.IPv6)
	}
	return client.RunBackend(ctx, client.Options{Address: socket, Families: families}, p, time.Second)
}
