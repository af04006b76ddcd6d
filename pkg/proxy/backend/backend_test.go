package backend_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	fake "k8s.io/kube-proxy/pkg/proxy/backend/testing"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

func name(n string) localnode.PortName {
	return localnode.PortName{Namespace: "ns", Name: n, Port: "p", Protocol: localnode.TCP}
}

func ep(ip string, forLocal bool) localnode.Endpoint {
	return localnode.Endpoint{IP: netip.MustParseAddr(ip), Port: 8080, Ready: true, Serving: true, ForCluster: true, ForLocal: forLocal}
}

// state builds a normalized IPv4 State from "name=clusterIP" services with endpoints.
func state(svcs ...localnode.Service) *localnode.State {
	s := &localnode.State{Family: localnode.IPv4, Services: svcs}
	s.Normalize()
	return s
}

func svc(n, ip string, eps ...localnode.Endpoint) localnode.Service {
	s := localnode.Service{
		ServicePort:     localnode.ServicePort{Name: name(n), ClusterIP: netip.MustParseAddr(ip), Port: 80},
		Endpoints:       eps,
		HasAnyEndpoints: len(eps) > 0,
	}
	s.Normalize()
	return s
}

func TestDiffer(t *testing.T) {
	tests := []struct {
		name   string
		states []*localnode.State
		want   [][]string
	}{
		{
			name:   "first state sets everything",
			states: []*localnode.State{state(svc("a", "10.0.0.1", ep("10.1.0.1", false), ep("10.1.0.2", false)), svc("b", "10.0.0.2"))},
			want: [][]string{{
				"set-svc IPv4 ns/a:p/TCP", "set-svc IPv4 ns/b:p/TCP",
				"set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "set-ep IPv4 ns/a:p/TCP 10.1.0.2:8080", "sync",
			}},
		},
		{
			name: "unchanged state only syncs (a retry)",
			states: []*localnode.State{
				state(svc("a", "10.0.0.1", ep("10.1.0.1", false))),
				state(svc("a", "10.0.0.1", ep("10.1.0.1", false))),
			},
			want: [][]string{
				{"set-svc IPv4 ns/a:p/TCP", "set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "sync"},
				{"sync"},
			},
		},
		{
			name: "endpoint changes touch only that endpoint; the service follows when HasAnyEndpoints flips",
			states: []*localnode.State{
				state(svc("a", "10.0.0.1", ep("10.1.0.1", false), ep("10.1.0.2", false)), svc("b", "10.0.0.2", ep("10.1.0.9", false))),
				state(svc("a", "10.0.0.1", ep("10.1.0.1", true), ep("10.1.0.3", false)), svc("b", "10.0.0.2")),
			},
			want: [][]string{
				{
					"set-svc IPv4 ns/a:p/TCP", "set-svc IPv4 ns/b:p/TCP", "set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080",
					"set-ep IPv4 ns/a:p/TCP 10.1.0.2:8080", "set-ep IPv4 ns/b:p/TCP 10.1.0.9:8080", "sync",
				},
				{
					"set-svc IPv4 ns/b:p/TCP", "set-ep IPv4 ns/a:p/TCP 10.1.0.3:8080", "set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080",
					"del-ep IPv4 ns/a:p/TCP 10.1.0.2:8080", "del-ep IPv4 ns/b:p/TCP 10.1.0.9:8080", "sync",
				},
			},
		},
		{
			name: "a deleted service loses its endpoints first",
			states: []*localnode.State{
				state(svc("a", "10.0.0.1", ep("10.1.0.1", false)), svc("b", "10.0.0.2")),
				state(svc("b", "10.0.0.2")),
			},
			want: [][]string{
				{"set-svc IPv4 ns/a:p/TCP", "set-svc IPv4 ns/b:p/TCP", "set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "sync"},
				{"del-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "del-svc IPv4 ns/a:p/TCP", "sync"},
			},
		},
		{
			name: "families are diffed separately",
			states: []*localnode.State{
				state(svc("a", "10.0.0.1")),
				{Family: localnode.IPv6, Services: []localnode.Service{{ServicePort: localnode.ServicePort{Name: name("a"), ClusterIP: netip.MustParseAddr("fd00::1"), Port: 80}}}},
				state(svc("a", "10.0.0.1")),
			},
			want: [][]string{{"set-svc IPv4 ns/a:p/TCP", "sync"}, {"set-svc IPv6 ns/a:p/TCP", "sync"}, {"sync"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := &fake.Incremental{}
			d := backend.NewDiffer(rec)
			for i, st := range tc.states {
				if err := d.Sync(context.Background(), st); err != nil {
					t.Fatalf("state %d: %v", i, err)
				}
				if diff := cmp.Diff(tc.want[i], rec.Take()); diff != "" {
					t.Errorf("state %d calls (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

func TestDifferPassesSyncErrors(t *testing.T) {
	rec := &fake.Incremental{}
	rec.SetError(errors.New("boom"))
	d := backend.NewDiffer(rec)
	if err := d.Sync(context.Background(), state(svc("a", "10.0.0.1"))); err == nil {
		t.Fatal("want the Incremental's error")
	}
	rec.Take()
	rec.SetError(nil)
	// The retry repeats no calls: the Incremental keeps what it was told.
	if err := d.Sync(context.Background(), state(svc("a", "10.0.0.1"))); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"sync"}, rec.Take()); diff != "" {
		t.Fatalf("retry calls (-want +got):\n%s", diff)
	}
	if err := d.Sync(context.Background(), nil); err == nil {
		t.Fatal("nil state accepted")
	}
}

func TestCollector(t *testing.T) {
	type step func(c *backend.Collector)
	setSvc := func(n, ip string, any bool) step {
		return func(c *backend.Collector) {
			s := svc(n, ip)
			c.SetService(localnode.IPv4, &backend.ServiceInfo{ServicePort: s.ServicePort, HasAnyEndpoints: any})
		}
	}
	setEp := func(n, ip string) step {
		return func(c *backend.Collector) { c.SetEndpoint(localnode.IPv4, name(n), ep(ip, false)) }
	}
	delEp := func(n, ip string) step {
		return func(c *backend.Collector) {
			c.DeleteEndpoint(localnode.IPv4, name(n), netip.AddrPortFrom(netip.MustParseAddr(ip), 8080))
		}
	}
	delSvc := func(n string) step { return func(c *backend.Collector) { c.DeleteService(localnode.IPv4, name(n)) } }
	tests := []struct {
		name    string
		batches [][]step
		// want is the State synced after each batch; nil when no Sync should reach the
		// FullState backend.
		want []*localnode.State
	}{
		{
			name:    "a family never touched is never synced",
			batches: [][]step{{}},
			want:    []*localnode.State{nil},
		},
		{
			name: "endpoints before their service are kept until it comes",
			batches: [][]step{
				{setEp("a", "10.1.0.1")},
				{setSvc("a", "10.0.0.1", true)},
			},
			want: []*localnode.State{state(), state(svc("a", "10.0.0.1", ep("10.1.0.1", false)))},
		},
		{
			name: "a batch that changes nothing in the end is not synced",
			batches: [][]step{
				{setSvc("a", "10.0.0.1", true), setEp("a", "10.1.0.1")},
				{setEp("a", "10.1.0.2"), delEp("a", "10.1.0.2")},
				{delEp("a", "10.1.0.1"), delSvc("a")},
			},
			want: []*localnode.State{state(svc("a", "10.0.0.1", ep("10.1.0.1", false))), nil, state()},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := fake.NewFullState()
			c := backend.NewCollector(rec)
			for i, batch := range tc.batches {
				before := len(rec.Synced())
				for _, s := range batch {
					s(c)
				}
				if err := c.Sync(context.Background()); err != nil {
					t.Fatalf("batch %d: %v", i, err)
				}
				synced := rec.Synced()
				if tc.want[i] == nil {
					if len(synced) != before {
						t.Fatalf("batch %d: unexpected sync of %+v", i, synced[len(synced)-1])
					}
					continue
				}
				if len(synced) != before+1 {
					t.Fatalf("batch %d: %d syncs, want 1", i, len(synced)-before)
				}
				if got := synced[len(synced)-1]; !got.Equal(tc.want[i]) {
					t.Fatalf("batch %d: synced\n%+v\nwant\n%+v", i, got, tc.want[i])
				}
			}
		})
	}
}

func TestCollectorRetriesFailedFamily(t *testing.T) {
	rec := fake.NewFullState()
	c := backend.NewCollector(rec)
	c.SetService(localnode.IPv4, &backend.ServiceInfo{ServicePort: svc("a", "10.0.0.1").ServicePort})
	rec.SetError(errors.New("kernel said no"))
	if err := c.Sync(context.Background()); err == nil {
		t.Fatal("want error")
	}
	rec.SetError(nil)
	if err := c.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := len(rec.Attempts()); n != 2 {
		t.Fatalf("%d attempts, want the failed one and its retry", n)
	}
	if err := c.Sync(context.Background()); err != nil || len(rec.Attempts()) != 2 {
		t.Fatalf("a Sync with nothing new after success must not reach the backend")
	}
}

// TestRoundTrip pushes random successive States through Differ then Collector: the
// FullState backend at the end must see exactly the States that differ from their
// predecessor.
func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	rec := fake.NewFullState()
	d := backend.NewDiffer(backend.NewCollector(rec))
	var prev *localnode.State
	want := 0
	for i := 0; i < 300; i++ {
		var svcs []localnode.Service
		for s := 0; s < r.IntN(6); s++ {
			var eps []localnode.Endpoint
			for e := 0; e < r.IntN(4); e++ {
				eps = append(eps, ep(fmt.Sprintf("10.1.%d.%d", s, r.IntN(5)+1), r.IntN(2) == 0))
			}
			sv := svc(fmt.Sprintf("s%d", r.IntN(4)), fmt.Sprintf("10.0.0.%d", r.IntN(3)+1), eps...)
			sv.NodePort = uint16(r.IntN(2) * 30000)
			svcs = append(svcs, sv)
		}
		st := state(svcs...)
		if !st.Equal(prev) {
			want++
		}
		if err := d.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		if got := rec.Last(localnode.IPv4); !got.Equal(st) {
			t.Fatalf("step %d: backend holds\n%+v\nwant\n%+v", i, got, st)
		}
		prev = st
	}
	if got := len(rec.Synced()); got != want {
		t.Fatalf("backend synced %d times, want %d (once per real change)", got, want)
	}
}

func TestFullStateFunc(t *testing.T) {
	called := false
	var f backend.FullState = backend.FullStateFunc(func(context.Context, *localnode.State) error { called = true; return nil })
	_ = f.Sync(context.Background(), state())
	if !called {
		t.Fatal("func not called")
	}
}

// TestDifferSharedEndpointSlices feeds States that share unchanged services' endpoint
// slices, as proxyrun's do: only the changed service's endpoints may produce calls.
func TestDifferSharedEndpointSlices(t *testing.T) {
	first := state(svc("a", "10.0.0.1", ep("10.1.0.1", false)), svc("b", "10.0.0.2", ep("10.1.0.2", false)))
	second := &localnode.State{Family: localnode.IPv4, Services: slices.Clone(first.Services)}
	second.Services[0].NodePort = 30000 // same endpoint slice, changed port
	second.Services[1].Endpoints = []localnode.Endpoint{ep("10.1.0.3", false)}
	third := &localnode.State{Family: localnode.IPv4, Services: second.Services[1:]}

	rec := &fake.Incremental{}
	d := backend.NewDiffer(rec)
	want := [][]string{
		{"set-svc IPv4 ns/a:p/TCP", "set-svc IPv4 ns/b:p/TCP", "set-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "set-ep IPv4 ns/b:p/TCP 10.1.0.2:8080", "sync"},
		{"set-svc IPv4 ns/a:p/TCP", "set-ep IPv4 ns/b:p/TCP 10.1.0.3:8080", "del-ep IPv4 ns/b:p/TCP 10.1.0.2:8080", "sync"},
		{"del-ep IPv4 ns/a:p/TCP 10.1.0.1:8080", "del-svc IPv4 ns/a:p/TCP", "sync"},
	}
	for i, st := range []*localnode.State{first, second, third} {
		if err := d.Sync(context.Background(), st); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want[i], rec.Take()); diff != "" {
			t.Errorf("state %d calls (-want +got):\n%s", i, diff)
		}
	}
}
