//go:build linux

package iptables

import (
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// normalizedTables is a ruleset as text with chains sorted by name, so two
// kernels holding the same rules compare equal whatever order their
// chains were created in. Rule order inside a chain is kept.
func normalizedTables(t testing.TB, env *testEnv) string {
	t.Helper()
	rs, err := parseRuleset(env.dump(t))
	if err != nil {
		t.Fatalf("parsing the fake's tables: %v", err)
	}
	var b strings.Builder
	for _, table := range []string{"filter", "nat"} {
		chains := make([]string, 0, len(rs[table]))
		for c := range rs[table] {
			chains = append(chains, c)
		}
		slices.Sort(chains)
		fmt.Fprintf(&b, "*%s\n", table)
		for _, c := range chains {
			fmt.Fprintf(&b, ":%s\n", c)
			for _, r := range rs[table][c] {
				b.WriteString(r.raw + "\n")
			}
		}
	}
	return b.String()
}

// clusterModel is a small random cluster that random steps mutate.
type clusterModel struct {
	f      fam
	rnd    *rand.Rand
	svcs   map[int]*v1.Service
	slices map[int]*discovery.EndpointSlice
	nextEP int
}

func (m *clusterModel) addr(kind, i int) string {
	if m.f.family == v1.IPv6Protocol {
		return fmt.Sprintf("2001:db8:%x::%x", 300+kind, i+1)
	}
	return fmt.Sprintf("198.%d.%d.%d", 18+kind, i/200, i%200+1)
}

func (m *clusterModel) randomService(i int) *v1.Service {
	r := m.rnd
	name := fmt.Sprintf("svc%d", i)
	return st.NewService("ns", name, func(s *v1.Service) {
		s.Spec.ClusterIP = m.f.svcIndex(i)
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("p", 80, v1.ProtocolTCP, 0)}
		if r.IntN(3) == 0 {
			s.Spec.Ports = append(s.Spec.Ports, st.ServicePort("q", 53, v1.ProtocolUDP, 0))
		}
		switch r.IntN(3) {
		case 1:
			s.Spec.Type = v1.ServiceTypeNodePort
		case 2:
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: m.addr(0, i)}}
			if r.IntN(2) == 0 {
				s.Spec.LoadBalancerSourceRanges = []string{m.f.cidr(m.f.external)}
			}
		}
		if s.Spec.Type != v1.ServiceTypeClusterIP {
			for j := range s.Spec.Ports {
				s.Spec.Ports[j].NodePort = int32(30000 + 2*i + j)
			}
			if r.IntN(2) == 0 {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				if s.Spec.Type == v1.ServiceTypeLoadBalancer {
					s.Spec.HealthCheckNodePort = int32(32000 + i)
				}
			}
		}
		if r.IntN(3) == 0 {
			s.Spec.ExternalIPs = []string{m.addr(1, i)}
		}
		if r.IntN(4) == 0 {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		if r.IntN(4) == 0 {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](int32(60 + r.IntN(600)))}}
		}
	})
}

func (m *clusterModel) randomEndpoint() st.EP {
	m.nextEP++
	e := st.EP{IP: m.f.podIndex(m.nextEP), Node: "node2"}
	if m.rnd.IntN(3) == 0 {
		e.Node = testNodeName
	}
	switch m.rnd.IntN(6) {
	case 0:
		e.Terminating = true
	case 1:
		e.NotReady = true
	}
	return e
}

func (m *clusterModel) randomSlice(i int) *discovery.EndpointSlice {
	var eps []st.EP
	for range m.rnd.IntN(5) {
		eps = append(eps, m.randomEndpoint())
	}
	name := fmt.Sprintf("svc%d", i)
	return st.Slice("ns", name, name+"-1", st.AddressTypeOf(m.f.family),
		[]discovery.EndpointPort{st.SlicePort("p", 8080, v1.ProtocolTCP), st.SlicePort("q", 5353, v1.ProtocolUDP)}, eps...)
}

// step applies one random change to the model and to p.
func (m *clusterModel) step(p *Proxier) string {
	r := m.rnd
	i := r.IntN(8)
	svc, exists := m.svcs[i]
	switch op := r.IntN(10); {
	case !exists:
		m.svcs[i], m.slices[i] = m.randomService(i), m.randomSlice(i)
		p.OnServiceAdd(m.svcs[i])
		p.OnEndpointSliceAdd(m.slices[i])
		return fmt.Sprintf("add svc%d", i)
	case op == 0:
		p.OnServiceDelete(svc)
		p.OnEndpointSliceDelete(m.slices[i])
		delete(m.svcs, i)
		delete(m.slices, i)
		return fmt.Sprintf("delete svc%d", i)
	case op <= 2:
		upd := m.randomService(i)
		p.OnServiceUpdate(svc, upd)
		m.svcs[i] = upd
		return fmt.Sprintf("change svc%d", i)
	case op <= 8:
		old := m.slices[i]
		upd := old.DeepCopy()
		switch {
		case len(upd.Endpoints) > 0 && r.IntN(3) == 0:
			k := r.IntN(len(upd.Endpoints))
			upd.Endpoints = append(upd.Endpoints[:k], upd.Endpoints[k+1:]...)
		case len(upd.Endpoints) > 0 && r.IntN(2) == 0:
			k := r.IntN(len(upd.Endpoints))
			upd.Endpoints[k].Conditions.Ready = ptr.To(!*upd.Endpoints[k].Conditions.Ready)
		default:
			extra := st.Slice("ns", "x", "x", st.AddressTypeOf(m.f.family), nil, m.randomEndpoint())
			upd.Endpoints = append(upd.Endpoints, extra.Endpoints...)
		}
		p.OnEndpointSliceUpdate(old, upd)
		m.slices[i] = upd
		return fmt.Sprintf("endpoints of svc%d", i)
	default:
		return "nothing"
	}
}

// checkConvergence drives a proxier through random changes, syncing after
// each, and after every sync compares the tables with those a brand-new
// proxier writes in one full sync of the same cluster. Partial syncs (only
// changed services' chains, top-level chains left out when unchanged,
// stale chains deleted) must always leave the same rules as a full sync.
func checkConvergence(t *testing.T, seed uint64, steps int) {
	for _, f := range families {
		m := &clusterModel{f: f, rnd: rand.New(rand.NewPCG(seed, uint64(len(f.family)))), svcs: map[int]*v1.Service{}, slices: map[int]*discovery.EndpointSlice{}}
		env := newTestEnv(t, f, envConfig{})
		env.p.setLogger(klog.Background().V(10))
		env.start(t)
		var history []string
		for n := range steps {
			history = append(history, m.step(env.p))
			env.sync(t)

			fresh := newTestEnv(t, f, envConfig{})
			fresh.p.setLogger(klog.Background().V(10))
			for _, s := range m.svcs {
				fresh.p.OnServiceAdd(s)
			}
			for _, s := range m.slices {
				fresh.p.OnEndpointSliceAdd(s)
			}
			fresh.start(t)
			// The count that sizes split restores' blocks follows the
			// ports' chains through every change.
			if got, want := env.p.view.chains, countChains(env.p.view); got != want {
				t.Fatalf("%s seed %d: after step %d (%s) the view counts %d chains, its ports have %d", f.family, seed, n, strings.Join(history, ", "), got, want)
			}
			got, want := normalizedTables(t, env), normalizedTables(t, fresh)
			if got != want {
				t.Fatalf("%s seed %d: after step %d (%s) the tables differ from a full sync of the same cluster:\n%s\nlast restore:\n%s",
					f.family, seed, n, strings.Join(history, ", "), lineDiff(want, got), env.restore[len(env.restore)-1])
			}
		}
	}
}

func countChains(v *view) int {
	n := 0
	for _, r := range v.ports {
		n += len(r.chains)
	}
	return n
}

func TestPartialSyncConvergence(t *testing.T) {
	// Each seed is ~6 s under -race on 2 cores; two find what the six did so far, and
	// hack/test.sh --long (CI) runs all six.
	seeds := uint64(2)
	if os.Getenv("KUBE_PROXY_TEST_LONG") != "" {
		seeds = 6
	}
	for seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checkConvergence(t, seed, 40) })
	}
}

func FuzzPartialSyncConvergence(f *testing.F) {
	f.Add(uint64(100))
	f.Add(uint64(12345))
	f.Fuzz(func(t *testing.T, seed uint64) { checkConvergence(t, seed, 30) })
}
