package proxyrun

import (
	"context"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	fake "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

type serviceHealth struct {
	mu        sync.Mutex
	services  map[types.NamespacedName]uint16
	endpoints map[types.NamespacedName]int
}

func (s *serviceHealth) SyncServices(m map[types.NamespacedName]uint16) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.services = m
	return nil
}

func (s *serviceHealth) SyncEndpoints(m map[types.NamespacedName]int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = m
	return nil
}

// TestHealthAndMetrics checks what a sync reports besides the backend call: health-check
// node ports with local endpoint counts, the sync metrics and the no-local-endpoints
// gauges.
func TestHealthAndMetrics(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeNFTables)
	sh := &serviceHealth{}
	p, err := New(fake.NewFullState(), Options{NodeName: node,
		ServiceHealth: map[localnode.Family]healthcheck.ServiceHealthServer{localnode.IPv4: sh}})
	if err != nil {
		t.Fatal(err)
	}
	src := source.NewStatic()
	// lb: eTP Local with a local endpoint; remote: eTP Local with none on this node;
	// internal: iTP Local with none on this node.
	src.SetService(st.Service("ns", "lb", []string{"10.0.0.1"}, st.LoadBalancer(30001, "192.0.2.1"), st.ExternalLocal(32001)))
	src.SetEndpointSlice(st.EndpointSlice("ns", "lb", "lb-1", "http", 8080, st.Endpoint("10.1.0.1", node), st.Endpoint("10.1.0.2", "node-b")))
	src.SetService(st.Service("ns", "remote", []string{"10.0.0.2"}, st.LoadBalancer(30002, "192.0.2.2"), st.ExternalLocal(32002)))
	src.SetEndpointSlice(st.EndpointSlice("ns", "remote", "remote-1", "http", 8080, st.Endpoint("10.1.0.3", "node-b")))
	src.SetService(st.Service("ns", "internal", []string{"10.0.0.3"}, st.InternalLocal()))
	src.SetEndpointSlice(st.EndpointSlice("ns", "internal", "internal-1", "http", 8080, st.Endpoint("10.1.0.4", "node-b")))
	attach(t, src, p)

	latency := metrics.SyncProxyRulesLatency.WithLabelValues(string(v1.IPv4Protocol))
	before, err := testutil.GetHistogramMetricCount(latency)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	after, err := testutil.GetHistogramMetricCount(latency)
	if err != nil {
		t.Fatal(err)
	}
	if after != before+1 {
		t.Errorf("sync latency observed %d times, want 1", after-before)
	}
	for _, tc := range []struct {
		traffic string
		want    float64
	}{{"internal", 1}, {"external", 1}} {
		got, err := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues(tc.traffic, string(v1.IPv4Protocol)))
		if err != nil || got != tc.want {
			t.Errorf("no-local-endpoints %s = %v (%v), want %v", tc.traffic, got, err, tc.want)
		}
	}

	sh.mu.Lock()
	defer sh.mu.Unlock()
	wantPorts := map[types.NamespacedName]uint16{{Namespace: "ns", Name: "lb"}: 32001, {Namespace: "ns", Name: "remote"}: 32002}
	if diff := cmp.Diff(wantPorts, sh.services); diff != "" {
		t.Errorf("health-check node ports (-want +got):\n%s", diff)
	}
	if got := sh.endpoints[types.NamespacedName{Namespace: "ns", Name: "lb"}]; got != 1 {
		t.Errorf("lb has %d local endpoints reported, want 1", got)
	}
	if got := sh.endpoints[types.NamespacedName{Namespace: "ns", Name: "remote"}]; got != 0 {
		t.Errorf("remote has %d local endpoints reported, want 0", got)
	}
}
