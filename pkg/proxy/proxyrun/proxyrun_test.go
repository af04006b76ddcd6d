package proxyrun

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	fake "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

const node = "node-a"

var v4 = []string{"10.0.0.10"}

func webSlice(eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return st.EndpointSlice("ns", "web", "web-1", "http", 8080, eps...)
}

// attach starts src delivering to p without a runner, so the test decides when to Sync.
func attach(t *testing.T, src *source.Static, p *Proxy) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = src.Run(ctx, p)
	}()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(10 * time.Second)
	for !p.synced() {
		if time.Now().After(deadline) {
			t.Fatal("source never signalled synced")
		}
		time.Sleep(time.Millisecond)
	}
}

func TestSyncOnlyOnNodeLocalChange(t *testing.T) {
	type step struct {
		name string
		do   func(s *source.Static, b *fake.FullState)
		// wantCall says whether the backend must be called; wantEndpoints, when set, is the
		// web service's endpoint list afterwards.
		wantCall      bool
		wantEndpoints []string
	}
	local := func(ip string, m ...func(*discovery.Endpoint)) discovery.Endpoint { return st.Endpoint(ip, node, m...) }
	remote := func(ip string, m ...func(*discovery.Endpoint)) discovery.Endpoint {
		return st.Endpoint(ip, "node-b", m...)
	}
	steps := []step{
		{name: "the first sync delivers the (empty) initial state", do: func(*source.Static, *fake.FullState) {}, wantCall: true},
		{name: "nothing new: no call", do: func(*source.Static, *fake.FullState) {}},
		{
			name: "a service",
			do: func(s *source.Static, _ *fake.FullState) {
				s.SetService(st.Service("ns", "web", v4, st.InternalLocal()))
			},
			wantCall: true,
		},
		{
			name: "a resourceVersion-only update",
			do: func(s *source.Static, _ *fake.FullState) {
				s.SetService(st.Service("ns", "web", v4, st.InternalLocal(), func(x *v1.Service) { x.ResourceVersion = "2" }))
			},
		},
		{
			name: "a label and an annotation",
			do: func(s *source.Static, _ *fake.FullState) {
				s.SetService(st.Service("ns", "web", v4, st.InternalLocal(), func(x *v1.Service) {
					x.Labels = map[string]string{"team": "a"}
					x.Annotations = map[string]string{"note": "x"}
				}))
			},
		},
		{
			name:     "a local endpoint",
			do:       func(s *source.Static, _ *fake.FullState) { s.SetEndpointSlice(webSlice(local("10.1.0.1"))) },
			wantCall: true, wantEndpoints: []string{"10.1.0.1:8080"},
		},
		{
			name: "another node's endpoint under internal Local policy",
			do: func(s *source.Static, _ *fake.FullState) {
				s.SetEndpointSlice(webSlice(local("10.1.0.1"), remote("10.1.0.2")))
			},
			wantEndpoints: []string{"10.1.0.1:8080"},
		},
		{
			name: "a zone change without hints",
			do:   func(s *source.Static, _ *fake.FullState) { s.SetNode(st.Node(node, "z1")) },
		},
		{
			name: "the backend fails: called, and called again on the next sync",
			do: func(s *source.Static, b *fake.FullState) {
				b.SetError(errors.New("boom"))
				s.SetEndpointSlice(webSlice(local("10.1.0.1"), local("10.1.0.3"), remote("10.1.0.2")))
			},
			wantCall: true,
		},
		{
			name:     "retry succeeds",
			do:       func(_ *source.Static, b *fake.FullState) { b.SetError(nil) },
			wantCall: true, wantEndpoints: []string{"10.1.0.1:8080", "10.1.0.3:8080"},
		},
		{
			name:     "policy back to Cluster: remote endpoints now matter",
			do:       func(s *source.Static, _ *fake.FullState) { s.SetService(st.Service("ns", "web", v4)) },
			wantCall: true, wantEndpoints: []string{"10.1.0.1:8080", "10.1.0.2:8080", "10.1.0.3:8080"},
		},
		{
			name:     "service deleted",
			do:       func(s *source.Static, _ *fake.FullState) { s.DeleteService("ns", "web") },
			wantCall: true,
		},
	}

	b := fake.NewFullState()
	p, err := New(b, Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	src := source.NewStatic()
	ctx := context.Background()
	if err := p.Sync(ctx); err != nil || len(b.Attempts()) != 0 {
		t.Fatalf("Sync before the source is synced must not call the backend (err %v)", err)
	}
	attach(t, src, p)
	for _, s := range steps {
		before := len(b.Attempts())
		s.do(src, b)
		err := p.Sync(ctx)
		calls := len(b.Attempts()) - before
		if s.wantCall != (calls > 0) {
			t.Fatalf("%s: %d backend calls, want call=%v", s.name, calls, s.wantCall)
		}
		if (err != nil) != (s.name == "the backend fails: called, and called again on the next sync") {
			t.Fatalf("%s: Sync error %v", s.name, err)
		}
		if s.wantEndpoints != nil {
			st, _ := p.State(localnode.IPv4)
			svc := st.Lookup(localnode.PortName{Namespace: "ns", Name: "web", Port: "http", Protocol: localnode.TCP})
			var got []string
			for _, e := range svc.InternalEndpoints() {
				got = append(got, e.String())
			}
			if diff := cmp.Diff(s.wantEndpoints, got); diff != "" {
				t.Fatalf("%s: endpoints (-want +got):\n%s", s.name, diff)
			}
		}
	}
	stats := p.Stats()
	if stats.Revisions != 6 || stats.Failures != 1 || stats.BackendCalls != 7 {
		t.Errorf("stats = %+v, want 6 revisions, 7 backend calls, 1 failure", stats)
	}
	if _, rev := p.State(localnode.IPv4); rev != 6 {
		t.Errorf("revision = %d, want 6", rev)
	}
}

type healthRecorder struct {
	mu              sync.Mutex
	queued, updated map[v1.IPFamily]int
}

func (h *healthRecorder) QueuedUpdate(f v1.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.queued[f]++
}

func (h *healthRecorder) Updated(f v1.IPFamily) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.updated[f]++
}

func (h *healthRecorder) counts(f v1.IPFamily) (int, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.queued[f], h.updated[f]
}

func TestRunDualStack(t *testing.T) {
	src := source.NewStatic()
	src.SetService(st.Service("ns", "web", []string{"10.0.0.10", "fd00::10"}))
	src.SetEndpointSlice(webSlice(st.Endpoint("10.1.0.1", node)))
	src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-v6", "http", 8080, st.Endpoint("fd00:1::1", node)))
	b := fake.NewFullState()
	health := &healthRecorder{queued: map[v1.IPFamily]int{}, updated: map[v1.IPFamily]int{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, src, b, Options{
			NodeName: node, Families: []localnode.Family{localnode.IPv4, localnode.IPv6},
			MinSyncInterval: 10 * time.Millisecond, Health: health,
		})
	}()
	wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
	defer wcancel()
	hasEndpoint := func(f localnode.Family, ep string) func([]*localnode.State) bool {
		return func([]*localnode.State) bool {
			s := b.Last(f)
			if s == nil || len(s.Services) != 1 || len(s.Services[0].Endpoints) != 1 {
				return false
			}
			return s.Services[0].Endpoints[0].String() == ep
		}
	}
	if !b.Wait(wctx, hasEndpoint(localnode.IPv4, "10.1.0.1:8080")) || !b.Wait(wctx, hasEndpoint(localnode.IPv6, "[fd00:1::1]:8080")) {
		t.Fatalf("initial states not synced: %+v", b.Synced())
	}
	if s := b.Last(localnode.IPv6); s.Services[0].ClusterIP != netip.MustParseAddr("fd00::10") {
		t.Errorf("IPv6 state has cluster IP %v", s.Services[0].ClusterIP)
	}

	// A change to one family reaches the backend as that family's State only.
	n := len(b.Synced())
	src.SetEndpointSlice(webSlice(st.Endpoint("10.1.0.2", node)))
	if !b.Wait(wctx, hasEndpoint(localnode.IPv4, "10.1.0.2:8080")) {
		t.Fatal("IPv4 change not synced")
	}
	for _, s := range b.Synced()[n:] {
		if s.Family != localnode.IPv4 {
			t.Errorf("unchanged family %s synced again", s.Family)
		}
	}
	for _, f := range []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol} {
		q, u := health.counts(f)
		if q == 0 || u == 0 {
			t.Errorf("%s: health saw %d queued and %d updated, want both > 0", f, q, u)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// TestRunIncremental runs an Incremental backend through the Differ.
func TestRunIncremental(t *testing.T) {
	src := source.NewStatic()
	src.SetService(st.Service("ns", "web", v4))
	src.SetEndpointSlice(webSlice(st.Endpoint("10.1.0.1", "node-b")))
	inc := &fake.Incremental{}
	p, err := New(backend.NewDiffer(inc), Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	attach(t, src, p)
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := []string{"set-svc IPv4 ns/web:http/TCP", "set-ep IPv4 ns/web:http/TCP 10.1.0.1:8080", "sync"}
	if diff := cmp.Diff(want, inc.Take()); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
	src.SetEndpointSlice(webSlice(st.Endpoint("10.1.0.2", "node-b")))
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = []string{"set-ep IPv4 ns/web:http/TCP 10.1.0.2:8080", "del-ep IPv4 ns/web:http/TCP 10.1.0.1:8080", "sync"}
	if diff := cmp.Diff(want, inc.Take()); diff != "" {
		t.Fatalf("calls (-want +got):\n%s", diff)
	}
}

type failingSource struct{}

func (failingSource) Run(context.Context, source.Handler) error { return errors.New("cannot connect") }

func TestRunErrorsAndOptions(t *testing.T) {
	if err := Run(context.Background(), failingSource{}, fake.NewFullState(), Options{}); err == nil {
		t.Error("a source that cannot start must fail Run")
	}
	bad := map[string]Options{
		"max below min":  {MinSyncInterval: time.Minute, MaxSyncInterval: time.Second},
		"negative min":   {MinSyncInterval: -1},
		"unknown family": {Families: []localnode.Family{"IPv5"}},
		"family twice":   {Families: []localnode.Family{localnode.IPv4, localnode.IPv4}},
	}
	for name, o := range bad {
		if _, err := New(fake.NewFullState(), o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := New(nil, Options{}); err == nil {
		t.Error("nil backend accepted")
	}
}

// TestTopologyChangeAloneRecomputes moves the node to another zone with no other change:
// the State must follow the zone hints even though no Service or slice changed.
func TestTopologyChangeAloneRecomputes(t *testing.T) {
	src := source.NewStatic()
	src.SetNode(st.Node(node, "z1"))
	src.SetService(st.Service("ns", "web", v4))
	src.SetEndpointSlice(webSlice(st.Endpoint("10.1.0.1", node, st.Zone("z1", true)), st.Endpoint("10.1.0.2", "node-b", st.Zone("z2", true))))
	b := fake.NewFullState()
	p, err := New(b, Options{NodeName: node})
	if err != nil {
		t.Fatal(err)
	}
	attach(t, src, p)
	endpoints := func() []string {
		s, _ := p.State(localnode.IPv4)
		var out []string
		for _, e := range s.Services[0].InternalEndpoints() {
			out = append(out, e.String())
		}
		return out
	}
	for _, step := range []struct {
		zone string
		want []string
	}{{"z1", []string{"10.1.0.1:8080"}}, {"z2", []string{"10.1.0.2:8080"}}, {"z3", []string{"10.1.0.1:8080", "10.1.0.2:8080"}}} {
		src.SetNode(st.Node(node, step.zone))
		if err := p.Sync(context.Background()); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(step.want, endpoints()); diff != "" {
			t.Errorf("zone %s: endpoints (-want +got):\n%s", step.zone, diff)
		}
	}
	if err := p.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := len(b.Attempts()); got != 3 {
		t.Errorf("%d backend calls, want 3 (one per zone, none for the idle sync)", got)
	}
}
