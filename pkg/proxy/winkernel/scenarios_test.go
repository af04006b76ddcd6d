package winkernel

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/source/testing/behaviour"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
)

// scenarioAddresses places the shared behaviour table in this package's
// fake HNS: this node's pods are the CNI's local endpoints pod(1..9), the
// other node's pods lie in the network's remote subnet.
func scenarioAddresses(f fam) behaviour.Addresses {
	return behaviour.Addresses{
		Family: f.family, NodeName: testNode, Node: f.node,
		ServiceIP: f.svc, LocalPod: f.pod, RemotePod: f.rpod,
		External: f.public, ExternalIP: f.extIP, LoadBalancerIP: f.lb,
	}
}

// TestScenarios runs the behaviour table every proxier shares against the
// load balancers this proxier leaves in the fake HNS.
func TestScenarios(t *testing.T) {
	for i, f := range families {
		other := families[1-i]
		t.Run(string(f.family), func(t *testing.T) {
			behaviour.Run(t, behaviour.WinKernel, scenarioAddresses(f), scenarioAddresses(other), func(t *testing.T, sc behaviour.Scenario) behaviour.Evaluate {
				e := newEnv(t, f, envOptions{})
				if sc.NodeLabels != nil {
					e.p.OnTopologyChange(sc.NodeLabels)
				}
				var objs []any
				for _, s := range sc.Services {
					objs = append(objs, s)
				}
				for _, s := range sc.Slices {
					objs = append(objs, s)
				}
				e.start(objs...)
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("HNS state:\n%s", describe(e.hns))
					}
				})
				return func(pk behaviour.Packet) (behaviour.Outcome, error) { return hnsBehaviour(e, pk) }
			})
		})
	}
}

// hnsBehaviour is what the fake HNS's load balancers do with pk: HNS
// matches a new connection on (frontend VIP, port, protocol), a node port
// load balancer (no VIP) matching any of the node's addresses, and sends it
// to one of the load balancer's endpoints. A packet no load balancer takes
// is not the proxier's. HNS has no source filter and no reject, and its
// SNAT is not visible in the fake, so Outcome.Masquerade stays false (the
// table says so for winkernel where it expects masquerading).
func hnsBehaviour(e *env, pk behaviour.Packet) (behaviour.Outcome, error) {
	var proto uint32
	switch pk.Protocol {
	case v1.ProtocolTCP:
		proto = 6
	case v1.ProtocolUDP:
		proto = 17
	case v1.ProtocolSCTP:
		proto = 132
	}
	dst := netip.MustParseAddr(pk.Dst)
	eps := map[string]hcnapi.Endpoint{}
	for _, ep := range e.hns.Endpoints() {
		eps[ep.ID] = ep
	}
	var taken []hcnapi.LoadBalancer
	for _, lb := range e.hns.LoadBalancers() {
		if lb.IsIPv6() != dst.Is6() || len(lb.PortMappings) == 0 {
			continue
		}
		pm := lb.PortMappings[0]
		if pm.Protocol != proto || int(pm.ExternalPort) != pk.Port {
			continue
		}
		if vip := lb.VIP(); vip == "" && pk.Dst == e.f.node || slices.Contains(lb.FrontendVIPs, pk.Dst) {
			taken = append(taken, lb)
		}
	}
	switch len(taken) {
	case 0:
		return behaviour.Outcome{Verdict: behaviour.NoMatch}, nil
	case 1:
	default:
		return behaviour.Outcome{}, fmt.Errorf("%s: %d load balancers take the packet", pk, len(taken))
	}
	lb := taken[0]
	out := behaviour.Outcome{Verdict: behaviour.DNAT, Affinity: lb.PortMappings[0].Distribution != hcnapi.DistributionNone}
	for _, id := range lb.Endpoints {
		ep, ok := eps[id]
		if !ok || len(ep.IPs) == 0 {
			return behaviour.Outcome{}, fmt.Errorf("%s: load balancer %s has endpoint %s that HNS does not know", pk, lb.ID, id)
		}
		out.Endpoints = append(out.Endpoints, net.JoinHostPort(ep.IPs[0], strconv.Itoa(int(lb.PortMappings[0].InternalPort))))
	}
	if len(out.Endpoints) == 0 {
		// HNS refuses to create a load balancer without endpoints; the
		// fake keeping one would be a proxier bug the table should show.
		return behaviour.Outcome{}, fmt.Errorf("%s: load balancer %s has no endpoint", pk, lb.ID)
	}
	return out, nil
}
