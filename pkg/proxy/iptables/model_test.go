//go:build linux

package iptables

import (
	"fmt"
	"testing"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/kube-proxy/pkg/proxy"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// The generator renders each port from its node-local model: endpoints in
// the brain's "ip:port" text order (not the model's address order), SEP
// names from the same hash as before, a full sync of unchanged ports
// converts nothing again, and a changed port keeps the strings of the
// endpoints that stayed.
func TestPortModel(t *testing.T) {
	name := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "svc"}, Port: "p80", Protocol: v1.ProtocolTCP}
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			svc := st.NewService("ns", "svc", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(1)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 0)}
			})
			ports := []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}
			// Pods 9 and 10 sort differently as text and as addresses.
			slcs := []*discovery.EndpointSlice{st.Slice("ns", "svc", "svc-1", st.AddressTypeOf(f.family), ports,
				st.EP{IP: f.pod(9), Node: testNodeName}, st.EP{IP: f.pod(10), Node: "node2"}, st.EP{IP: f.pod(11), Node: "node2"})}
			env := newTestEnv(t, f, envConfig{})
			env.p.OnServiceAdd(svc)
			env.p.OnEndpointSliceAdd(slcs[0])
			env.start(t)

			model := func() *portModel {
				t.Helper()
				r := env.p.view.ports[name]
				if r == nil || r.model == nil || r.model.info == nil {
					t.Fatalf("no model for %s", name)
				}
				return r.model
			}
			endpoints := func(m *portModel) []string {
				var out []string
				for _, e := range m.reachable {
					out = append(out, e.endpoint)
				}
				return out
			}
			m := model()
			want := []string{f.hp(f.pod(10), 8080), f.hp(f.pod(11), 8080), f.hp(f.pod(9), 8080)}
			if got := endpoints(m); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("endpoints %v, want %v (the brain's text order)", got, want)
			}
			for _, e := range m.reachable {
				if wantChain := endpointChainName("ns/svc:p80", "tcp", e.endpoint); e.chain != wantChain {
					t.Errorf("endpoint %s: chain %s, want %s", e.endpoint, e.chain, wantChain)
				}
			}
			if len(m.cluster) != 3 || len(m.local) != 0 {
				t.Errorf("cluster %d, local %d endpoints; want 3, 0", len(m.cluster), len(m.local))
			}

			first := &m.reachable[0]
			env.p.RequestFullSync()
			env.sync(t)
			if m := model(); &m.reachable[0] != first {
				t.Errorf("a full sync with nothing changed converted the port again")
			}

			kept := unsafe.StringData(string(m.reachable[2].chain))
			updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints[1].Addresses = []string{f.pod(12)} })
			env.sync(t)
			m = model()
			want = []string{f.hp(f.pod(11), 8080), f.hp(f.pod(12), 8080), f.hp(f.pod(9), 8080)}
			if got := endpoints(m); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the change: endpoints %v, want %v", got, want)
			}
			if unsafe.StringData(string(m.reachable[2].chain)) != kept {
				t.Errorf("the chain name of an endpoint that stayed was computed again")
			}
			if wantChain := endpointChainName("ns/svc:p80", "tcp", want[1]); m.reachable[1].chain != wantChain {
				t.Errorf("new endpoint: chain %s, want %s", m.reachable[1].chain, wantChain)
			}
		})
	}
}
