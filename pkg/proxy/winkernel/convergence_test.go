package winkernel

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
	hcntest "k8s.io/kube-proxy/pkg/proxy/winkernel/testing"
)

// clusterModel is a random set of Services and EndpointSlices that a test
// mutates step by step.
type clusterModel struct {
	f      fam
	rng    *rand.Rand
	svcs   map[int]*v1.Service
	slices map[int]*discovery.EndpointSlice
}

func (m *clusterModel) addr(base string, i int) string {
	if m.f.family == v1.IPv6Protocol {
		return base + strconv.FormatInt(int64(i), 16)
	}
	return base + strconv.Itoa(i)
}

func (m *clusterModel) randomService(i int) *v1.Service {
	r := m.rng
	return st.NewService("ns", fmt.Sprintf("svc%d", i), func(s *v1.Service) {
		s.Spec.ClusterIP = m.f.svc(i)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
		if r.IntN(3) == 0 {
			s.Spec.Ports = append(s.Spec.Ports, st.ServicePort("q", 53, v1.ProtocolUDP, 0))
		}
		switch r.IntN(4) {
		case 1:
			s.Spec.Type = v1.ServiceTypeNodePort
		case 2:
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			lb := "198.51.100."
			if m.f.family == v1.IPv6Protocol {
				lb = "2001:db8:100::"
			}
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: m.addr(lb, i)}}
		case 3:
			ext := "192.0.2."
			if m.f.family == v1.IPv6Protocol {
				ext = "2001:db8:200::"
			}
			s.Spec.ExternalIPs = []string{m.addr(ext, i)}
		}
		if s.Spec.Type != v1.ServiceTypeClusterIP {
			for j := range s.Spec.Ports {
				s.Spec.Ports[j].NodePort = int32(30000 + 2*i + j)
			}
			if r.IntN(2) == 0 {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = int32(32000 + i)
			}
		}
		if r.IntN(4) == 0 {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		if r.IntN(4) == 0 {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](60)}}
		}
		if r.IntN(5) == 0 {
			s.Annotations = map[string]string{"preserve-destination": "true"}
		}
	})
}

func (m *clusterModel) randomSlice(i int) *discovery.EndpointSlice {
	r := m.rng
	var eps []st.EP
	for _, j := range r.Perm(9)[:r.IntN(5)] {
		eps = append(eps, st.EP{IP: m.f.pod(j + 1), Node: testNode, Terminating: r.IntN(6) == 0})
	}
	for _, j := range r.Perm(12)[:r.IntN(5)] {
		eps = append(eps, st.EP{IP: m.f.rpod(j + 1), Node: "node2", NotReady: r.IntN(8) == 0})
	}
	return st.Slice("ns", fmt.Sprintf("svc%d", i), fmt.Sprintf("svc%d-1", i), st.AddressTypeOf(m.f.family),
		[]discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP), st.SlicePort("q", 5353, v1.ProtocolUDP)}, eps...)
}

func (m *clusterModel) objects() []any {
	var out []any
	for i := range 64 {
		if s := m.svcs[i]; s != nil {
			out = append(out, s)
		}
		if s := m.slices[i]; s != nil {
			out = append(out, s)
		}
	}
	return out
}

// TestIncrementalEqualsFull applies random change sequences, syncing after
// each step (with occasional HNS failures), and checks that the result is
// what a fresh proxier on a fresh HNS programs for the final objects.
func TestIncrementalEqualsFull(t *testing.T) {
	for _, f := range families {
		for _, netType := range []string{hcnapi.NetworkTypeL2Bridge, hcnapi.NetworkTypeOverlay} {
			for seed := range uint64(4) {
				t.Run(fmt.Sprintf("%s/%s/seed%d", f.family, netType, seed), func(t *testing.T) {
					m := &clusterModel{f: f, rng: rand.New(rand.NewPCG(seed, 17)), svcs: map[int]*v1.Service{}, slices: map[int]*discovery.EndpointSlice{}}
					for i := range 12 {
						m.svcs[i] = m.randomService(i)
						m.slices[i] = m.randomSlice(i)
					}
					e := newEnv(t, f, envOptions{networkType: netType})
					e.start(m.objects()...)
					for step := range 60 {
						i := m.rng.IntN(16)
						switch m.rng.IntN(6) {
						case 0, 1:
							old := m.slices[i]
							m.slices[i] = m.randomSlice(i)
							if old == nil {
								e.p.OnEndpointSliceAdd(m.slices[i])
							} else {
								e.p.OnEndpointSliceUpdate(old, m.slices[i])
							}
						case 2, 3:
							old := m.svcs[i]
							m.svcs[i] = m.randomService(i)
							if old == nil {
								e.p.OnServiceAdd(m.svcs[i])
							} else {
								e.p.OnServiceUpdate(old, m.svcs[i])
							}
						case 4:
							if old := m.svcs[i]; old != nil {
								delete(m.svcs, i)
								e.p.OnServiceDelete(old)
							}
						case 5:
							if old := m.slices[i]; old != nil {
								delete(m.slices, i)
								e.p.OnEndpointSliceDelete(old)
							}
						}
						if step%7 == 3 {
							e.hns.FailNext(hcntest.OpCreateLoadBalancer, hcnapi.NewError(hcnapi.KindOther, "injected failure"))
						}
						if err := e.p.SyncNow(); err != nil {
							// A failed sync is retried as a full one.
							e.hns.ClearFailures()
							e.sync()
						}
					}
					// Drain the injected failures that did not hit.
					e.hns.ClearFailures()
					got := e.state()

					fresh := newEnv(t, f, envOptions{networkType: netType})
					fresh.start(m.objects()...)
					if diff := cmp.Diff(fresh.state(), got); diff != "" {
						t.Errorf("incremental result differs from a fresh full sync (-full +incremental):\n%s", diff)
					}
					// And a full resync of the incremental proxier changes nothing.
					e.hns.ResetCalls()
					e.p.RequestFullSync()
					e.sync()
					for _, op := range []string{hcntest.OpCreateLoadBalancer, hcntest.OpUpdateLoadBalancer, hcntest.OpDeleteLoadBalancer, hcntest.OpCreateEndpoint, hcntest.OpDeleteEndpoint} {
						if n := e.hns.Calls()[op]; n != 0 {
							t.Errorf("full resync after convergence made %d %s calls", n, op)
						}
					}
				})
			}
		}
	}
}
