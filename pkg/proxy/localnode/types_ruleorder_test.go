package localnode

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

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
