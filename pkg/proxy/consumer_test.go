package proxy_test

import (
	"context"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/runner"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// miniProxy is a third-party service proxy built the way Calico's eBPF
// proxy is: it implements the config handlers itself (not Provider), feeds
// the change trackers, syncs from a BoundedFrequencyRunner, and reports to
// both health servers. If an API it relies on changes, this stops compiling.
type miniProxy struct {
	sct *proxy.ServiceChangeTracker
	ect *proxy.EndpointsChangeTracker

	mu     sync.Mutex
	svcMap proxy.ServicePortMap
	epMap  proxy.EndpointsMap
	// local is LocalReadyEndpoints at the last sync.
	local map[types.NamespacedName]int

	runner    *runner.BoundedFrequencyRunner
	health    *healthcheck.ProxyHealthServer
	svcHealth healthcheck.ServiceHealthServer
	synced    chan struct{}
}

// alwaysHealthy stands in for the proxy health server, as Calico's does.
type alwaysHealthy struct{}

func (alwaysHealthy) Health() healthcheck.ProxyHealth { return healthcheck.ProxyHealth{Healthy: true} }

func newMiniProxy(nodeName string, nodeManager *proxy.NodeManager) *miniProxy {
	p := &miniProxy{
		sct:    proxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil),
		ect:    proxy.NewEndpointsChangeTracker(v1.IPv4Protocol, nodeName, nil, nil),
		svcMap: proxy.ServicePortMap{},
		epMap:  proxy.EndpointsMap{},
		synced: make(chan struct{}, 1),
	}
	npa := proxyutil.NewNodePortAddresses(v1.IPv4Protocol, []string{"127.0.0.0/8"})
	_ = npa.String()
	p.health = healthcheck.NewProxyHealthServer("127.0.0.1:0", time.Minute, nodeManager)
	p.svcHealth = healthcheck.NewServiceHealthServer(nodeName, nil, npa, alwaysHealthy{}, v1.IPv4Protocol)
	p.runner = runner.NewBoundedFrequencyRunner("mini-proxy", p.sync, 10*time.Millisecond, time.Second, time.Hour)
	return p
}

func (p *miniProxy) sync() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.svcMap.Update(p.sct)
	res := p.epMap.Update(p.ect)
	_ = res.ConntrackCleanupRequired
	_ = res.LastChangeTriggerTimes
	if err := p.svcHealth.SyncServices(p.svcMap.HealthCheckNodePorts()); err != nil {
		return err
	}
	p.local = p.epMap.LocalReadyEndpoints()
	if err := p.svcHealth.SyncEndpoints(p.local); err != nil {
		return err
	}
	p.health.Updated(v1.IPv4Protocol)
	select {
	case p.synced <- struct{}{}:
	default:
	}
	return nil
}

func (p *miniProxy) changed(pending bool) {
	if pending {
		p.health.QueuedUpdate(v1.IPv4Protocol)
		p.runner.Run()
	}
}

func (p *miniProxy) OnServiceAdd(s *v1.Service)         { p.changed(p.sct.Update(nil, s)) }
func (p *miniProxy) OnServiceUpdate(old, s *v1.Service) { p.changed(p.sct.Update(old, s)) }
func (p *miniProxy) OnServiceDelete(s *v1.Service)      { p.changed(p.sct.Update(s, nil)) }
func (p *miniProxy) OnServiceSynced()                   { p.runner.Run() }
func (p *miniProxy) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	p.changed(p.ect.EndpointSliceUpdate(s, false))
}
func (p *miniProxy) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) {
	p.changed(p.ect.EndpointSliceUpdate(s, false))
}
func (p *miniProxy) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	p.changed(p.ect.EndpointSliceUpdate(s, true))
}
func (p *miniProxy) OnEndpointSlicesSynced() { p.runner.Run() }

func (p *miniProxy) localReady(nn types.NamespacedName) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.local[nn]
}

// TestConsumerEndToEnd runs miniProxy against informers over a fake
// clientset and waits until objects created through the API reach its
// maps and health reporting.
func TestConsumerEndToEnd(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())

	const nodeName = "node-a"
	nodeManager := new(proxy.NodeManager)
	nodeManager.OnNodeChange(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	p := newMiniProxy(nodeName, nodeManager)

	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	svcConfig := config.NewServiceConfig(ctx, factory.Core().V1().Services(), 0)
	svcConfig.RegisterEventHandler(p)
	sliceConfig := config.NewEndpointSliceConfig(ctx, factory.Discovery().V1().EndpointSlices(), 0)
	sliceConfig.RegisterEventHandler(p)
	factory.Start(ctx.Done())
	// Shutdown waits for the informers, which stop when ctx is cancelled.
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	go svcConfig.Run(ctx.Done())
	go sliceConfig.Run(ctx.Done())
	go p.runner.Loop(ctx.Done())

	svc := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports:      []v1.ServicePort{{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-1",
			Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Endpoints: []discovery.Endpoint{
			{Addresses: []string{"10.1.0.1"}, NodeName: ptr.To(nodeName)},
			{Addresses: []string{"10.1.0.2"}, NodeName: ptr.To("node-b")},
		},
		Ports: []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	if _, err := client.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.DiscoveryV1().EndpointSlices("ns").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	web := types.NamespacedName{Namespace: "ns", Name: "web"}
	// Generous: the machine running the tests may be heavily loaded; the
	// loop ends as soon as the state arrives.
	deadline := time.After(30 * time.Second)
	for p.localReady(web) != 1 {
		select {
		case <-p.synced:
		case <-deadline:
			t.Fatalf("local ready endpoints of %s never reached 1 (got %d)", web, p.localReady(web))
		}
	}
	if h := p.health.Health(); !h.Healthy {
		t.Errorf("proxy health after a completed sync = %+v, want healthy", h)
	}
	if !p.health.NodeEligible() {
		t.Error("node from a zero-value NodeManager should be eligible")
	}

	// Deleting the slice must take the local endpoint count back to zero.
	if err := client.DiscoveryV1().EndpointSlices("ns").Delete(ctx, "web-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for p.localReady(web) != 0 {
		select {
		case <-p.synced:
		case <-deadline:
			t.Fatalf("local ready endpoints of %s never returned to 0", web)
		}
	}
}
