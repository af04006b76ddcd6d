//go:build linux

package ipvs

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// randomCluster builds random Services and EndpointSlices from a small
// pool of addresses, so that services collide on external IPs, node ports
// and endpoints now and then.
type randomCluster struct {
	f   fam
	rng *rand.Rand
}

func (c *randomCluster) service(i int) *v1.Service {
	r, f := c.rng, c.f
	return st.NewService("ns", fmt.Sprintf("svc%d", i), func(s *v1.Service) {
		s.Spec.ClusterIP = f.svc(i + 1)
		protos := []v1.Protocol{v1.ProtocolTCP, v1.ProtocolTCP, v1.ProtocolUDP, v1.ProtocolSCTP}
		nPorts := 1 + r.IntN(2)
		for p := range nPorts {
			s.Spec.Ports = append(s.Spec.Ports, st.ServicePort(fmt.Sprintf("p%d", p), int32(80+p), protos[r.IntN(len(protos))], 0))
		}
		switch r.IntN(3) {
		case 1:
			s.Spec.Type = v1.ServiceTypeNodePort
		case 2:
			s.Spec.Type = v1.ServiceTypeLoadBalancer
			s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
			if r.IntN(2) == 0 {
				s.Status.LoadBalancer.Ingress[0].IP = f.svcBase + "200"
			}
			switch r.IntN(3) {
			case 1:
				s.Spec.LoadBalancerSourceRanges = []string{f.srcRange}
			case 2:
				s.Spec.LoadBalancerSourceRanges = []string{f.srcRange, f.nodeRange}
			}
		}
		if s.Spec.Type != v1.ServiceTypeClusterIP {
			for p := range s.Spec.Ports {
				s.Spec.Ports[p].NodePort = int32(30000 + 10*i + p)
			}
			if r.IntN(2) == 0 {
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				if s.Spec.Type == v1.ServiceTypeLoadBalancer {
					s.Spec.HealthCheckNodePort = int32(31000 + i)
				}
			}
		}
		if r.IntN(3) == 0 {
			s.Spec.ExternalIPs = []string{f.extIP}
		}
		if r.IntN(3) == 0 {
			s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
		}
		if r.IntN(3) == 0 {
			s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
			s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](int32(60 + r.IntN(3)))}}
		}
	})
}

func (c *randomCluster) slice(svc *v1.Service) *discovery.EndpointSlice {
	r, f := c.rng, c.f
	var ports []discovery.EndpointPort
	for _, p := range svc.Spec.Ports {
		ports = append(ports, st.SlicePort(p.Name, p.Port+8000, p.Protocol))
	}
	var eps []st.EP
	for range r.IntN(5) {
		e := st.EP{IP: f.rpod(1 + r.IntN(6))}
		if r.IntN(2) == 0 {
			e = local(f.pod(1 + r.IntN(6)))
		}
		switch r.IntN(5) {
		case 0:
			e.Terminating = true
		case 1:
			e.NotReady = true
		}
		eps = append(eps, e)
	}
	return st.Slice(svc.Namespace, svc.Name, svc.Name+"-1", st.AddressTypeOf(f.family), ports, eps...)
}

// TestPartialSyncConvergence applies random changes with a sync after
// each, then checks the kernel state equals a fresh proxier's full sync of
// the final objects.
func TestPartialSyncConvergence(t *testing.T) {
	const services, steps = 8, 60
	for _, f := range fams {
		for seed := range uint64(6) {
			t.Run(fmt.Sprintf("%s/seed%d", f.family, seed), func(t *testing.T) {
				c := &randomCluster{f: f, rng: rand.New(rand.NewPCG(seed, 7))}
				opts := fakeProxierOptions{localDetectorCIDR: f.clusterCIDR}
				p, env := newFakeProxier(t, f.family, []string{f.node}, opts)
				svcs := map[int]*v1.Service{}
				slices := map[int]*discovery.EndpointSlice{}
				for i := range services / 2 {
					svcs[i] = c.service(i)
					slices[i] = c.slice(svcs[i])
					p.OnServiceAdd(svcs[i])
					p.OnEndpointSliceAdd(slices[i])
				}
				syncAll(t, p)
				for range steps {
					i := c.rng.IntN(services)
					switch op := c.rng.IntN(5); {
					case svcs[i] == nil:
						svcs[i] = c.service(i)
						p.OnServiceAdd(svcs[i])
					case op == 0:
						p.OnServiceDelete(svcs[i])
						delete(svcs, i)
					case op == 1:
						n := c.service(i)
						p.OnServiceUpdate(svcs[i], n)
						svcs[i] = n
					case slices[i] == nil:
						slices[i] = c.slice(svcs[i])
						p.OnEndpointSliceAdd(slices[i])
					case op == 2:
						p.OnEndpointSliceDelete(slices[i])
						delete(slices, i)
					default:
						n := c.slice(svcs[i])
						p.OnEndpointSliceUpdate(slices[i], n)
						slices[i] = n
					}
					if err := p.SyncNow(); err != nil {
						t.Fatalf("sync: %v", err)
					}
				}

				fresh, freshEnv := newFakeProxier(t, f.family, []string{f.node}, opts)
				for _, s := range svcs {
					fresh.OnServiceAdd(s)
				}
				for _, s := range slices {
					fresh.OnEndpointSliceAdd(s)
				}
				syncAll(t, fresh)
				if diff := cmp.Diff(freshEnv.dump(t), env.dump(t)); diff != "" {
					t.Errorf("incremental syncs differ from a full sync (-full +incremental):\n%s", diff)
				}
				// A full sync of the incremental proxier changes nothing.
				before := env.dump(t)
				p.RequestFullSync()
				if err := p.SyncNow(); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(before, env.dump(t)); diff != "" {
					t.Errorf("full sync after partial ones changed the state:\n%s", diff)
				}
			})
		}
	}
}
