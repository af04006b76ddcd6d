//go:build linux

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	"k8s.io/kube-proxy/test/kubeapiserver"
)

// tableBackend is an example backend: it renders each State into the lines a simple
// proxy would program, one per destination ("what -> where"), and keeps the last table.
type tableBackend struct {
	mu      sync.Mutex
	table   []string
	syncs   int
	changed chan struct{}
}

func newTableBackend() *tableBackend { return &tableBackend{changed: make(chan struct{}, 1)} }

func (b *tableBackend) Sync(_ context.Context, st *localnode.State) error {
	var lines []string
	for i := range st.Services {
		svc := &st.Services[i]
		name := svc.Name.Namespace + "/" + svc.Name.Name + ":" + svc.Name.Port
		lines = append(lines, fmt.Sprintf("%s cluster %s:%d -> %s", name, svc.ClusterIP, svc.Port, render(svc.InternalEndpoints(), svc.HasAnyEndpoints)))
		external := render(svc.ExternalEndpoints(), svc.HasAnyEndpoints)
		if svc.NodePort != 0 {
			lines = append(lines, fmt.Sprintf("%s nodeport %d -> %s", name, svc.NodePort, external))
		}
		for _, vip := range svc.LoadBalancerVIPs {
			lines = append(lines, fmt.Sprintf("%s lb %s:%d (%s, healthcheck %d) -> %s", name, vip, svc.Port, svc.ExternalPolicy, svc.HealthCheckNodePort, external))
		}
	}
	b.mu.Lock()
	b.table = lines
	b.syncs++
	b.mu.Unlock()
	select {
	case b.changed <- struct{}{}:
	default:
	}
	return nil
}

// render lists endpoints, or says what the proxy does without any.
func render(eps []localnode.Endpoint, hasAny bool) string {
	if len(eps) == 0 {
		if hasAny {
			return "drop"
		}
		return "reject"
	}
	var s []string
	for _, e := range eps {
		s = append(s, e.String())
	}
	return strings.Join(s, ",")
}

func (b *tableBackend) get() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.table)
}

// waitTable waits until the lines of the backend's table about namespace ns and
// default/kubernetes are exactly want (in any order); other tests sharing the server
// may have Services of their own.
func (b *tableBackend) waitTable(t *testing.T, ns, what string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	deadline := time.After(30 * time.Second)
	for {
		got := slices.DeleteFunc(b.get(), func(line string) bool {
			return !strings.HasPrefix(line, ns+"/") && !strings.HasPrefix(line, "default/kubernetes:")
		})
		slices.Sort(got)
		if slices.Equal(got, want) {
			return
		}
		select {
		case <-b.changed:
		case <-time.After(time.Second):
		case <-deadline:
			t.Fatalf("%s: backend table (-want +got):\n%s", what, cmp.Diff(want, got))
		}
	}
}

// The library's Kubernetes source and proxyrun drive an example backend from a real API
// server, with kube-proxy's own identity: what the backend is handed follows Services,
// EndpointSlices, load-balancer status and the Node's zone label, and leaves out what
// kube-proxy leaves out. Needs no root: nothing is programmed in the kernel.
func TestLibraryKubernetesSource(t *testing.T) {
	srv := shared(t)
	c := newCluster(t, srv, "lib", "node-lib")
	c.createNode(nodeIP)
	node, err := c.admin.CoreV1().Nodes().Get(c.ctx, c.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[v1.LabelTopologyZone] = "zone-a"
	if _, err := c.admin.CoreV1().Nodes().Update(c.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	web := c.createService("web", 80, nil)
	c.setEndpoints("web", podA)
	lb := c.createService("lb", 82, func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
	})
	c.setEndpoints("lb", podA)
	c.setLoadBalancerIP("lb", "198.18.200.1")
	// What kube-proxy ignores: a headless Service and one claimed by another proxy.
	c.createService("headless", 86, func(s *v1.Service) { s.Spec.ClusterIP = v1.ClusterIPNone })
	c.setEndpoints("headless", podB)
	c.createService("claimed", 87, func(s *v1.Service) {
		s.Labels = map[string]string{apis.LabelServiceProxyName: "someone-else"}
	})
	c.setEndpoints("claimed", podB)

	kpClient, err := srv.Client(kubeapiserver.KubeProxy)
	if err != nil {
		t.Fatal(err)
	}
	backend := newTableBackend()
	p, err := proxyrun.New(backend, proxyrun.Options{NodeName: c.node, MinSyncInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	_, logCtx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(logCtx)
	runErr := make(chan error, 1)
	go func() { runErr <- p.Run(ctx, source.NewKubernetes(kpClient, c.node, 0)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-runErr; err != nil {
			t.Errorf("proxyrun.Run: %v", err)
		}
	})

	lbNodePort, hc := lb.Spec.Ports[0].NodePort, lb.Spec.HealthCheckNodePort
	lbLines := func(eps string) []string {
		return []string{
			fmt.Sprintf("lib/lb:http cluster %s:82 -> %s", lb.Spec.ClusterIP, eps),
			fmt.Sprintf("lib/lb:http nodeport %d -> %s", lbNodePort, eps),
			fmt.Sprintf("lib/lb:http lb 198.18.200.1:82 (Local, healthcheck %d) -> %s", hc, eps),
		}
	}
	// default/kubernetes has no endpoints: the API server runs without an endpoint
	// reconciler.
	kubernetesLine := fmt.Sprintf("default/kubernetes:https cluster %s:443 -> reject", firstIP(t, kubeapiserver.DefaultServiceClusterIPRange))
	webLine := func(eps string) string {
		return fmt.Sprintf("lib/web:http cluster %s:80 -> %s", web.Spec.ClusterIP, eps)
	}
	backend.waitTable(t, c.ns, "initial state", append(lbLines(podA+":8080"), kubernetesLine, webLine(podA+":8080")))

	// Endpoints move; the load balancer's only endpoint goes to another node, so its
	// external traffic (policy Local) is dropped while cluster traffic still reaches it.
	c.setEndpoints("web", podA, podB)
	setRemoteEndpoints(t, c, "lb", podB, "node-elsewhere")
	backend.waitTable(t, c.ns, "after endpoint changes", []string{
		kubernetesLine, webLine(podA + ":8080," + podB + ":8080"),
		fmt.Sprintf("lib/lb:http cluster %s:82 -> %s:8080", lb.Spec.ClusterIP, podB),
		fmt.Sprintf("lib/lb:http nodeport %d -> drop", lbNodePort),
		fmt.Sprintf("lib/lb:http lb 198.18.200.1:82 (Local, healthcheck %d) -> drop", hc),
	})

	// Topology: zone hints narrow web to this node's zone, and follow the Node's label.
	setZoneHints(t, c, "web", map[string]string{podA: "zone-a", podB: "zone-b"})
	c.deleteService("lb")
	backend.waitTable(t, c.ns, "zone hints for zone-a", []string{kubernetesLine, webLine(podA + ":8080")})
	node, err = c.admin.CoreV1().Nodes().Get(c.ctx, c.node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels[v1.LabelTopologyZone] = "zone-b"
	if _, err := c.admin.CoreV1().Nodes().Update(c.ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	backend.waitTable(t, c.ns, "the node moved to zone-b", []string{kubernetesLine, webLine(podB + ":8080")})

	// The backend has the last table before proxyrun counts its revision: poll.
	eventually(t, "proxyrun to count 4 revisions", 10*time.Second, func() bool {
		return p.Stats().Revisions >= 4
	}, func() string { return fmt.Sprintf("%+v", p.Stats()) })
	if st := p.Stats(); st.Failures != 0 {
		t.Errorf("stats %+v: want no failures", st)
	}
}

func firstIP(t *testing.T, cidr string) string {
	t.Helper()
	// The API server gives default/kubernetes the first address of the range.
	base, _, ok := strings.Cut(cidr, "/")
	if !ok || !strings.HasSuffix(base, ".0") {
		t.Fatalf("unexpected service range %q", cidr)
	}
	return strings.TrimSuffix(base, ".0") + ".1"
}

// setRemoteEndpoints replaces the Service's slice with one ready endpoint on another node.
func setRemoteEndpoints(t *testing.T, c *cluster, svcName, ip, nodeName string) {
	t.Helper()
	slices := c.admin.DiscoveryV1().EndpointSlices(c.ns)
	slice, err := slices.Get(c.ctx, svcName+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice.Endpoints = []discoveryv1.Endpoint{{
		Addresses:  []string{ip},
		Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)},
		NodeName:   ptr.To(nodeName),
	}}
	if _, err := slices.Update(c.ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("endpoint slice %s/%s: %v", c.ns, slice.Name, err)
	}
}

// setZoneHints gives every endpoint of the Service's slice a zone hint.
func setZoneHints(t *testing.T, c *cluster, svcName string, zones map[string]string) {
	t.Helper()
	slices := c.admin.DiscoveryV1().EndpointSlices(c.ns)
	slice, err := slices.Get(c.ctx, svcName+"-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range slice.Endpoints {
		ep := &slice.Endpoints[i]
		ep.Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: zones[ep.Addresses[0]]}}}
	}
	if _, err := slices.Update(c.ctx, slice, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("endpoint slice %s/%s: %v", c.ns, slice.Name, err)
	}
}
