package proxy

import (
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const (
	benchServices  = 10000
	benchEndpoints = 10
)

func benchService(i int) *v1.Service {
	return &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("svc-%d", i)},
		Spec: v1.ServiceSpec{
			Type:      v1.ServiceTypeClusterIP,
			ClusterIP: fmt.Sprintf("172.%d.%d.%d", 16+i>>16, (i>>8)&0xff, i&0xff),
			Ports:     []v1.ServicePort{{Name: "http", Protocol: v1.ProtocolTCP, Port: 80}},
		},
	}
}

func benchSlice(i, generation int) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: fmt.Sprintf("svc-%d-abcde", i),
			Labels: map[string]string{discovery.LabelServiceName: fmt.Sprintf("svc-%d", i)},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for j := range benchEndpoints {
		n := i*benchEndpoints + j + generation
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", n>>16&0xff, n>>8&0xff, n&0xff)},
			Conditions: discovery.EndpointConditions{Ready: ptr.To(true)},
			NodeName:   ptr.To(fmt.Sprintf("node-%d", j)),
		})
	}
	return s
}

type benchState struct {
	sct *ServiceChangeTracker
	ect *EndpointsChangeTracker
	sm  ServicePortMap
	em  EndpointsMap
}

func newBenchState(b *testing.B, services []*v1.Service, slices []*discovery.EndpointSlice) *benchState {
	b.Helper()
	st := &benchState{
		sct: NewServiceChangeTracker(v1.IPv4Protocol, nil, nil),
		ect: NewEndpointsChangeTracker(v1.IPv4Protocol, "node-0", nil, nil),
		sm:  ServicePortMap{},
		em:  EndpointsMap{},
	}
	for _, s := range services {
		st.sct.Update(nil, s)
	}
	for _, s := range slices {
		st.ect.EndpointSliceUpdate(s, false)
	}
	st.sm.Update(st.sct)
	st.em.Update(st.ect)
	if len(st.sm) != len(services) || len(st.em) != len(slices) {
		b.Fatalf("setup: %d service ports, %d endpoint ports", len(st.sm), len(st.em))
	}
	return st
}

func benchInputs() ([]*v1.Service, []*discovery.EndpointSlice) {
	services := make([]*v1.Service, benchServices)
	slices := make([]*discovery.EndpointSlice, benchServices)
	for i := range benchServices {
		services[i] = benchService(i)
		slices[i] = benchSlice(i, 0)
	}
	return services, slices
}

// BenchmarkApplyAll measures tracking and applying 10k services with 10
// endpoints each from empty: the first sync after startup.
func BenchmarkApplyAll(b *testing.B) {
	services, slices := benchInputs()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		sct := NewServiceChangeTracker(v1.IPv4Protocol, nil, nil)
		ect := NewEndpointsChangeTracker(v1.IPv4Protocol, "node-0", nil, nil)
		for _, s := range services {
			sct.Update(nil, s)
		}
		for _, s := range slices {
			ect.EndpointSliceUpdate(s, false)
		}
		sm, em := ServicePortMap{}, EndpointsMap{}
		sm.Update(sct)
		em.Update(ect)
	}
}

// BenchmarkOneEndpointChange measures one EndpointSlice update and the sync
// applying it, with 10k services present.
func BenchmarkOneEndpointChange(b *testing.B) {
	services, slices := benchInputs()
	st := newBenchState(b, services, slices)
	variants := []*discovery.EndpointSlice{benchSlice(4242, 1), benchSlice(4242, 0)}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if !st.ect.EndpointSliceUpdate(variants[i%2], false) {
			b.Fatal("no change recorded")
		}
		st.em.Update(st.ect)
		st.sm.Update(st.sct)
		i++
	}
}

// BenchmarkOneServiceAdd measures adding (and, alternately, removing) one
// service and syncing, with 10k services present.
func BenchmarkOneServiceAdd(b *testing.B) {
	services, slices := benchInputs()
	st := newBenchState(b, services, slices)
	extra := benchService(benchServices + 1)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if i%2 == 0 {
			st.sct.Update(nil, extra)
		} else {
			st.sct.Update(extra, nil)
		}
		st.sm.Update(st.sct)
		st.em.Update(st.ect)
		i++
	}
}

// BenchmarkCategorizeEndpoints measures the per-service topology decision
// a proxier makes on every sync.
func BenchmarkCategorizeEndpoints(b *testing.B) {
	var eps []Endpoint
	for i := range 100 {
		eps = append(eps, ep(fmt.Sprintf("10.0.0.%d:80", i), "RS", "zone-a", ""))
	}
	svc := &BaseServicePortInfo{externalPolicyLocal: true, nodePort: 30000}
	labels := map[string]string{v1.LabelTopologyZone: "zone-a"}
	b.ReportAllocs()
	for b.Loop() {
		CategorizeEndpoints(eps, svc, "node", labels)
	}
}
