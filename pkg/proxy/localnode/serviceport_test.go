package localnode

import (
	"context"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestComputeServicePortMatchesBrain checks that a backend converting one
// changed port gets what ComputeResolved gives for it, and that the
// no-endpoint actions read back from the Service are the brain's.
func TestComputeServicePortMatchesBrain(t *testing.T) {
	v4 := []string{"10.0.0.10"}
	local := func(ip string, mutate ...func(*discovery.Endpoint)) discovery.Endpoint {
		return st.Endpoint(ip, thisNode, mutate...)
	}
	remote := func(ip string, mutate ...func(*discovery.Endpoint)) discovery.Endpoint {
		return st.Endpoint(ip, "node-b", mutate...)
	}
	tests := []struct {
		name                  string
		svc                   *v1.Service
		eps                   []discovery.Endpoint
		wantInternal, wantExt proxy.NoEndpointsAction
	}{
		{name: "no endpoints anywhere: reject", svc: st.Service("ns", "web", v4),
			wantInternal: proxy.Reject, wantExt: proxy.Reject},
		{name: "only non-ready endpoints: reject", svc: st.Service("ns", "web", v4),
			eps: []discovery.Endpoint{remote("10.1.0.2", st.NotReady())}, wantInternal: proxy.Reject, wantExt: proxy.Reject},
		{name: "cluster policy with endpoints: forward", svc: st.Service("ns", "web", v4),
			eps: []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1")}, wantInternal: proxy.Forward, wantExt: proxy.Forward},
		{name: "internal Local without a local endpoint: drop", svc: st.Service("ns", "web", v4, st.InternalLocal()),
			eps: []discovery.Endpoint{remote("10.1.0.2")}, wantInternal: proxy.Drop, wantExt: proxy.Forward},
		{name: "internal Local with a local endpoint: forward", svc: st.Service("ns", "web", v4, st.InternalLocal()),
			eps: []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1")}, wantInternal: proxy.Forward, wantExt: proxy.Forward},
		{name: "external Local without a local endpoint: drop external only",
			svc: st.Service("ns", "web", v4, st.LoadBalancer(30080, "192.0.2.1"), st.ExternalLocal(31000)),
			eps: []discovery.Endpoint{remote("10.1.0.2")}, wantInternal: proxy.Forward, wantExt: proxy.Drop},
		{name: "external Local, local endpoint only terminating: forward to it",
			svc: st.Service("ns", "web", v4, st.LoadBalancer(30080, "192.0.2.1"), st.ExternalLocal(31000)),
			eps: []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1", st.Terminating(true))}, wantInternal: proxy.Forward, wantExt: proxy.Forward},
		{name: "external Local without endpoints anywhere: reject",
			svc:          st.Service("ns", "web", v4, st.LoadBalancer(30080, "192.0.2.1"), st.ExternalLocal(31000)),
			wantInternal: proxy.Reject, wantExt: proxy.Reject},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var slices []*discovery.EndpointSlice
			if len(tc.eps) > 0 {
				slices = append(slices, st.EndpointSlice("ns", "web", "web-1", "http", 8080, tc.eps...))
			}
			sm, em := brainMaps(t, v1.IPv4Protocol, []*v1.Service{tc.svc}, slices)
			policy := resolver(sm, em)
			want := NewComputer(IPv4).ComputeResolved(context.Background(), sm, em, true, policy)
			if len(want.Services) != 1 {
				t.Fatalf("ComputeResolved gave %d services, want 1", len(want.Services))
			}
			for spn, sp := range sm {
				tp := policy(spn, sp)
				got, ok := NewComputer(IPv4).ComputeServicePort(context.Background(), spn, sp, tp)
				if !ok {
					t.Fatalf("ComputeServicePort left %s out", spn)
				}
				if !got.Equal(&want.Services[0]) {
					t.Errorf("ComputeServicePort = %+v, ComputeResolved = %+v", got, want.Services[0])
				}
				if a, b := got.InternalNoEndpoints(), tp.Internal; a != b || a != tc.wantInternal {
					t.Errorf("InternalNoEndpoints = %v, brain %v, want %v", a, b, tc.wantInternal)
				}
				if a, b := got.ExternalNoEndpoints(), tp.External; a != b || a != tc.wantExt {
					t.Errorf("ExternalNoEndpoints = %v, brain %v, want %v", a, b, tc.wantExt)
				}
			}
		})
	}
}

func TestComputeServicePortLeavesOut(t *testing.T) {
	sm, em := brainMaps(t, v1.IPv4Protocol, []*v1.Service{st.Service("ns", "web", []string{"10.0.0.10"})}, nil)
	policy := resolver(sm, em)
	for spn, sp := range sm {
		if _, ok := NewComputer(IPv6).ComputeServicePort(context.Background(), spn, sp, policy(spn, sp)); ok {
			t.Errorf("an IPv4 port was converted for IPv6")
		}
		if _, ok := NewComputer(IPv4).ComputeServicePort(context.Background(), spn, sp, nil); ok {
			t.Errorf("a port without a resolved policy (not to be programmed) was converted")
		}
		if _, ok := NewComputer(IPv4).ComputeServicePort(context.Background(), spn, nil, policy(spn, sp)); ok {
			t.Errorf("a nil port was converted")
		}
	}
}

// benchState returns the brain's maps for n NodePort services with 10
// endpoints each (every tenth externalTrafficPolicy Local), the shape of the
// backends' own 10k benchmarks.
func benchState(b *testing.B, n int) (proxy.ServicePortMap, proxy.EndpointsMap) {
	svcs := make([]*v1.Service, 0, n)
	slices := make([]*discovery.EndpointSlice, 0, n)
	for i := range n {
		name := fmt.Sprintf("svc%d", i)
		opts := []func(*v1.Service){st.NodePort(int32(30000 + i%30000))}
		if i%10 == 0 {
			opts = append(opts, st.ExternalLocal(int32(32000+i%1000)))
		}
		svcs = append(svcs, st.Service(fmt.Sprintf("ns%d", i%100), name, []string{fmt.Sprintf("172.30.%d.%d", i/250, i%250+1)}, opts...))
		var eps []discovery.Endpoint
		for j := range 10 {
			k := i*10 + j
			node := "node-b"
			if j == 0 {
				node = thisNode
			}
			eps = append(eps, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", k/65536, (k/256)%256, k%256), node))
		}
		slices = append(slices, st.EndpointSlice(fmt.Sprintf("ns%d", i%100), name, name+"-1", "http", 8080, eps...))
	}
	return brainMaps(b, v1.IPv4Protocol, svcs, slices)
}

// resolver resolves every port's traffic policy once, as the sync shell does for
// proxyrun, and returns ComputeResolved's policy function over the results.
func resolver(sm proxy.ServicePortMap, em proxy.EndpointsMap) func(proxy.ServicePortName, proxy.ServicePort) *proxy.TrafficPolicy {
	policies := make(map[proxy.ServicePortName]*proxy.TrafficPolicy, len(sm))
	for spn, sp := range sm {
		tp := proxy.ResolveTrafficPolicy(sp, em[spn], thisNode, nil)
		policies[spn] = &tp
	}
	return func(spn proxy.ServicePortName, _ proxy.ServicePort) *proxy.TrafficPolicy { return policies[spn] }
}

// BenchmarkComputeResolved is the library's conversion of a whole 10k-service
// state (what proxyrun does on a full sync), and a partial one with one changed port
// (unchanged ports are reused, but the State is still built in full).
func BenchmarkComputeResolved(b *testing.B) {
	ctx := context.Background()
	for _, n := range []int{1000, 10000} {
		sm, em := benchState(b, n)
		policy := resolver(sm, em)
		b.Run(fmt.Sprintf("full/%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				NewComputer(IPv4).ComputeResolved(ctx, sm, em, true, policy)
			}
		})
		b.Run(fmt.Sprintf("oneChange/%d", n), func(b *testing.B) {
			c := NewComputer(IPv4)
			c.ComputeResolved(ctx, sm, em, true, policy)
			var spn proxy.ServicePortName
			for spn = range sm {
				break
			}
			eps := em[spn]
			b.ReportAllocs()
			for b.Loop() {
				// A new list, as the tracker makes on every change.
				em[spn] = append([]proxy.Endpoint(nil), eps...)
				c.ComputeResolved(ctx, sm, em, false, policy)
			}
			em[spn] = eps
		})
	}
}

// BenchmarkComputeServicePort is what a backend told which ports changed
// pays per changed port.
func BenchmarkComputeServicePort(b *testing.B) {
	ctx := context.Background()
	sm, em := benchState(b, 100)
	policy := resolver(sm, em)
	c := NewComputer(IPv4)
	b.ReportAllocs()
	for b.Loop() {
		for spn, sp := range sm {
			c.ComputeServicePort(ctx, spn, sp, policy(spn, sp))
		}
	}
}
