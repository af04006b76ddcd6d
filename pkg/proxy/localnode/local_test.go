package localnode

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestLocalVersusForLocal pins down what the Endpoint docs say: Local is where an
// endpoint runs, ForLocal whether Local-policy traffic may use it.
func TestLocalVersusForLocal(t *testing.T) {
	type flags struct{ Local, ForCluster, ForLocal bool }
	tests := []struct {
		name string
		svc  *v1.Service
		eps  []discovery.Endpoint
		want map[string]flags // by address
	}{
		{
			name: "Cluster policy only: a local endpoint is Local but not ForLocal",
			svc:  st.Service("ns", "web", []string{"10.0.0.10"}),
			eps:  []discovery.Endpoint{st.Endpoint("10.1.0.1", thisNode), st.Endpoint("10.1.0.2", "node-b")},
			want: map[string]flags{
				"10.1.0.1:8080": {Local: true, ForCluster: true},
				"10.1.0.2:8080": {ForCluster: true},
			},
		},
		{
			name: "internal Local: only local ready endpoints are ForLocal; the rest are not listed",
			svc:  st.Service("ns", "web", []string{"10.0.0.10"}, st.InternalLocal()),
			eps: []discovery.Endpoint{st.Endpoint("10.1.0.1", thisNode), st.Endpoint("10.1.0.3", thisNode, st.NotReady()),
				st.Endpoint("10.1.0.2", "node-b")},
			want: map[string]flags{
				"10.1.0.1:8080": {Local: true, ForLocal: true},
			},
		},
		{
			name: "external Local: cluster IP traffic uses every node, node ports only this one",
			svc:  st.Service("ns", "web", []string{"10.0.0.10"}, st.LoadBalancer(30000, "192.0.2.1"), st.ExternalLocal(32000)),
			eps:  []discovery.Endpoint{st.Endpoint("10.1.0.1", thisNode), st.Endpoint("10.1.0.2", "node-b")},
			want: map[string]flags{
				"10.1.0.1:8080": {Local: true, ForCluster: true, ForLocal: true},
				"10.1.0.2:8080": {ForCluster: true},
			},
		},
		{
			name: "Local policy falls back to a serving terminating local endpoint",
			svc:  st.Service("ns", "web", []string{"10.0.0.10"}, st.InternalLocal()),
			eps:  []discovery.Endpoint{st.Endpoint("10.1.0.1", thisNode, st.Terminating(true)), st.Endpoint("10.1.0.2", "node-b")},
			want: map[string]flags{
				"10.1.0.1:8080": {Local: true, ForLocal: true},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sm, em := brainMaps(t, v1.IPv4Protocol, []*v1.Service{tc.svc},
				[]*discovery.EndpointSlice{st.EndpointSlice("ns", "web", "web-1", "http", 8080, tc.eps...)})
			state := Compute(context.Background(), IPv4, sm, em, thisNode, nil)
			if len(state.Services) != 1 {
				t.Fatalf("got %d services", len(state.Services))
			}
			got := map[string]flags{}
			for _, e := range state.Services[0].Endpoints {
				got[e.String()] = flags{Local: e.Local, ForCluster: e.ForCluster, ForLocal: e.ForLocal}
				if e.ForLocal && !e.Local {
					t.Errorf("%s: ForLocal without Local", e)
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("endpoint flags (-want +got):\n%s", diff)
			}
		})
	}
}
