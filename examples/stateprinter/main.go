package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	"k8s.io/kube-proxy/pkg/proxy/source/manifests"
)

type config struct {
	kubeconfig, manifests, node string
	ipv6                        bool
	minSync                     time.Duration
}

func main() {
	klog.InitFlags(nil)
	var c config
	flag.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster to watch (in-cluster config when empty and --manifests is not set)")
	flag.StringVar(&c.manifests, "manifests", "", "read Services, EndpointSlices and Nodes from this file or directory instead of a cluster")
	flag.StringVar(&c.node, "node", "", "the node whose view to print (defaults to the hostname)")
	flag.BoolVar(&c.ipv6, "ipv6", false, "print the IPv6 state as well")
	flag.DurationVar(&c.minSync, "min-sync-period", time.Second, "shortest time between revisions")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "stateprinter:", err)
		os.Exit(1)
	}
}

// run prints revisions to out until ctx is done.
func run(ctx context.Context, c config, out io.Writer) error {
	if c.node == "" {
		h, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("no --node and no hostname: %w", err)
		}
		c.node = h
	}
	var src source.Source
	if c.manifests != "" {
		src = manifests.New(c.manifests, c.node, 0)
	} else {
		cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
		if err != nil {
			return fmt.Errorf("loading kubeconfig %q: %w", c.kubeconfig, err)
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return fmt.Errorf("creating client: %w", err)
		}
		src = source.NewKubernetes(client, c.node, 15*time.Minute)
	}
	families := []localnode.Family{localnode.IPv4}
	if c.ipv6 {
		families = append(families, localnode.IPv6)
	}
	return proxyrun.Run(ctx, src, NewPrinter(out), proxyrun.Options{NodeName: c.node, Families: families, MinSyncInterval: c.minSync})
}
