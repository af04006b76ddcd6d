package config

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// recorder implements every handler interface and records calls as strings.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) add(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf(format, args...))
}

func (r *recorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) OnServiceAdd(s *v1.Service) { r.add("add %s", s.Name) }
func (r *recorder) OnServiceUpdate(o, s *v1.Service) {
	r.add("update %s %s->%s", s.Name, o.Spec.ClusterIP, s.Spec.ClusterIP)
}
func (r *recorder) OnServiceDelete(s *v1.Service)                   { r.add("delete %s", s.Name) }
func (r *recorder) OnServiceSynced()                                { r.add("synced") }
func (r *recorder) OnEndpointSliceAdd(s *discoveryv1.EndpointSlice) { r.add("add %s", s.Name) }
func (r *recorder) OnEndpointSliceUpdate(o, s *discoveryv1.EndpointSlice) {
	r.add("update %s %d->%d", s.Name, len(o.Endpoints), len(s.Endpoints))
}
func (r *recorder) OnEndpointSliceDelete(s *discoveryv1.EndpointSlice) { r.add("delete %s", s.Name) }
func (r *recorder) OnEndpointSlicesSynced()                            { r.add("synced") }
func (r *recorder) OnNodeChange(n *v1.Node)                            { r.add("change %s %s", n.Name, n.Labels["k"]) }
func (r *recorder) OnNodeDelete(n *v1.Node)                            { r.add("delete %s", n.Name) }
func (r *recorder) OnNodeSynced()                                      { r.add("synced") }
func (r *recorder) OnTopologyChange(l map[string]string)               { r.add("topology %v", l) }
func (r *recorder) OnServiceCIDRsChanged(c []string) {
	c = slices.Clone(c)
	slices.Sort(c)
	r.add("cidrs %v", c)
}

func waitFor(t *testing.T, r *recorder, want []string) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return slices.Equal(r.get(), want), nil
	})
	if err != nil {
		t.Fatalf("events = %q, want %q", r.get(), want)
	}
}

func start(t *testing.T, f informers.SharedInformerFactory) chan struct{} {
	t.Helper()
	stop := make(chan struct{})
	t.Cleanup(func() {
		close(stop)
		f.Shutdown()
	})
	f.Start(stop)
	return stop
}

func TestServiceConfig(t *testing.T) {
	ctx := context.Background()
	existing := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "pre"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.1"}}
	client := fake.NewClientset(existing)
	f := informers.NewSharedInformerFactory(client, 0)
	cfg := NewServiceConfig(ctx, f.Core().V1().Services(), 0)
	r1, r2 := &recorder{}, &recorder{}
	cfg.RegisterEventHandler(r1)
	cfg.RegisterEventHandler(r2)
	stop := start(t, f)
	go cfg.Run(stop)
	waitFor(t, r1, []string{"add pre", "synced"})

	svcs := client.CoreV1().Services("ns")
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s"}, Spec: v1.ServiceSpec{ClusterIP: "10.0.0.2"}}
	if _, err := svcs.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := s.DeepCopy()
	s2.Spec.ClusterIP = "10.0.0.3"
	if _, err := svcs.Update(ctx, s2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := svcs.Delete(ctx, "s", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	want := []string{"add pre", "synced", "add s", "update s 10.0.0.2->10.0.0.3", "delete s"}
	waitFor(t, r1, want)
	waitFor(t, r2, want)
}

func TestEndpointSliceConfig(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	cfg := NewEndpointSliceConfig(ctx, f.Discovery().V1().EndpointSlices(), 0)
	r := &recorder{}
	cfg.RegisterEventHandler(r)
	stop := start(t, f)
	go cfg.Run(stop)
	waitFor(t, r, []string{"synced"})

	es := client.DiscoveryV1().EndpointSlices("ns")
	s := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "e"}, AddressType: discoveryv1.AddressTypeIPv4}
	if _, err := es.Create(ctx, s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s2 := s.DeepCopy()
	s2.Endpoints = []discoveryv1.Endpoint{{Addresses: []string{"10.1.1.1"}}}
	if _, err := es.Update(ctx, s2, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := es.Delete(ctx, "e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"synced", "add e", "update e 0->1", "delete e"})
}

func TestNodeConfig(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"k": "1"}}})
	f := informers.NewSharedInformerFactory(client, 0)
	cfg := NewNodeConfig(ctx, f.Core().V1().Nodes(), 0)
	r := &recorder{}
	cfg.RegisterEventHandler(r)
	stop := start(t, f)
	go cfg.Run(stop)
	waitFor(t, r, []string{"change n 1", "synced"})
	if _, err := client.CoreV1().Nodes().Update(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"k": "2"}}}, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "n", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"change n 1", "synced", "change n 2", "delete n"})
}

func TestServiceCIDRConfig(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	cfg := NewServiceCIDRConfig(ctx, f.Networking().V1().ServiceCIDRs(), 0)
	r := &recorder{}
	cfg.RegisterEventHandler(r)
	stop := start(t, f)
	go cfg.Run(stop)
	// Run reports the (empty) set once synced, so proxiers learn "none".
	waitFor(t, r, []string{"cidrs []"})

	api := client.NetworkingV1().ServiceCIDRs()
	mk := func(name string, cidrs ...string) *networkingv1.ServiceCIDR {
		return &networkingv1.ServiceCIDR{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: cidrs}}
	}
	if _, err := api.Create(ctx, mk("a", "10.0.0.0/16", "fd00::/108"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"cidrs []", "cidrs [10.0.0.0/16 fd00::/108]"})
	if _, err := api.Create(ctx, mk("b", "10.0.0.0/16", "10.1.0.0/16"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"cidrs []", "cidrs [10.0.0.0/16 fd00::/108]", "cidrs [10.0.0.0/16 10.1.0.0/16 fd00::/108]"})
	// Deleting "a" must keep 10.0.0.0/16, which "b" still lists.
	if err := api.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"cidrs []", "cidrs [10.0.0.0/16 fd00::/108]", "cidrs [10.0.0.0/16 10.1.0.0/16 fd00::/108]", "cidrs [10.0.0.0/16 10.1.0.0/16]"})
	if _, err := api.Update(ctx, mk("b", "10.2.0.0/16"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, r, []string{"cidrs []", "cidrs [10.0.0.0/16 fd00::/108]", "cidrs [10.0.0.0/16 10.1.0.0/16 fd00::/108]", "cidrs [10.0.0.0/16 10.1.0.0/16]", "cidrs [10.2.0.0/16]"})
}

func TestNodeTopologyConfig(t *testing.T) {
	ctx := context.Background()
	node := func(labels map[string]string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: labels}}
	}
	client := fake.NewClientset(node(map[string]string{"other": "x"}))
	f := informers.NewSharedInformerFactory(client, 0)
	cfg := NewNodeTopologyConfig(ctx, f.Core().V1().Nodes(), 0)
	r := &recorder{}
	cfg.RegisterEventHandler(r)
	start(t, f)
	f.WaitForCacheSync(ctx.Done())

	steps := []struct {
		labels map[string]string
		want   []string
	}{
		// The initial node had no zone: nothing to report (empty == empty).
		{map[string]string{"other": "y"}, []string(nil)},
		{map[string]string{v1.LabelTopologyZone: "zone-a"}, []string{"topology map[topology.kubernetes.io/zone:zone-a]"}},
		{map[string]string{v1.LabelTopologyZone: "zone-a", "other": "z"}, nil},
		{map[string]string{v1.LabelTopologyZone: "zone-b"}, []string{"topology map[topology.kubernetes.io/zone:zone-b]"}},
		{map[string]string{v1.LabelTopologyRegion: "r"}, []string{"topology map[]"}},
	}
	var want []string
	for _, st := range steps {
		if _, err := client.CoreV1().Nodes().Update(ctx, node(st.labels), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		want = append(want, st.want...)
		if st.want == nil {
			// Give the informer time to (wrongly) report something.
			time.Sleep(200 * time.Millisecond)
		}
		waitFor(t, r, want)
	}
}
func TestRunStopsWithoutSync(t *testing.T) {
	client := fake.NewClientset()
	f := informers.NewSharedInformerFactory(client, 0)
	ctx := context.Background()
	svc := NewServiceConfig(ctx, f.Core().V1().Services(), 0)
	eps := NewEndpointSliceConfig(ctx, f.Discovery().V1().EndpointSlices(), 0)
	nodes := NewNodeConfig(ctx, f.Core().V1().Nodes(), 0)
	cidrs := NewServiceCIDRConfig(ctx, f.Networking().V1().ServiceCIDRs(), 0)
	r := &recorder{}
	svc.RegisterEventHandler(r)
	eps.RegisterEventHandler(r)
	nodes.RegisterEventHandler(r)
	cidrs.RegisterEventHandler(r)
	// The factory is never started, so nothing can sync.
	stop := make(chan struct{})
	close(stop)
	svc.Run(stop)
	eps.Run(stop)
	nodes.Run(stop)
	cidrs.Run(stop)
	if got := r.get(); len(got) != 0 {
		t.Errorf("handlers called although nothing synced: %q", got)
	}
}

func TestObjectFrom(t *testing.T) {
	s := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "s"}}
	tests := []struct {
		name string
		in   interface{}
		ok   bool
	}{
		{"object", s, true},
		{"tombstone", cache.DeletedFinalStateUnknown{Key: "ns/s", Obj: s}, true},
		{"wrong type", &v1.Node{}, false},
		{"tombstone of wrong type", cache.DeletedFinalStateUnknown{Key: "n", Obj: &v1.Node{}}, false},
		{"nil", nil, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := objectFrom[*v1.Service](tc.in)
			if ok != tc.ok || (ok && got != s) {
				t.Errorf("objectFrom = %v, %v; want ok=%v", got, ok, tc.ok)
			}
		})
	}
}

func TestNodeTopologyLabels(t *testing.T) {
	for _, tc := range []struct {
		name string
		node *v1.Node
		want map[string]string
	}{
		{name: "nil node", node: nil, want: map[string]string{}},
		{name: "no labels", node: &v1.Node{}, want: map[string]string{}},
		{name: "zone", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelTopologyZone: "zone-a"}}},
			want: map[string]string{v1.LabelTopologyZone: "zone-a"}},
		{name: "empty zone is still a zone", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{v1.LabelTopologyZone: ""}}},
			want: map[string]string{v1.LabelTopologyZone: ""}},
		{name: "other labels dropped", node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
			v1.LabelTopologyZone: "zone-a", v1.LabelTopologyRegion: "r", v1.LabelHostname: "n"}}},
			want: map[string]string{v1.LabelTopologyZone: "zone-a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := NodeTopologyLabels(tc.node)
			// Handlers compare with maps.Equal and store the map: never nil.
			if got == nil || !maps.Equal(got, tc.want) {
				t.Errorf("NodeTopologyLabels() = %#v, want %#v", got, tc.want)
			}
		})
	}
}
