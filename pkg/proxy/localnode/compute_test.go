package localnode

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"k8s.io/kube-proxy/pkg/proxy"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

const thisNode = "node-a"

// brainMaps runs objects through the brain's trackers the way proxyrun does.
func brainMaps(t testing.TB, family v1.IPFamily, svcs []*v1.Service, slices []*discovery.EndpointSlice) (proxy.ServicePortMap, proxy.EndpointsMap) {
	t.Helper()
	locs := NewLocations()
	sct := proxy.NewServiceChangeTracker(family, nil, nil)
	ect := proxy.NewEndpointsChangeTracker(family, thisNode, locs.MakeEndpoint, nil)
	for _, s := range svcs {
		sct.Update(nil, s)
	}
	for _, s := range slices {
		locs.Update(s, false)
		ect.EndpointSliceUpdate(s, false)
	}
	sm, em := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	sm.Update(sct)
	em.Update(ect)
	return sm, em
}

func a(s string) netip.Addr { return netip.MustParseAddr(s) }

var webName = PortName{Namespace: "ns", Name: "web", Port: "http", Protocol: TCP}

func web(p ServicePort) ServicePort {
	p.Name = webName
	if !p.ClusterIP.IsValid() {
		p.ClusterIP = a("10.0.0.10")
	}
	p.Port = 80
	p.Normalize()
	return p
}

func TestCompute(t *testing.T) {
	v4 := []string{"10.0.0.10"}
	local := func(ip string, mutate ...func(*discovery.Endpoint)) discovery.Endpoint {
		return st.Endpoint(ip, thisNode, mutate...)
	}
	remote := func(ip string, mutate ...func(*discovery.Endpoint)) discovery.Endpoint {
		return st.Endpoint(ip, "node-b", mutate...)
	}
	type ep = Endpoint
	ready := func(ip string, isLocal bool, node string, forCluster, forLocal bool) ep {
		return ep{IP: a(ip), Port: 8080, Ready: true, Serving: true, Local: isLocal, NodeName: node, ForCluster: forCluster, ForLocal: forLocal}
	}
	tests := []struct {
		name   string
		family v1.IPFamily
		labels map[string]string
		svc    *v1.Service
		eps    []discovery.Endpoint
		want   []Service
	}{
		{
			name: "no endpoints: kept, with nothing to send to",
			svc:  st.Service("ns", "web", v4),
			want: []Service{{ServicePort: web(ServicePort{})}},
		},
		{
			name: "cluster policy uses every ready endpoint",
			svc:  st.Service("ns", "web", v4),
			eps:  []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1")},
			want: []Service{{ServicePort: web(ServicePort{}), HasAnyEndpoints: true, Endpoints: []ep{
				ready("10.1.0.1", true, thisNode, true, false), ready("10.1.0.2", false, "node-b", true, false),
			}}},
		},
		{
			name: "not-ready endpoints are left out",
			svc:  st.Service("ns", "web", v4),
			eps:  []discovery.Endpoint{remote("10.1.0.2", st.NotReady()), local("10.1.0.1")},
			want: []Service{{ServicePort: web(ServicePort{}), HasAnyEndpoints: true, Endpoints: []ep{
				ready("10.1.0.1", true, thisNode, true, false),
			}}},
		},
		{
			name: "internal Local uses only local endpoints",
			svc:  st.Service("ns", "web", v4, st.InternalLocal()),
			eps:  []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1")},
			want: []Service{{ServicePort: web(ServicePort{InternalPolicy: PolicyLocal}), HasAnyEndpoints: true, Endpoints: []ep{
				ready("10.1.0.1", true, thisNode, false, true),
			}}},
		},
		{
			name: "internal Local without local endpoints drops rather than rejects",
			svc:  st.Service("ns", "web", v4, st.InternalLocal()),
			eps:  []discovery.Endpoint{remote("10.1.0.2")},
			want: []Service{{ServicePort: web(ServicePort{InternalPolicy: PolicyLocal}), HasAnyEndpoints: true}},
		},
		{
			name: "external Local load balancer: cluster endpoints for the cluster IP, local ones for external traffic",
			svc:  st.Service("ns", "web", v4, st.LoadBalancer(30080, "192.0.2.1"), st.ExternalLocal(31000)),
			eps:  []discovery.Endpoint{remote("10.1.0.2"), local("10.1.0.1")},
			want: []Service{{ServicePort: web(ServicePort{
				NodePort: 30080, LoadBalancerVIPs: []netip.Addr{a("192.0.2.1")},
				ExternalPolicy: PolicyLocal, HealthCheckNodePort: 31000,
			}), HasAnyEndpoints: true, Endpoints: []ep{
				ready("10.1.0.1", true, thisNode, true, true), ready("10.1.0.2", false, "node-b", true, false),
			}}},
		},
		{
			name: "no ready endpoint: fall back to serving terminating ones, never to non-serving",
			svc:  st.Service("ns", "web", v4),
			eps:  []discovery.Endpoint{remote("10.1.0.2", st.Terminating(true)), local("10.1.0.1", st.Terminating(false))},
			want: []Service{{ServicePort: web(ServicePort{}), HasAnyEndpoints: true, Endpoints: []ep{
				{IP: a("10.1.0.2"), Port: 8080, Serving: true, Terminating: true, NodeName: "node-b", ForCluster: true},
			}}},
		},
		{
			name:   "zone hints narrow cluster endpoints to this node's zone",
			labels: map[string]string{v1.LabelTopologyZone: "z1"},
			svc:    st.Service("ns", "web", v4),
			eps:    []discovery.Endpoint{remote("10.1.0.2", st.Zone("z2", true)), remote("10.1.0.3", st.Zone("z1", true))},
			want: []Service{{ServicePort: web(ServicePort{}), HasAnyEndpoints: true, Endpoints: []ep{
				{IP: a("10.1.0.3"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b", Zone: "z1", ForCluster: true},
			}}},
		},
		{
			name:   "hints for no endpoint in this zone are ignored",
			labels: map[string]string{v1.LabelTopologyZone: "z3"},
			svc:    st.Service("ns", "web", v4),
			eps:    []discovery.Endpoint{remote("10.1.0.2", st.Zone("z2", true))},
			want: []Service{{ServicePort: web(ServicePort{}), HasAnyEndpoints: true, Endpoints: []ep{
				{IP: a("10.1.0.2"), Port: 8080, Ready: true, Serving: true, NodeName: "node-b", Zone: "z2", ForCluster: true},
			}}},
		},
		{
			name: "affinity, external IPs and source ranges; an allow-all range means no restriction",
			svc: st.Service("ns", "web", v4, st.ClientIPAffinity(600), st.ExternalIPs("192.0.2.9", "192.0.2.8", "2001:db8::1"),
				func(s *v1.Service) { s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", "0.0.0.0/0"} }),
			want: []Service{{ServicePort: web(ServicePort{
				SessionAffinity: AffinityClientIP, AffinityTimeout: 600 * time.Second,
				ExternalIPs: []netip.Addr{a("192.0.2.8"), a("192.0.2.9")},
			})}},
		},
		{
			name: "source ranges of the family, masked and sorted",
			svc: st.Service("ns", "web", v4, st.LoadBalancer(30080, "192.0.2.1"),
				func(s *v1.Service) {
					s.Spec.LoadBalancerSourceRanges = []string{"198.51.100.0/24", " 203.0.113.0/25 ", "2001:db8::/64"}
				}),
			want: []Service{{ServicePort: web(ServicePort{
				NodePort: 30080, LoadBalancerVIPs: []netip.Addr{a("192.0.2.1")},
				SourceRanges: []netip.Prefix{netip.MustParsePrefix("198.51.100.0/24"), netip.MustParsePrefix("203.0.113.0/25")},
			})}},
		},
		{
			name:   "IPv6 family of a dual-stack service",
			family: v1.IPv6Protocol,
			svc:    st.Service("ns", "web", []string{"10.0.0.10", "fd00::10"}),
			eps:    []discovery.Endpoint{local("fd00:1::1")},
			want: []Service{{ServicePort: web(ServicePort{ClusterIP: a("fd00::10")}), HasAnyEndpoints: true, Endpoints: []ep{
				ready("fd00:1::1", true, thisNode, true, false),
			}}},
		},
		{
			name:   "single-stack IPv4 service has no IPv6 state",
			family: v1.IPv6Protocol,
			svc:    st.Service("ns", "web", v4),
			want:   []Service{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			family := tc.family
			if family == "" {
				family = v1.IPv4Protocol
			}
			var slices []*discovery.EndpointSlice
			if len(tc.eps) > 0 {
				slices = append(slices, st.EndpointSlice("ns", "web", "web-1", "http", 8080, tc.eps...))
			}
			sm, em := brainMaps(t, family, []*v1.Service{tc.svc}, slices)
			got := Compute(context.Background(), Family(family), sm, em, thisNode, tc.labels)
			want := &State{Family: Family(family), Services: tc.want}
			if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b }),
				cmp.Comparer(func(a, b netip.Prefix) bool { return a == b })); diff != "" {
				t.Fatalf("State (-want +got):\n%s", diff)
			}
			if err := got.Validate(); err != nil {
				t.Errorf("computed State does not validate: %v", err)
			}
			if !got.Equal(want) || got.Digest() != want.Digest() {
				t.Errorf("Equal/Digest disagree with cmp.Diff")
			}
		})
	}
}

// TestComputeMatchesCategorizeEndpoints checks the role flags against the brain's own
// answer for every policy combination, so the model cannot drift from the proxiers.
func TestComputeMatchesCategorizeEndpoints(t *testing.T) {
	variants := map[string][]func(*v1.Service){
		"cluster":                 nil,
		"internal local":          {st.InternalLocal()},
		"external local":          {st.NodePort(30001), st.ExternalLocal(31001)},
		"both local":              {st.NodePort(30001), st.ExternalLocal(31001), st.InternalLocal()},
		"external local, no port": {st.ExternalLocal(31001)},
	}
	epSets := map[string][]discovery.Endpoint{
		"ready mix":           {st.Endpoint("10.1.0.1", thisNode), st.Endpoint("10.1.0.2", "node-b"), st.Endpoint("10.1.0.3", "node-b", st.NotReady())},
		"local terminating":   {st.Endpoint("10.1.0.1", thisNode, st.Terminating(true)), st.Endpoint("10.1.0.2", "node-b")},
		"all terminating":     {st.Endpoint("10.1.0.1", thisNode, st.Terminating(true)), st.Endpoint("10.1.0.2", "node-b", st.Terminating(true))},
		"remote only":         {st.Endpoint("10.1.0.2", "node-b")},
		"hinted, local in z2": {st.Endpoint("10.1.0.1", thisNode, st.Zone("z2", true)), st.Endpoint("10.1.0.2", "node-b", st.Zone("z1", true))},
		"none serving":        {st.Endpoint("10.1.0.1", thisNode, st.Terminating(false))},
	}
	labels := map[string]string{v1.LabelTopologyZone: "z1"}
	for vname, mut := range variants {
		for ename, eps := range epSets {
			t.Run(vname+"/"+ename, func(t *testing.T) {
				sm, em := brainMaps(t, v1.IPv4Protocol, []*v1.Service{st.Service("ns", "web", []string{"10.0.0.10"}, mut...)},
					[]*discovery.EndpointSlice{st.EndpointSlice("ns", "web", "web-1", "http", 8080, eps...)})
				spn := proxy.ServicePortName{Port: "http", Protocol: v1.ProtocolTCP}
				spn.Namespace, spn.Name = "ns", "web"
				cluster, local, all, hasAny := proxy.CategorizeEndpoints(em[spn], sm[spn], thisNode, labels)
				state := Compute(context.Background(), IPv4, sm, em, thisNode, labels)
				svc := state.Lookup(webName)
				if svc == nil {
					t.Fatal("service missing from State")
				}
				if svc.HasAnyEndpoints != hasAny {
					t.Errorf("HasAnyEndpoints = %v, brain says %v", svc.HasAnyEndpoints, hasAny)
				}
				check := func(what string, got []Endpoint, want []proxy.Endpoint) {
					t.Helper()
					gs := map[string]bool{}
					for _, e := range got {
						gs[e.String()] = true
					}
					if len(gs) != len(want) {
						t.Errorf("%s: got %v, brain says %v", what, got, want)
						return
					}
					for _, e := range want {
						if !gs[e.String()] {
							t.Errorf("%s: got %v, brain says %v", what, got, want)
						}
					}
				}
				check("Endpoints", svc.Endpoints, all)
				if sm[spn].UsesClusterEndpoints() {
					check("ClusterEndpoints", svc.ClusterEndpoints(), cluster)
				} else if svc.ClusterEndpoints() != nil || cluster != nil {
					t.Errorf("ClusterEndpoints = %v, brain %v; want both nil", svc.ClusterEndpoints(), cluster)
				}
				if sm[spn].UsesLocalEndpoints() {
					check("LocalEndpoints", svc.LocalEndpoints(), local)
				} else if svc.LocalEndpoints() != nil || local != nil {
					t.Errorf("LocalEndpoints = %v, brain %v; want both nil", svc.LocalEndpoints(), local)
				}
				if svc.UsesClusterEndpoints() != sm[spn].UsesClusterEndpoints() || svc.UsesLocalEndpoints() != sm[spn].UsesLocalEndpoints() ||
					svc.ExternallyAccessible() != sm[spn].ExternallyAccessible() {
					t.Errorf("policy predicates differ from the brain's")
				}
			})
		}
	}
}

func TestComputerReusesUnchangedPorts(t *testing.T) {
	ctx := context.Background()
	sct := proxy.NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
	ect := proxy.NewEndpointsChangeTracker(v1.IPv4Protocol, thisNode, nil, nil)
	for _, n := range []string{"a", "b", "c"} {
		sct.Update(nil, st.Service("ns", n, []string{"10.0.0." + map[string]string{"a": "1", "b": "2", "c": "3"}[n]}))
		ect.EndpointSliceUpdate(st.EndpointSlice("ns", n, n+"-1", "http", 8080, st.Endpoint("10.1.0.1", "node-b")), false)
	}
	sm, em := proxy.ServicePortMap{}, proxy.EndpointsMap{}
	sm.Update(sct)
	em.Update(ect)
	c := NewComputer(IPv4)
	first := c.Compute(ctx, sm, em, thisNode, nil)

	// Change b's endpoints, delete c, add d.
	ect.EndpointSliceUpdate(st.EndpointSlice("ns", "b", "b-1", "http", 8080, st.Endpoint("10.1.0.9", "node-b")), false)
	sct.Update(st.Service("ns", "c", []string{"10.0.0.3"}), nil)
	sct.Update(nil, st.Service("ns", "d", []string{"10.0.0.4"}))
	sm.Update(sct)
	em.Update(ect)
	second := c.Compute(ctx, sm, em, thisNode, nil)

	fresh := Compute(ctx, IPv4, sm, em, thisNode, nil)
	if !second.Equal(fresh) {
		t.Fatalf("incremental result differs from a fresh computation:\n%+v\n%+v", second, fresh)
	}
	if got := len(second.Services); got != 3 {
		t.Fatalf("got %d services, want 3 (a, b, d)", got)
	}
	if &first.Services[0].Endpoints[0] != &second.Services[0].Endpoints[0] {
		t.Errorf("unchanged port a was recomputed")
	}
	if second.Services[1].Endpoints[0].IP != a("10.1.0.9") {
		t.Errorf("changed port b not recomputed: %v", second.Services[1].Endpoints)
	}
	// A topology change invalidates everything.
	third := c.Compute(ctx, sm, em, thisNode, map[string]string{v1.LabelTopologyZone: "z9"})
	if &third.Services[0].Endpoints[0] == &second.Services[0].Endpoints[0] {
		t.Errorf("cache survived a zone change")
	}
	if !third.Equal(second) {
		t.Errorf("zone change without hints changed the State")
	}
}

func TestComputeSkipsBadEndpoints(t *testing.T) {
	sm, _ := brainMaps(t, v1.IPv4Protocol, []*v1.Service{st.Service("ns", "web", []string{"10.0.0.10"})}, nil)
	spn := proxy.ServicePortName{Port: "http", Protocol: v1.ProtocolTCP}
	spn.Namespace, spn.Name = "ns", "web"
	em := proxy.EndpointsMap{spn: {badEndpoint{ip: "not-an-ip"}, badEndpoint{ip: "fd00::1"}, badEndpoint{ip: "10.1.0.1"}}}
	got := Compute(context.Background(), IPv4, sm, em, thisNode, nil)
	svc := got.Lookup(webName)
	if svc == nil || len(svc.Endpoints) != 1 || svc.Endpoints[0].IP != a("10.1.0.1") {
		t.Fatalf("want only the valid IPv4 endpoint, got %+v", svc)
	}
}

// badEndpoint is a third-party Endpoint implementation (a value type, not comparable by
// pointer) that can carry any address.
type badEndpoint struct {
	ip string
	_  []int // makes the type non-comparable, as some implementations are
}

func (e badEndpoint) String() string              { return e.ip + ":8080" }
func (e badEndpoint) IP() string                  { return e.ip }
func (e badEndpoint) Port() int                   { return 8080 }
func (e badEndpoint) IsLocal() bool               { return false }
func (e badEndpoint) IsReady() bool               { return true }
func (e badEndpoint) IsServing() bool             { return true }
func (e badEndpoint) IsTerminating() bool         { return false }
func (e badEndpoint) ZoneHints() sets.Set[string] { return nil }
func (e badEndpoint) NodeHints() sets.Set[string] { return nil }

func TestRuleOrder(t *testing.T) {
	ep := func(addr string, port uint16, forCluster, forLocal bool) Endpoint {
		return Endpoint{IP: netip.MustParseAddr(addr), Port: port, ForCluster: forCluster, ForLocal: forLocal, Local: forLocal}
	}
	for _, tc := range []struct {
		name        string
		port        ServicePort
		eps         []Endpoint
		wantText    []string
		wantCluster []int
		wantLocal   []int
	}{
		{
			name:        "text order, not address order",
			port:        ServicePort{InternalPolicy: PolicyCluster, ExternalPolicy: PolicyCluster},
			eps:         []Endpoint{ep("10.0.0.9", 80, true, false), ep("10.0.0.10", 80, true, false), ep("10.0.0.10", 8080, true, false)},
			wantText:    []string{"10.0.0.10:80", "10.0.0.10:8080", "10.0.0.9:80"},
			wantCluster: []int{0, 1, 2},
		},
		{
			name:     "IPv6 bracketed",
			port:     ServicePort{InternalPolicy: PolicyCluster, ExternalPolicy: PolicyCluster},
			eps:      []Endpoint{ep("fd00::a", 80, false, false), ep("fd00::9", 80, true, false)},
			wantText: []string{"[fd00::9]:80", "[fd00::a]:80"},
			// fd00::a serves no traffic (terminating with ready ones elsewhere).
			wantCluster: []int{0},
		},
		{
			name:        "external Local: both subsets",
			port:        ServicePort{NodePort: 30000, InternalPolicy: PolicyCluster, ExternalPolicy: PolicyLocal},
			eps:         []Endpoint{ep("10.0.0.2", 80, true, true), ep("10.0.0.1", 80, true, false)},
			wantText:    []string{"10.0.0.1:80", "10.0.0.2:80"},
			wantCluster: []int{0, 1},
			wantLocal:   []int{1},
		},
		{
			name:      "internal Local, not externally reachable: no Cluster subset",
			port:      ServicePort{InternalPolicy: PolicyLocal, ExternalPolicy: PolicyCluster},
			eps:       []Endpoint{ep("10.0.0.2", 80, true, true), ep("10.0.0.1", 80, true, false)},
			wantText:  []string{"10.0.0.1:80", "10.0.0.2:80"},
			wantLocal: []int{1},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &Service{ServicePort: tc.port, Endpoints: tc.eps}
			s.Normalize()
			o := s.RuleOrder()
			if diff := cmp.Diff(tc.wantText, o.Text); diff != "" {
				t.Errorf("Text (-want +got):\n%s", diff)
			}
			for k, e := range o.Endpoints {
				if e.String() != o.Text[k] || e != &s.Endpoints[indexOf(s.Endpoints, e)] {
					t.Errorf("Endpoints[%d] = %v, not Text's %s in Service.Endpoints", k, e, o.Text[k])
				}
			}
			if diff := cmp.Diff(tc.wantCluster, o.Cluster); diff != "" {
				t.Errorf("Cluster (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantLocal, o.Local); diff != "" {
				t.Errorf("Local (-want +got):\n%s", diff)
			}
		})
	}
}

func indexOf(eps []Endpoint, e *Endpoint) int {
	for i := range eps {
		if &eps[i] == e {
			return i
		}
	}
	return 0
}
