//go:build linux

package nftables

import (
	"bytes"
	"context"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/knftables"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// An embedder controls the proxier through the public options: its own
// knftables.Interface (to read the final ruleset back), a hook that says
// when a sync finished, and SyncNow; a sync with nothing to do is a no-op.
func TestOptionsForEmbedders(t *testing.T) {
	tf := families[0]
	ip := tf.ip
	_, ctx := ktesting.NewTestContext(t)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.SyncPeriod.Duration = 30 * time.Second
	cfg.NodePortAddresses = []string{tf.nodeIP + "/32"}
	fake := &countingNFT{Fake: knftables.NewFake(familyOf(tf.family), kubeProxyTable)}
	var mu sync.Mutex
	var results []syncshell.SyncResult
	p, err := NewProxierWithOptions(ctx, cfg, tf.family, nil, testNodeName, net.ParseIP(tf.nodeIP), nil, nil, false,
		WithNFTables(fake), proxieropts.WithConntrack(conntrack.NewFake()), proxieropts.WithServiceHealthServer(healthcheck.NewFakeServiceHealthServer()),
		proxieropts.WithNetworkInterfacer(proxyutiltest.NewFakeNetwork()),
		proxieropts.WithSyncHook(func(r syncshell.SyncResult) { mu.Lock(); results = append(results, r); mu.Unlock() }))
	if err != nil {
		t.Fatal(err)
	}
	svc := st.NewService("ns1", "web", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs, s.Spec.IPFamilies = ip("172.30.0.41"), []string{ip("172.30.0.41")}, []v1.IPFamily{tf.family}
		s.Spec.Ports = []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
	})
	slice := st.NewSlice("ns1", "web", "web-1", st.AddressTypeOf(tf.family), func(es *discovery.EndpointSlice) {
		es.Endpoints = append(es.Endpoints, st.EndpointWith(ip("10.180.0.1"), testNodeName, true, true, false))
		es.Ports = []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP)}
	})
	startProxier(p, []*v1.Service{svc}, []*discovery.EndpointSlice{slice})

	mu.Lock()
	if len(results) != 1 || !results[0].Full || results[0].Err != nil {
		t.Fatalf("after the informers listed, the hook saw %+v; want one successful full sync", results)
	}
	mu.Unlock()
	pkt := packet{src: ip("10.1.2.3"), dst: ip("172.30.0.41"), proto: "tcp", dport: 80}
	if got := newTracer(t, fake.Fake, tf.nodeIP).trace(pkt); len(got.dnat) != 1 {
		t.Fatalf("the embedder's own fake holds no working rules: %v", got)
	}

	runs := fake.runs.Load()
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if fake.runs.Load() != runs {
		t.Fatal("a SyncNow with nothing to do ran a transaction")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(results) != 2 || results[1].Full {
		t.Fatalf("hook saw %+v; want a second, partial sync", results)
	}
}

// WithDryRun prints the transactions and touches no kernel; the dual-stack
// constructor refuses a per-family WithNFTables.
func TestOptionsDryRunAndDualStack(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.NFTables.MasqueradeBit = ptr.To[int32](14)
	var out bytes.Buffer
	p, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, nil, testNodeName, net.ParseIP("10.0.0.1"), nil, nil, false, proxieropts.WithDryRun(&out))
	if err != nil {
		t.Fatal(err)
	}
	startProxier(p, nil, nil)
	if !strings.Contains(out.String(), "add table ip kube-proxy") {
		t.Fatalf("dry run printed no table:\n%s", out.String())
	}
	_, err = NewDualStackProxierWithOptions(context.Background(), cfg, nil, testNodeName, nil, nil, nil, false,
		WithNFTables(knftables.NewFake(knftables.IPv4Family, kubeProxyTable)))
	if err == nil || !strings.Contains(err.Error(), "WithNFTables") {
		t.Fatalf("dual-stack with WithNFTables: err = %v", err)
	}
}
