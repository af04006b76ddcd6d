//go:build linux

package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	configv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/scheme"
	"k8s.io/kube-proxy/pkg/proxy/apis/config/validation"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/nftables"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
)

const nodeName = "node-1"

func main() {
	if err := run(context.Background(), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "embedder:", err)
		os.Exit(1)
	}
}

// run builds the proxier, makes two changes, waits for each to be
// programmed, and prints the final ruleset to out.
func run(ctx context.Context, out io.Writer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	cfg, err := config()
	if err != nil {
		return fmt.Errorf("configuration: %w", err)
	}

	// Every sync reports here; the program waits on it rather than sleeping.
	synced := make(chan syncshell.SyncResult, 16)
	nft := knftables.NewFake(knftables.IPv4Family, "kube-proxy")
	p, err := nftables.NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, nil, nodeName, net.ParseIP("192.0.2.10"), nil, nil, false,
		nftables.WithNFTables(nft),
		proxieropts.WithConntrack(conntrack.NewFake()),
		proxieropts.WithServiceHealthServer(healthcheck.NewFakeServiceHealthServer()),
		proxieropts.WithSyncHook(func(r syncshell.SyncResult) { synced <- r }),
	)
	if err != nil {
		return fmt.Errorf("building the proxier: %w", err)
	}
	// The context-aware loop: it stops when ctx does (SyncLoop never does).
	loopDone := make(chan struct{})
	go func() { defer close(loopDone); p.Run(ctx) }()
	defer func() { cancel(); <-loopDone }()

	// wait returns after the first sync whose result satisfies done: the
	// loop may also run syncs of its own (its first tick, a retry), so a
	// caller waits for the state it wants, not for "a" sync.
	wait := func(what string, done func() bool) error {
		deadline := time.After(10 * time.Second)
		for {
			select {
			case r := <-synced:
				if r.Err != nil {
					return fmt.Errorf("%s: %w", what, r.Err)
				}
				if done() {
					fmt.Fprintf(out, "synced %s (full=%v)\n", what, r.Full)
					return nil
				}
			case <-deadline:
				return fmt.Errorf("%s: not programmed within 10s", what)
			}
		}
	}
	programmed := func(s string) func() bool {
		return func() bool { return strings.Contains(nft.Dump(), s) }
	}

	p.OnServiceAdd(service())
	p.OnEndpointSliceAdd(slice("10.1.0.1"))
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced() // the first sync runs now
	if err := wait("initial state", programmed("10.1.0.1 . 8080")); err != nil {
		return err
	}
	p.OnEndpointSliceUpdate(nil, slice("10.1.0.1", "10.1.0.2"))
	if err := wait("second endpoint", programmed("10.1.0.2 . 8080")); err != nil {
		return err
	}

	_, err = io.WriteString(out, nft.Dump())
	return err
}

// config builds the proxier's configuration as docs/migrating-from-kubernetes.md
// says: the versioned type with what this program sets, kube-proxy's defaults for
// the rest, converted to the internal type and validated. (The internal type's zero
// value is not kube-proxy's defaults.)
func config() (*kubeproxyconfig.KubeProxyConfiguration, error) {
	versioned := &configv1alpha1.KubeProxyConfiguration{
		Mode:              "nftables",
		NodePortAddresses: []string{"primary"},
	}
	// Short, so the example's syncs follow its changes at once (default 1s).
	versioned.NFTables.MinSyncPeriod.Duration = 10 * time.Millisecond
	scheme.Scheme.Default(versioned)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	if err := scheme.Scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	if errs := validation.Validate(cfg); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	return cfg, nil
}

func service() *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			Ports: []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
}

func slice(ips ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, ip := range ips {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{ip},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
		})
	}
	return s
}
