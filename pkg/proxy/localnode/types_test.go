package localnode

import (
	"net/netip"
	"strings"
	"testing"

	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

func handBuilt() *State {
	return &State{Family: IPv4, Services: []Service{
		{ServicePort: ServicePort{Name: PortName{"ns", "z", "", UDP}, ClusterIP: a("10.0.0.2"), Port: 53}},
		{
			ServicePort: ServicePort{
				Name: PortName{"ns", "a", "http", TCP}, ClusterIP: a("10.0.0.1"), Port: 80,
				ExternalIPs:  []netip.Addr{a("192.0.2.2"), a("192.0.2.1"), a("192.0.2.2")},
				SourceRanges: []netip.Prefix{netip.MustParsePrefix("198.51.100.7/24")},
			},
			HasAnyEndpoints: true,
			Endpoints: []Endpoint{
				{IP: a("10.1.0.2"), Port: 8080, Ready: true, ForCluster: true},
				{IP: a("10.1.0.10"), Port: 8080, Ready: true, ForCluster: true},
			},
		},
	}}
}

func TestNormalizeEqualDigest(t *testing.T) {
	s := handBuilt()
	s.Normalize()
	if s.Services[0].Name.Name != "a" {
		t.Fatalf("services not sorted: %v", s.Services[0].Name)
	}
	svc := s.Services[0]
	if len(svc.ExternalIPs) != 2 || svc.ExternalIPs[0] != a("192.0.2.1") {
		t.Errorf("external IPs not sorted and de-duplicated: %v", svc.ExternalIPs)
	}
	if svc.SourceRanges[0] != netip.MustParsePrefix("198.51.100.0/24") {
		t.Errorf("source range not masked: %v", svc.SourceRanges)
	}
	if svc.Endpoints[0].IP != a("10.1.0.2") {
		t.Errorf("endpoints not in numeric address order: %v", svc.Endpoints)
	}
	if svc.SessionAffinity != AffinityNone || svc.InternalPolicy != PolicyCluster || svc.ExternalPolicy != PolicyCluster {
		t.Errorf("defaults not filled: %+v", svc.ServicePort)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}

	again := handBuilt()
	again.Normalize()
	if !s.Equal(again) || s.Digest() != again.Digest() {
		t.Fatalf("equal states differ")
	}

	mutations := map[string]func(*State){
		"endpoint condition": func(s *State) { s.Services[0].Endpoints[0].Ready = false },
		"endpoint role":      func(s *State) { s.Services[0].Endpoints[1].ForLocal = true },
		"endpoint zone":      func(s *State) { s.Services[0].Endpoints[1].Zone = "z" },
		"has any":            func(s *State) { s.Services[1].HasAnyEndpoints = true },
		"node port":          func(s *State) { s.Services[1].NodePort = 30000 },
		"affinity timeout":   func(s *State) { s.Services[0].AffinityTimeout = 1 },
		"external IP":        func(s *State) { s.Services[0].ExternalIPs = s.Services[0].ExternalIPs[:1] },
		"family":             func(s *State) { s.Family = IPv6 },
		"service removed":    func(s *State) { s.Services = s.Services[:1] },
		"port name":          func(s *State) { s.Services[1].Name.Port = "dns" },
	}
	for name, mutate := range mutations {
		t.Run(name, func(t *testing.T) {
			m := handBuilt()
			m.Normalize()
			mutate(m)
			if s.Equal(m) {
				t.Errorf("Equal missed the change")
			}
			if s.Digest() == m.Digest() {
				t.Errorf("Digest missed the change")
			}
		})
	}
	var nilState *State
	if !nilState.Equal(nil) || nilState.Equal(s) || s.Equal(nil) {
		t.Errorf("nil handling wrong")
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		mutate func(*State)
		want   string
	}{
		"ok":                {func(*State) {}, ""},
		"bad family":        {func(s *State) { s.Family = "IPv5" }, "unknown family"},
		"v6 cluster IP":     {func(s *State) { s.Services[0].ClusterIP = a("fd00::1") }, "cluster IP"},
		"zero port":         {func(s *State) { s.Services[1].Port = 0 }, "port is 0"},
		"v6 endpoint":       {func(s *State) { s.Services[0].Endpoints[0].IP = a("fd00::1") }, "endpoint"},
		"invalid VIP":       {func(s *State) { s.Services[0].LoadBalancerVIPs = []netip.Addr{{}} }, "address"},
		"unsorted services": {func(s *State) { s.Services[0], s.Services[1] = s.Services[1], s.Services[0] }, "not sorted"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := handBuilt()
			s.Normalize()
			tc.mutate(s)
			err := s.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestServiceEndpointViews(t *testing.T) {
	eps := []Endpoint{
		{IP: a("10.1.0.1"), Port: 1, Local: true, ForCluster: true, ForLocal: true},
		{IP: a("10.1.0.2"), Port: 1, ForCluster: true},
	}
	tests := map[string]struct {
		port                  ServicePort
		cluster, local, inter []Endpoint
		external              []Endpoint
	}{
		"cluster only": {
			port:    ServicePort{InternalPolicy: PolicyCluster, ExternalPolicy: PolicyCluster},
			cluster: eps, local: nil, inter: eps, external: eps,
		},
		"external local node port": {
			port:    ServicePort{NodePort: 30000, InternalPolicy: PolicyCluster, ExternalPolicy: PolicyLocal},
			cluster: eps, local: eps[:1], inter: eps, external: eps[:1],
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			s := Service{ServicePort: tc.port, Endpoints: eps}
			same := func(what string, got, want []Endpoint) {
				if len(got) != len(want) || (want == nil) != (got == nil) {
					t.Errorf("%s = %v, want %v", what, got, want)
					return
				}
				for i := range got {
					if got[i] != want[i] {
						t.Errorf("%s = %v, want %v", what, got, want)
					}
				}
			}
			same("ClusterEndpoints", s.ClusterEndpoints(), tc.cluster)
			same("LocalEndpoints", s.LocalEndpoints(), tc.local)
			same("InternalEndpoints", s.InternalEndpoints(), tc.inter)
			same("ExternalEndpoints", s.ExternalEndpoints(), tc.external)
		})
	}
}

func TestLocations(t *testing.T) {
	l := NewLocations()
	svc := types.NamespacedName{Namespace: "ns", Name: "web"}
	s1 := st.EndpointSlice("ns", "web", "web-b", "http", 80, st.Endpoint("10.1.0.1", "n1", st.Zone("z1", false)))
	s2 := st.EndpointSlice("ns", "web", "web-a", "http", 80, st.Endpoint("10.1.0.1", "n2"))
	l.Update(s1, false)
	if n, z := l.Lookup(svc, "10.1.0.1"); n != "n1" || z != "z1" {
		t.Fatalf("Lookup = %q %q", n, z)
	}
	l.Update(s2, false)
	if n, _ := l.Lookup(svc, "10.1.0.1"); n != "n2" {
		t.Fatalf("with the address in two slices the first slice name must win; got %q", n)
	}
	l.Update(s2, true)
	l.Update(s1, true)
	if n, z := l.Lookup(svc, "10.1.0.1"); n != "" || z != "" {
		t.Fatalf("removed slices still answer: %q %q", n, z)
	}
	if len(l.slices) != 0 {
		t.Fatalf("removed slices leak: %v", l.slices)
	}
	l.Update(&discovery.EndpointSlice{}, false) // no service label: ignored, no panic
	l.Update(nil, false)
}
