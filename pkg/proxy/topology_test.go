package proxy

import (
	"slices"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/version"
	featuregatetesting "k8s.io/component-base/featuregate/testing"

	"k8s.io/kube-proxy/pkg/features"
)

func TestCategorizeEndpoints(t *testing.T) {
	zoneA := map[string]string{v1.LabelTopologyZone: "zone-a"}
	none := []string{} // "uses this kind, but has none"
	tests := []struct {
		name          string
		gateOff       bool // PreferSameTrafficDistribution disabled (emulating 1.34)
		nodeName      string
		labels        map[string]string
		svc           *BaseServicePortInfo
		endpoints     []Endpoint
		cluster       []string // nil: service never uses Cluster policy
		local         []string // nil: service never uses Local policy
		all           []string // nil: same as whichever of cluster/local is set
		onlyRemoteAny bool     // hasAnyEndpoints although "all" is empty
	}{
		{
			name:   "zone hints narrow cluster endpoints to the node's zone",
			labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", ""), ep("10.1.2.4:80", "R", "zone-b", ""), ep("10.1.2.5:80", "R", "zone-c", ""), ep("10.1.2.6:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.6:80"},
		},
		{
			name:   "eTP Local ignores topology for local endpoints",
			labels: zoneA, svc: &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.1.2.3:80", "RL", "zone-a", ""), ep("10.1.2.4:80", "RL", "zone-b", ""), ep("10.1.2.5:80", "R", "zone-c", ""), ep("10.1.2.6:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.6:80"},
			local:     []string{"10.1.2.3:80", "10.1.2.4:80"},
			all:       []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
		},
		{
			name:   "iTP Local ignores topology for local endpoints",
			labels: zoneA, svc: &BaseServicePortInfo{internalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.1.2.3:80", "RL", "zone-a", ""), ep("10.1.2.4:80", "RL", "zone-b", ""), ep("10.1.2.5:80", "R", "zone-c", ""), ep("10.1.2.6:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.6:80"},
			local:     []string{"10.1.2.3:80", "10.1.2.4:80"},
			all:       []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
		},
		{
			name: "node without labels: no zone filtering", labels: map[string]string{}, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80"},
		},
		{
			name: "empty zone label: no zone filtering", labels: map[string]string{v1.LabelTopologyZone: ""}, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80"},
		},
		{
			name: "no endpoint hinted for our zone: no filtering", labels: map[string]string{v1.LabelTopologyZone: "zone-b"}, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80"},
		},
		{
			name: "unready endpoint in our zone is dropped", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", ""), ep("10.1.2.4:80", "R", "zone-b", ""), ep("10.1.2.5:80", "R", "zone-c", ""), ep("10.1.2.6:80", "", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80"},
		},
		{
			name: "only unready endpoints in our zone: hints ignored", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "", "zone-a", ""), ep("10.1.2.4:80", "R", "zone-b", ""), ep("10.1.2.5:80", "R", "zone-c", ""), ep("10.1.2.6:80", "", "zone-a", "")},
			cluster:   []string{"10.1.2.4:80", "10.1.2.5:80"},
		},
		{
			name: "one ready endpoint without hints disables zone filtering", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", ""), ep("10.1.2.4:80", "R", "zone-b", ""), ep("10.1.2.5:80", "R", "", ""), ep("10.1.2.6:80", "R", "zone-a", "")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"},
		},
		{
			name: "endpoints with several zone hints match any of them", labels: map[string]string{v1.LabelTopologyZone: "zone-c"}, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a,zone-b,zone-c", ""), ep("10.1.2.4:80", "R", "zone-b,zone-c", ""), ep("10.1.2.5:80", "R", "zone-b,zone-d", ""), ep("10.1.2.6:80", "R", "zone-c", "")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.6:80"},
		},
		{
			name: "node hints ignored when the gate is off: zone hints apply", gateOff: true, nodeName: "node-1", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "node-1"), ep("10.1.2.4:80", "R", "zone-b", "node-2"), ep("10.1.2.5:80", "R", "zone-c", "node-3"), ep("10.1.2.6:80", "R", "zone-a", "node-4")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.6:80"},
		},
		{
			name: "PreferSameNode picks our node's endpoints", nodeName: "node-1", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "node-1"), ep("10.1.2.4:80", "R", "zone-b", "node-2"), ep("10.1.2.5:80", "R", "zone-c", "node-3"), ep("10.1.2.6:80", "R", "zone-a", "node-4")},
			cluster:   []string{"10.1.2.3:80"},
		},
		{
			name: "PreferSameNode ignored when an endpoint lacks hints, and so is zone", nodeName: "node-1", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "node-1"), ep("10.1.2.4:80", "R", "", ""), ep("10.1.2.5:80", "R", "zone-c", "node-3"), ep("10.1.2.6:80", "R", "zone-a", "node-4")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.4:80", "10.1.2.5:80", "10.1.2.6:80"},
		},
		{
			name: "PreferSameNode falls back to zone when no endpoint names our node", nodeName: "node-0", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.1.2.3:80", "R", "zone-a", "node-1"), ep("10.1.2.4:80", "R", "zone-b", "node-2"), ep("10.1.2.5:80", "R", "zone-c", "node-3"), ep("10.1.2.6:80", "R", "zone-a", "node-4")},
			cluster:   []string{"10.1.2.3:80", "10.1.2.6:80"},
		},
		{
			name: "topology and locality disagree: all is the merge", labels: zoneA, svc: &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "zone-a", ""), ep("10.0.0.1:80", "RL", "zone-b", ""), ep("10.0.0.2:80", "R", "zone-a", ""), ep("10.0.0.3:80", "R", "zone-b", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.2:80"},
			local:     []string{"10.0.0.0:80", "10.0.0.1:80"},
			all:       []string{"10.0.0.0:80", "10.0.0.2:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local with no endpoints", svc: &BaseServicePortInfo{internalPolicyLocal: true},
			endpoints: []Endpoint{},
		},
		{
			name: "iTP Local, all endpoints remote", svc: &BaseServicePortInfo{internalPolicyLocal: true},
			endpoints: []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "R", "", "")},
			local:     none, onlyRemoteAny: true,
		},
		{
			name: "iTP Local, all endpoints local", svc: &BaseServicePortInfo{internalPolicyLocal: true},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "", ""), ep("10.0.0.1:80", "RL", "", "")},
			local:     []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local, some endpoints local", svc: &BaseServicePortInfo{internalPolicyLocal: true},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "", ""), ep("10.0.0.1:80", "R", "", "")},
			local:     []string{"10.0.0.0:80"},
		},
		{
			name: "Cluster policy, nothing ready", svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.0.0.0:80", "", "", ""), ep("10.0.0.1:80", "", "", "")},
			cluster:   none,
		},
		{
			name: "Cluster policy, some ready", svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.0.0.0:80", "", "", ""), ep("10.0.0.1:80", "R", "", "")},
			cluster:   []string{"10.0.0.1:80"},
		},
		{
			name: "Cluster policy, all terminating: fall back to serving-terminating", svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.0.0.0:80", "STL", "", ""), ep("10.0.0.1:80", "ST", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local, eTP Cluster, some local", svc: &BaseServicePortInfo{internalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "", ""), ep("10.0.0.1:80", "R", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
			local:     []string{"10.0.0.0:80"},
			all:       []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Cluster, eTP Local, some local", svc: &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "", ""), ep("10.0.0.1:80", "R", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
			local:     []string{"10.0.0.0:80"},
			all:       []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local, eTP Local, some local", svc: &BaseServicePortInfo{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "RL", "", ""), ep("10.0.0.1:80", "R", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
			local:     []string{"10.0.0.0:80"},
			all:       []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local, eTP Local, all remote", svc: &BaseServicePortInfo{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "R", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
			local:     none,
			all:       []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local, eTP Local, all remote and terminating", svc: &BaseServicePortInfo{internalPolicyLocal: true, externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "ST", "", ""), ep("10.0.0.1:80", "ST", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
			local:     none,
			all:       []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Cluster, eTP Local, local endpoint only terminating: local falls back, all merges", svc: &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 8080},
			endpoints: []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "L", "", ""), ep("10.0.0.2:80", "STL", "", ""), ep("10.0.0.3:80", "ST", "", "")},
			cluster:   []string{"10.0.0.0:80"},
			local:     []string{"10.0.0.2:80"},
			all:       []string{"10.0.0.0:80", "10.0.0.2:80"},
		},
		{
			name: "eTP Local is moot when not externally accessible", svc: &BaseServicePortInfo{externalPolicyLocal: true},
			endpoints: []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "RL", "", "")},
			cluster:   []string{"10.0.0.0:80", "10.0.0.1:80"},
		},
		{
			name: "iTP Local internal-only service has no cluster endpoints", svc: &BaseServicePortInfo{internalPolicyLocal: true},
			endpoints: []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "RL", "", "")},
			local:     []string{"10.0.0.1:80"},
		},
		{
			name: "nil endpoints", svc: &BaseServicePortInfo{},
		},
		{
			name: "single endpoint neither ready nor serving nor terminating", labels: zoneA, svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.0.0.0:80", "", "", "")},
			cluster:   none,
		},
		{
			name: "serving but not terminating is not a fallback", svc: &BaseServicePortInfo{},
			endpoints: []Endpoint{ep("10.0.0.0:80", "S", "", ""), ep("10.0.0.1:80", "T", "", "")},
			cluster:   none,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gateOff {
				featuregatetesting.SetFeatureGateEmulationVersionDuringTest(t, features.DefaultFeatureGate, version.MustParse("1.34"))
				featuregatetesting.SetFeatureGateDuringTest(t, features.DefaultFeatureGate, features.PreferSameTrafficDistribution, false)
			}
			cluster, local, all, hasAny := CategorizeEndpoints(tc.endpoints, tc.svc, tc.nodeName, tc.labels)

			check := func(what string, want []string, got []Endpoint) {
				t.Helper()
				gotS := endpointStrings(got)
				if len(want) == 0 {
					if len(gotS) != 0 {
						t.Errorf("%s: want none, got %v", what, gotS)
					}
					return
				}
				if !sameSet(want, gotS) {
					t.Errorf("%s: want %v, got %v", what, want, gotS)
				}
			}
			check("cluster", tc.cluster, cluster)
			check("local", tc.local, local)
			wantAll := tc.all
			if wantAll == nil {
				if len(tc.cluster) > 0 {
					wantAll = tc.cluster
				} else {
					wantAll = tc.local
				}
			}
			check("all", wantAll, all)
			if want := len(wantAll) > 0 || tc.onlyRemoteAny; hasAny != want {
				t.Errorf("hasAnyEndpoints = %v, want %v", hasAny, want)
			}
			if tc.cluster == nil && cluster != nil {
				t.Errorf("cluster: service never uses Cluster policy, want nil, got %v", endpointStrings(cluster))
			}
			if tc.local == nil && local != nil {
				t.Errorf("local: service never uses Local policy, want nil, got %v", endpointStrings(local))
			}
		})
	}
}

func TestCategorizeEndpointsMergeOrderIsDeterministic(t *testing.T) {
	svc := &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 8080}
	eps := []Endpoint{ep("10.0.0.0:80", "R", "", ""), ep("10.0.0.1:80", "L", "", ""), ep("10.0.0.2:80", "STL", "", ""), ep("10.0.0.3:80", "R", "", "")}
	_, _, first, _ := CategorizeEndpoints(eps, svc, "", nil)
	for range 20 {
		_, _, again, _ := CategorizeEndpoints(eps, svc, "", nil)
		if !slices.Equal(endpointStrings(first), endpointStrings(again)) {
			t.Fatalf("merge order changed: %v vs %v", endpointStrings(first), endpointStrings(again))
		}
	}
	if want := []string{"10.0.0.0:80", "10.0.0.3:80", "10.0.0.2:80"}; !slices.Equal(endpointStrings(first), want) {
		t.Errorf("got %v, want cluster endpoints first then local: %v", endpointStrings(first), want)
	}
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.Sort(x)
	slices.Sort(y)
	return slices.Equal(x, y)
}

func TestTrafficPolicyUnchanged(t *testing.T) {
	a := &BaseEndpointInfo{}
	b := &BaseEndpointInfo{}
	base := func() *TrafficPolicy {
		return &TrafficPolicy{ClusterEndpoints: []Endpoint{a, b}, ReachableEndpoints: []Endpoint{a, b}, HasEndpoints: true, UsesClusterEndpoints: true}
	}
	// valueEndpoint is an endpoint implementation that is not a pointer: never taken
	// as unchanged, since it could not be compared safely.
	type valueEndpoint struct{ *BaseEndpointInfo }
	for _, tc := range []struct {
		name   string
		mutate func(*TrafficPolicy)
		want   bool
	}{
		{"same values", func(*TrafficPolicy) {}, true},
		{"an endpoint replaced by an equal copy", func(tp *TrafficPolicy) {
			c := *b
			tp.ClusterEndpoints = []Endpoint{a, &c}
		}, false},
		{"one endpoint fewer", func(tp *TrafficPolicy) { tp.ReachableEndpoints = []Endpoint{a} }, false},
		{"order changed", func(tp *TrafficPolicy) { tp.ClusterEndpoints = []Endpoint{b, a} }, false},
		{"decision changed", func(tp *TrafficPolicy) { tp.External = Drop }, false},
		{"policy changed", func(tp *TrafficPolicy) { tp.InternalLocal = true }, false},
		{"non-pointer endpoint type", func(tp *TrafficPolicy) { tp.LocalEndpoints = []Endpoint{valueEndpoint{a}} }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, cur := base(), base()
			if tc.name == "non-pointer endpoint type" {
				old.LocalEndpoints = []Endpoint{valueEndpoint{a}}
			}
			tc.mutate(cur)
			if got := cur.Unchanged(old); got != tc.want {
				t.Errorf("Unchanged = %v, want %v", got, tc.want)
			}
		})
	}
	var nilTP *TrafficPolicy
	if nilTP.Unchanged(base()) || !nilTP.Unchanged(nil) {
		t.Error("nil policies: only nil is unchanged from nil")
	}
}
