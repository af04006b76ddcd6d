package proxy

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"
)

const testNode = "host1"

// slice builds an IPv4 EndpointSlice for service ns/svc. Each endpoint spec
// is "ip" plus optional flags after a slash: L local, U not ready, T
// terminating (and not ready), N not serving. Ports are name:port/proto.
func slice(ns, svcName, sliceName string, endpoints []string, ports ...string) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: sliceName,
			Labels: map[string]string{discovery.LabelServiceName: svcName},
		},
		AddressType: discovery.AddressTypeIPv4,
	}
	for _, spec := range endpoints {
		addr, flags, _ := cutLast(spec, "/")
		e := discovery.Endpoint{Addresses: []string{addr}}
		if containsAny(flags, "L") {
			e.NodeName = ptr.To(testNode)
		} else {
			e.NodeName = ptr.To("other")
		}
		if containsAny(flags, "UT") {
			e.Conditions.Ready = ptr.To(false)
		}
		if containsAny(flags, "T") {
			e.Conditions.Terminating = ptr.To(true)
		}
		if containsAny(flags, "N") {
			e.Conditions.Serving = ptr.To(false)
		}
		if containsAny(flags, "6") {
			s.AddressType = discovery.AddressTypeIPv6
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	for _, p := range ports {
		var name, proto string
		var num int32
		if _, err := fmt.Sscanf(replaceSep(p), "%s %d %s", &name, &num, &proto); err != nil {
			panic(p)
		}
		if name == "-" {
			name = ""
		}
		s.Ports = append(s.Ports, discovery.EndpointPort{Name: ptr.To(name), Port: ptr.To(num), Protocol: ptr.To(v1.Protocol(proto))})
	}
	return s
}

func cutLast(s, sep string) (string, string, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if string(s[i]) == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

func containsAny(s, chars string) bool {
	for _, c := range chars {
		for _, d := range s {
			if c == d {
				return true
			}
		}
	}
	return false
}

func replaceSep(p string) string {
	out := []byte(p)
	for i := range out {
		if out[i] == ':' || out[i] == '/' {
			out[i] = ' '
		}
	}
	return string(out)
}

// emView is a comparable view of an EndpointsMap: per port, "ip:port" with
// a suffix for non-default state (L local, !R not ready, S/T serving/terminating).
func emView(em EndpointsMap) map[string][]string {
	out := map[string][]string{}
	for k, eps := range em {
		key := k.String() + "/" + string(k.Protocol)
		for _, e := range eps {
			s := e.String()
			if e.IsLocal() {
				s += " L"
			}
			if !e.IsReady() {
				s += " !R"
			}
			if e.IsTerminating() {
				s += " T"
			}
			if !e.IsServing() {
				s += " !S"
			}
			out[key] = append(out[key], s)
		}
	}
	return out
}

func nn(ns, name string) types.NamespacedName { return types.NamespacedName{Namespace: ns, Name: name} }

func TestUpdateEndpointsMap(t *testing.T) {
	tests := []struct {
		name        string
		previous    []*discovery.EndpointSlice
		current     []*discovery.EndpointSlice
		wantBefore  map[string][]string
		wantAfter   map[string][]string
		wantUpdated []types.NamespacedName
		wantCT      bool
		wantLocal   map[types.NamespacedName]int
	}{
		{name: "empty", wantBefore: map[string][]string{}, wantAfter: map[string][]string{}, wantLocal: map[types.NamespacedName]int{}},
		{
			name:       "no change, unnamed port",
			previous:   []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "-:11/UDP")},
			current:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "-:11/UDP")},
			wantBefore: map[string][]string{"ns1/ep1/UDP": {"1.1.1.1:11"}},
			wantAfter:  map[string][]string{"ns1/ep1/UDP": {"1.1.1.1:11"}},
			wantLocal:  map[types.NamespacedName]int{},
		},
		{
			name:       "no change, named port, local",
			previous:   []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1/L"}, "p11:11/UDP")},
			current:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1/L"}, "p11:11/UDP")},
			wantBefore: map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11 L"}},
			wantAfter:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11 L"}},
			wantLocal:  map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name: "no change, multiple slices and ports",
			previous: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1/L", "1.1.1.2"}, "p11:11/UDP", "p12:12/UDP"),
				slice("ns1", "ep1", "s2", []string{"1.1.1.3"}, "p13:13/UDP"),
			},
			current: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1/L", "1.1.1.2"}, "p11:11/UDP", "p12:12/UDP"),
				slice("ns1", "ep1", "s2", []string{"1.1.1.3"}, "p13:13/UDP"),
			},
			wantBefore: map[string][]string{
				"ns1/ep1:p11/UDP": {"1.1.1.1:11 L", "1.1.1.2:11"},
				"ns1/ep1:p12/UDP": {"1.1.1.1:12 L", "1.1.1.2:12"},
				"ns1/ep1:p13/UDP": {"1.1.1.3:13"},
			},
			wantAfter: map[string][]string{
				"ns1/ep1:p11/UDP": {"1.1.1.1:11 L", "1.1.1.2:11"},
				"ns1/ep1:p12/UDP": {"1.1.1.1:12 L", "1.1.1.2:12"},
				"ns1/ep1:p13/UDP": {"1.1.1.3:13"},
			},
			wantLocal: map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "add a slice",
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1/L"}, "p11:11/UDP")},
			wantBefore:  map[string][]string{},
			wantAfter:   map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "remove a slice",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1/L"}, "p11:11/UDP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11 L"}},
			wantAfter:   map[string][]string{},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name:        "add an IP and a port (TCP: no conntrack cleanup)",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/TCP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1", "1.1.1.2/L"}, "p11:11/TCP", "p12:12/TCP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/TCP": {"1.1.1.1:11"}},
			wantAfter:   map[string][]string{"ns1/ep1:p11/TCP": {"1.1.1.1:11", "1.1.1.2:11 L"}, "ns1/ep1:p12/TCP": {"1.1.1.1:12", "1.1.1.2:12 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "remove an IP and a port",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1", "1.1.1.2/L"}, "p11:11/UDP", "p12:12/UDP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11", "1.1.1.2:11 L"}, "ns1/ep1:p12/UDP": {"1.1.1.1:12", "1.1.1.2:12 L"}},
			wantAfter:   map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name:        "add a second slice to a service",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP"), slice("ns1", "ep1", "s2", []string{"1.1.1.2/L"}, "p12:12/UDP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11"}},
			wantAfter:   map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11"}, "ns1/ep1:p12/UDP": {"1.1.1.2:12 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "rename a port",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11-2:11/UDP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11"}},
			wantAfter:   map[string][]string{"ns1/ep1:p11-2/UDP": {"1.1.1.1:11"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name:        "renumber a port",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:22/UDP")},
			wantBefore:  map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:11"}},
			wantAfter:   map[string][]string{"ns1/ep1:p11/UDP": {"1.1.1.1:22"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name: "complex add and remove across services",
			previous: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p11:11/UDP"),
				slice("ns2", "ep2", "s1", []string{"2.2.2.2", "2.2.2.22/L"}, "p22:22/UDP"),
				slice("ns3", "ep3", "s1", []string{"3.3.3.3"}, "p33:33/TCP"),
				slice("ns4", "ep4", "s1", []string{"4.4.4.4/L"}, "p44:44/TCP"),
			},
			current: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1", "1.1.1.11/L"}, "p11:11/UDP"),
				slice("ns3", "ep3", "s1", []string{"3.3.3.3"}, "p33:33/TCP"),
				slice("ns4", "ep4", "s1", []string{"4.4.4.4/L"}, "p44:44/TCP"),
				slice("ns4", "ep4", "s2", []string{"4.4.4.5/L"}, "p45:45/TCP"),
			},
			wantBefore: map[string][]string{
				"ns1/ep1:p11/UDP": {"1.1.1.1:11"},
				"ns2/ep2:p22/UDP": {"2.2.2.22:22 L", "2.2.2.2:22"},
				"ns3/ep3:p33/TCP": {"3.3.3.3:33"},
				"ns4/ep4:p44/TCP": {"4.4.4.4:44 L"},
			},
			wantAfter: map[string][]string{
				"ns1/ep1:p11/UDP": {"1.1.1.11:11 L", "1.1.1.1:11"},
				"ns3/ep3:p33/TCP": {"3.3.3.3:33"},
				"ns4/ep4:p44/TCP": {"4.4.4.4:44 L"},
				"ns4/ep4:p45/TCP": {"4.4.4.5:45 L"},
			},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1"), nn("ns2", "ep2"), nn("ns4", "ep4")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1, nn("ns4", "ep4"): 2},
		},
		{
			name:        "from no addresses to one",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", nil, "-:11/UDP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "-:11/UDP")},
			wantBefore:  map[string][]string{},
			wantAfter:   map[string][]string{"ns1/ep1/UDP": {"1.1.1.1:11"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantCT:      true,
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name:        "ready to terminating: local ready count drops",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"10.0.1.1/L", "10.0.1.2/L"}, "-:80/TCP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"10.0.1.1/L", "10.0.1.2/LT"}, "-:80/TCP")},
			wantBefore:  map[string][]string{"ns1/ep1/TCP": {"10.0.1.1:80 L", "10.0.1.2:80 L"}},
			wantAfter:   map[string][]string{"ns1/ep1/TCP": {"10.0.1.1:80 L", "10.0.1.2:80 L !R T"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "terminating to gone",
			previous:    []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"10.0.1.1/L", "10.0.1.2/LTN"}, "-:80/TCP")},
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s1", []string{"10.0.1.1/L"}, "-:80/TCP")},
			wantBefore:  map[string][]string{"ns1/ep1/TCP": {"10.0.1.1:80 L", "10.0.1.2:80 L !R T !S"}},
			wantAfter:   map[string][]string{"ns1/ep1/TCP": {"10.0.1.1:80 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name: "endpoint moved between slices is not lost",
			previous: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1", "1.1.1.2"}, "p:80/TCP"),
				slice("ns1", "ep1", "s2", []string{"1.1.1.3"}, "p:80/TCP"),
			},
			current: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "s1", []string{"1.1.1.1"}, "p:80/TCP"),
				slice("ns1", "ep1", "s2", []string{"1.1.1.2", "1.1.1.3"}, "p:80/TCP"),
			},
			wantBefore:  map[string][]string{"ns1/ep1:p/TCP": {"1.1.1.1:80", "1.1.1.2:80", "1.1.1.3:80"}},
			wantAfter:   map[string][]string{"ns1/ep1:p/TCP": {"1.1.1.1:80", "1.1.1.2:80", "1.1.1.3:80"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{},
		},
		{
			name: "same IP in two slices: the non-terminating one wins",
			current: []*discovery.EndpointSlice{
				slice("ns1", "ep1", "a", []string{"1.1.1.1/T"}, "p:80/TCP"),
				slice("ns1", "ep1", "b", []string{"1.1.1.1/L"}, "p:80/TCP"),
			},
			wantBefore:  map[string][]string{},
			wantAfter:   map[string][]string{"ns1/ep1:p/TCP": {"1.1.1.1:80 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
		{
			name:        "two ports of one local pod count once",
			current:     []*discovery.EndpointSlice{slice("ns1", "ep1", "s", []string{"1.1.1.1/L"}, "a:80/TCP", "b:443/TCP")},
			wantBefore:  map[string][]string{},
			wantAfter:   map[string][]string{"ns1/ep1:a/TCP": {"1.1.1.1:80 L"}, "ns1/ep1:b/TCP": {"1.1.1.1:443 L"}},
			wantUpdated: []types.NamespacedName{nn("ns1", "ep1")},
			wantLocal:   map[types.NamespacedName]int{nn("ns1", "ep1"): 1},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
			em := EndpointsMap{}
			for _, s := range tc.previous {
				ect.EndpointSliceUpdate(s, false)
			}
			em.Update(ect)
			if diff := cmp.Diff(tc.wantBefore, emView(em)); diff != "" {
				t.Fatalf("initial state (-want +got):\n%s", diff)
			}

			// Apply the new state: update/add every current slice, delete
			// previous slices no longer present.
			present := sets.New[string]()
			for _, s := range tc.current {
				ect.EndpointSliceUpdate(s, false)
				present.Insert(s.Namespace + "/" + s.Name + "/" + s.Labels[discovery.LabelServiceName])
			}
			for _, s := range tc.previous {
				if !present.Has(s.Namespace + "/" + s.Name + "/" + s.Labels[discovery.LabelServiceName]) {
					ect.EndpointSliceUpdate(s, true)
				}
			}
			res := em.Update(ect)
			if diff := cmp.Diff(tc.wantAfter, emView(em)); diff != "" {
				t.Errorf("final state (-want +got):\n%s", diff)
			}
			if got, want := res.UpdatedServices, sets.New(tc.wantUpdated...); !got.Equal(want) {
				t.Errorf("UpdatedServices = %v, want %v", got.UnsortedList(), want.UnsortedList())
			}
			if res.ConntrackCleanupRequired != tc.wantCT {
				t.Errorf("ConntrackCleanupRequired = %v, want %v", res.ConntrackCleanupRequired, tc.wantCT)
			}
			if diff := cmp.Diff(tc.wantLocal, em.LocalReadyEndpoints()); diff != "" {
				t.Errorf("LocalReadyEndpoints (-want +got):\n%s", diff)
			}
			for k, eps := range em {
				if !slices.IsSortedFunc(eps, func(a, b Endpoint) int { return cmpString(a.String(), b.String()) }) {
					t.Errorf("%s: endpoints not sorted: %v", k, endpointStrings(eps))
				}
			}
		})
	}
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func TestEndpointSliceUpdateReturnValue(t *testing.T) {
	s1 := slice("ns1", "svc1", "s1", []string{"10.0.1.1", "10.0.1.2"}, "p:80/TCP")
	s1changed := slice("ns1", "svc1", "s1", []string{"10.0.1.1"}, "p:80/TCP")
	s1v6 := slice("ns1", "svc1", "s1v6", []string{"fd00::1/6"}, "p:80/TCP")
	noLabel := s1.DeepCopy()
	noLabel.Labels = nil
	noNamespace := s1.DeepCopy()
	noNamespace.Namespace = ""

	type step struct {
		slice  *discovery.EndpointSlice
		remove bool
		want   bool
	}
	tests := []struct {
		name        string
		steps       []step
		sync        bool // Update between the first step and the rest
		wantUpdated int
	}{
		{name: "add", steps: []step{{s1, false, true}}, wantUpdated: 1},
		{name: "add twice", steps: []step{{s1, false, true}, {s1.DeepCopy(), false, false}}, wantUpdated: 1},
		{name: "add, sync, same again", steps: []step{{s1, false, true}, {s1.DeepCopy(), false, false}}, sync: true},
		{name: "add, sync, change", steps: []step{{s1, false, true}, {s1changed, false, true}}, sync: true, wantUpdated: 1},
		{name: "add, sync, remove", steps: []step{{s1, false, true}, {s1, true, true}}, sync: true, wantUpdated: 1},
		{name: "remove unknown", steps: []step{{s1, true, false}}},
		{name: "add then remove before sync", steps: []step{{s1, false, true}, {s1, true, true}}, wantUpdated: 1},
		{name: "remove twice", steps: []step{{s1, false, true}, {s1, true, true}, {s1, true, false}}, sync: true, wantUpdated: 1},
		{name: "other address type ignored", steps: []step{{s1v6, false, false}}},
		{name: "missing service label ignored", steps: []step{{noLabel, false, false}}},
		{name: "missing namespace ignored", steps: []step{{noNamespace, false, false}}},
		{name: "nil slice ignored", steps: []step{{nil, false, false}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
			em := EndpointsMap{}
			for i, s := range tc.steps {
				if got := ect.EndpointSliceUpdate(s.slice, s.remove); got != s.want {
					t.Errorf("step %d: EndpointSliceUpdate = %v, want %v", i, got, s.want)
				}
				if i == 0 && tc.sync {
					em.Update(ect)
				}
			}
			if got := em.Update(ect).UpdatedServices.Len(); got != tc.wantUpdated {
				t.Errorf("UpdatedServices has %d entries, want %d", got, tc.wantUpdated)
			}
		})
	}
}

func TestEndpointSliceCacheClearedCorrectly(t *testing.T) {
	tests := []struct {
		name   string
		slices []*discovery.EndpointSlice
	}{
		{name: "one slice", slices: []*discovery.EndpointSlice{slice("ns1", "svc1", "s1", []string{"1.1.1.1"}, "p:80/TCP")}},
		{name: "two slices, two services, same namespace", slices: []*discovery.EndpointSlice{
			slice("ns1", "svc1", "s1", []string{"1.1.1.1"}, "p:80/TCP"), slice("ns1", "svc2", "s2", []string{"1.1.1.2"}, "p:80/TCP")}},
		{name: "two slices, one service", slices: []*discovery.EndpointSlice{
			slice("ns1", "svc1", "s1", []string{"1.1.1.1"}, "p:80/TCP"), slice("ns1", "svc1", "s2", []string{"1.1.1.2"}, "p:80/TCP")}},
		{name: "two slices, different namespaces", slices: []*discovery.EndpointSlice{
			slice("ns1", "svc1", "s1", []string{"1.1.1.1"}, "p:80/TCP"), slice("ns2", "svc1", "s1", []string{"1.1.1.2"}, "p:80/TCP")}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
			em := EndpointsMap{}
			for _, s := range tc.slices {
				ect.EndpointSliceUpdate(s, false)
			}
			em.Update(ect)
			for _, s := range tc.slices {
				ect.EndpointSliceUpdate(s, true)
			}
			em.Update(ect)
			if n := len(ect.endpointSliceCache.trackerByServiceMap); n != 0 {
				t.Errorf("cache still tracks %d services after every slice was deleted", n)
			}
			if len(em) != 0 {
				t.Errorf("endpoints map not empty: %v", emView(em))
			}
		})
	}
}

func TestMalformedEndpointSlices(t *testing.T) {
	good := func() *discovery.EndpointSlice {
		return slice("ns", "svc", "s", []string{"10.0.0.1"}, "p:80/TCP")
	}
	tests := []struct {
		name   string
		mutate func(*discovery.EndpointSlice)
		want   map[string][]string
	}{
		{name: "nil port name", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Name = nil }, want: map[string][]string{}},
		{name: "nil port number", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Port = nil }, want: map[string][]string{}},
		{name: "zero port", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](0) }, want: map[string][]string{}},
		{name: "port out of range", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Port = ptr.To[int32](70000) }, want: map[string][]string{}},
		{name: "nil protocol", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Protocol = nil }, want: map[string][]string{}},
		{name: "unknown protocol", mutate: func(s *discovery.EndpointSlice) { s.Ports[0].Protocol = ptr.To(v1.Protocol("ICMP")) }, want: map[string][]string{}},
		{name: "endpoint without addresses", mutate: func(s *discovery.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{})
		}, want: map[string][]string{"ns/svc:p/TCP": {"10.0.0.1:80"}}},
		{name: "invalid address", mutate: func(s *discovery.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{"bogus"}}, discovery.Endpoint{Addresses: []string{""}})
		}, want: map[string][]string{"ns/svc:p/TCP": {"10.0.0.1:80"}}},
		{name: "address of the wrong family", mutate: func(s *discovery.EndpointSlice) {
			s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{"fd00::1"}})
		}, want: map[string][]string{"ns/svc:p/TCP": {"10.0.0.1:80"}}},
		{name: "sloppy address is normalised", mutate: func(s *discovery.EndpointSlice) {
			s.Endpoints[0].Addresses[0] = "010.000.000.001"
		}, want: map[string][]string{"ns/svc:p/TCP": {"10.0.0.1:80"}}},
		{name: "duplicate ports merge", mutate: func(s *discovery.EndpointSlice) {
			s.Ports = append(s.Ports, s.Ports[0])
		}, want: map[string][]string{"ns/svc:p/TCP": {"10.0.0.1:80"}}},
		{name: "no ports", mutate: func(s *discovery.EndpointSlice) { s.Ports = nil }, want: map[string][]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := good()
			tc.mutate(s)
			ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
			em := EndpointsMap{}
			ect.EndpointSliceUpdate(s, false)
			em.Update(ect)
			if diff := cmp.Diff(tc.want, emView(em)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestEndpointHints(t *testing.T) {
	s := slice("ns", "svc", "s", []string{"10.0.0.1", "10.0.0.2"}, "p:80/TCP")
	s.Endpoints[0].Hints = &discovery.EndpointHints{ForZones: []discovery.ForZone{{Name: "a"}, {Name: "b"}}, ForNodes: []discovery.ForNode{{Name: "n1"}}}
	ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
	em := EndpointsMap{}
	ect.EndpointSliceUpdate(s, false)
	em.Update(ect)
	eps := em[spn("ns", "svc", "p", v1.ProtocolTCP)]
	if len(eps) != 2 {
		t.Fatalf("want 2 endpoints, got %v", endpointStrings(eps))
	}
	if !eps[0].ZoneHints().Equal(sets.New("a", "b")) || !eps[0].NodeHints().Equal(sets.New("n1")) {
		t.Errorf("hints = %v / %v", eps[0].ZoneHints(), eps[0].NodeHints())
	}
	if eps[1].ZoneHints().Len() != 0 || eps[1].NodeHints().Len() != 0 {
		t.Errorf("unhinted endpoint has hints %v / %v", eps[1].ZoneHints(), eps[1].NodeHints())
	}
}

func TestIPv6Endpoints(t *testing.T) {
	s := slice("ns", "svc", "s", []string{"fd00::1/6L"}, "p:80/UDP")
	ect := NewEndpointsChangeTracker(v1.IPv6Protocol, testNode, nil, nil)
	em := EndpointsMap{}
	if !ect.EndpointSliceUpdate(s, false) {
		t.Fatal("IPv6 tracker ignored an IPv6 slice")
	}
	em.Update(ect)
	want := map[string][]string{"ns/svc:p/UDP": {"[fd00::1]:80 L"}}
	if diff := cmp.Diff(want, emView(em)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if ep := em[spn("ns", "svc", "p", v1.ProtocolUDP)][0]; ep.IP() != "fd00::1" || ep.Port() != 80 {
		t.Errorf("IP/Port = %s/%d", ep.IP(), ep.Port())
	}
}

func TestLastChangeTriggerTime(t *testing.T) {
	start := time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)
	tBefore := start.Add(-time.Second)
	t0 := start.Add(time.Second)
	t1 := t0.Add(time.Second)
	t2 := t1.Add(time.Second)

	withTime := func(s *discovery.EndpointSlice, tm time.Time) *discovery.EndpointSlice {
		s = s.DeepCopy()
		s.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: tm.Format(time.RFC3339Nano)}
		return s
	}
	ep1 := slice("ns", "ep1", "ep1", []string{"1.1.1.1"}, "p11:11/TCP")
	ep1b := slice("ns", "ep1", "ep1", []string{"1.1.1.1"}, "p11:12/TCP")
	ep2 := slice("ns", "ep2", "ep2", []string{"1.1.1.2"}, "p11:11/TCP")
	malformed := ep1.DeepCopy()
	malformed.Annotations = map[string]string{v1.EndpointsLastChangeTriggerTime: "yesterday"}

	type op struct {
		s      *discovery.EndpointSlice
		remove bool
	}
	tests := []struct {
		name    string
		presync []op
		ops     []op
		want    map[types.NamespacedName][]time.Time
	}{
		{name: "single add", ops: []op{{withTime(ep1, t0), false}}, want: map[types.NamespacedName][]time.Time{nn("ns", "ep1"): {t0}}},
		{name: "add then update", ops: []op{{withTime(ep1, t0), false}, {withTime(ep1b, t1), false}}, want: map[types.NamespacedName][]time.Time{nn("ns", "ep1"): {t0, t1}}},
		{name: "two services, one updated", ops: []op{{withTime(ep1, t0), false}, {withTime(ep2, t1), false}, {withTime(ep1b, t2), false}},
			want: map[types.NamespacedName][]time.Time{nn("ns", "ep1"): {t0, t2}, nn("ns", "ep2"): {t1}}},
		{name: "no annotation", ops: []op{{ep1, false}}, want: map[types.NamespacedName][]time.Time{}},
		{name: "malformed annotation", ops: []op{{malformed, false}}, want: map[types.NamespacedName][]time.Time{}},
		{name: "changed before the tracker started", ops: []op{{withTime(ep1, tBefore), false}}, want: map[types.NamespacedName][]time.Time{}},
		{name: "add then delete", ops: []op{{withTime(ep1, t0), false}, {withTime(ep1, t0), true}}, want: map[types.NamespacedName][]time.Time{}},
		{name: "add, delete, add again", ops: []op{{withTime(ep1, t0), false}, {withTime(ep1, t0), true}, {withTime(ep1b, t1), false}},
			want: map[types.NamespacedName][]time.Time{nn("ns", "ep1"): {t1}}},
		{name: "delete of a synced slice", presync: []op{{withTime(ep1, t0), false}}, ops: []op{{withTime(ep1, t1), true}}, want: map[types.NamespacedName][]time.Time{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
			ect.trackerStartTime = start
			em := EndpointsMap{}
			for _, o := range tc.presync {
				ect.EndpointSliceUpdate(o.s, o.remove)
			}
			em.Update(ect)
			for _, o := range tc.ops {
				ect.EndpointSliceUpdate(o.s, o.remove)
			}
			got := em.Update(ect).LastChangeTriggerTimes
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestProcessEndpointsMapChangeAndMakeEndpoint(t *testing.T) {
	type call struct{ before, after int }
	var calls []call
	var made []string
	ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode,
		func(info *BaseEndpointInfo, p *ServicePortName) Endpoint {
			made = append(made, p.String()+"@"+info.String())
			return info
		},
		func(oldM, newM EndpointsMap) { calls = append(calls, call{len(oldM), len(newM)}) })
	em := EndpointsMap{}
	s := slice("ns", "svc", "s", []string{"1.1.1.1"}, "p:80/TCP")
	ect.EndpointSliceUpdate(s, false)
	em.Update(ect)
	ect.EndpointSliceUpdate(s, true)
	em.Update(ect)
	if want := []call{{0, 1}, {1, 0}}; !slices.Equal(calls, want) {
		t.Errorf("callback calls = %v, want %v", calls, want)
	}
	if want := []string{"ns/svc:p@1.1.1.1:80"}; !slices.Equal(made, want) {
		t.Errorf("makeEndpointInfo calls = %v, want %v (each state converted once)", made, want)
	}
}

func TestMakeEndpointInfoDeclines(t *testing.T) {
	// A proxier's callback may return nil for endpoints it cannot handle;
	// they are then absent, and consumers never meet nil.
	ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode,
		func(info *BaseEndpointInfo, _ *ServicePortName) Endpoint {
			if info.IP() == "1.1.1.2" {
				return nil
			}
			return info
		}, nil)
	em := EndpointsMap{}
	ect.EndpointSliceUpdate(slice("ns", "svc", "s", []string{"1.1.1.1/L", "1.1.1.2/L"}, "p:80/TCP"), false)
	em.Update(ect)
	want := map[string][]string{"ns/svc:p/TCP": {"1.1.1.1:80 L"}}
	if diff := cmp.Diff(want, emView(em)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Entries a third party put in the map itself are tolerated too.
	em[ServicePortName{NamespacedName: nn("ns", "other"), Port: "p", Protocol: v1.ProtocolTCP}] = []Endpoint{nil}
	if got, want := em.LocalReadyEndpoints(), map[types.NamespacedName]int{nn("ns", "svc"): 1}; !maps.Equal(got, want) {
		t.Errorf("LocalReadyEndpoints = %v, want %v", got, want)
	}
}

func TestEndpointsMapUpdateNilTracker(t *testing.T) {
	em := EndpointsMap{}
	res := em.Update(nil)
	if res.UpdatedServices == nil || res.LastChangeTriggerTimes == nil || res.ConntrackCleanupRequired {
		t.Errorf("unexpected result for nil tracker: %+v", res)
	}
}

func TestNewBaseEndpointInfoFromAddr(t *testing.T) {
	tests := []struct {
		in       string
		ok       bool
		ip, full string
	}{
		{"10.0.0.1", true, "10.0.0.1", "10.0.0.1:8080"},
		{"010.000.000.001", true, "10.0.0.1", "10.0.0.1:8080"},
		{"::ffff:10.0.0.1", true, "10.0.0.1", "10.0.0.1:8080"},
		{"FD00:0::1", true, "fd00::1", "[fd00::1]:8080"},
		{"fe80::1%eth0", false, "", ""},
		{"", false, "", ""},
		{"1.2.3", false, "", ""},
	}
	for _, tc := range tests {
		addr, ok := parseEndpointIP(tc.in)
		if ok != tc.ok {
			t.Errorf("parseEndpointIP(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			continue
		}
		if !ok {
			continue
		}
		info := newBaseEndpointInfoFromAddr(addr, 8080, false, true, true, false, nil, nil)
		legacy := newBaseEndpointInfo(tc.ip, 8080, false, true, true, false, nil, nil)
		if info.IP() != tc.ip || info.String() != tc.full || !reflect.DeepEqual(info, legacy) {
			t.Errorf("%q: got %q / %q, want %q / %q", tc.in, info.IP(), info.String(), tc.ip, tc.full)
		}
	}
}

func TestEndpointsTrackerConcurrent(t *testing.T) {
	// Informer handlers and the sync loop run on different goroutines; the
	// tracker must serialise them (run with -race) and lose nothing.
	ect := NewEndpointsChangeTracker(v1.IPv4Protocol, testNode, nil, nil)
	em := EndpointsMap{}
	const writers, updates = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range updates {
				ip := fmt.Sprintf("10.%d.%d.1", w, i)
				ect.EndpointSliceUpdate(slice("ns", fmt.Sprintf("svc%d", w), "s", []string{ip + "/L"}, "p:80/UDP"), false)
			}
		}()
	}
	done := make(chan struct{})
	var cleanup bool
	go func() {
		defer close(done)
		for range 20 {
			if res := em.Update(ect); res.ConntrackCleanupRequired {
				cleanup = true
			}
			_ = em.LocalReadyEndpoints()
		}
	}()
	wg.Wait()
	<-done
	if res := em.Update(ect); res.ConntrackCleanupRequired {
		cleanup = true
	}
	if !cleanup {
		t.Error("UDP endpoint changes never asked for conntrack cleanup")
	}
	want := map[string][]string{}
	for w := range writers {
		want[fmt.Sprintf("ns/svc%d:p/UDP", w)] = []string{fmt.Sprintf("10.%d.%d.1:80 L", w, updates-1)}
	}
	if diff := cmp.Diff(want, emView(em)); diff != "" {
		t.Errorf("final endpoints (-want +got):\n%s", diff)
	}
	if n := len(ect.endpointSliceCache.pendingServices); n != 0 {
		t.Errorf("%d services still pending after the final update", n)
	}
}
