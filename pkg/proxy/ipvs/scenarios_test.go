//go:build linux

package ipvs

import (
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/source/testing/behaviour"
)

// scenarioAddresses places the shared behaviour table in this package's
// fakes: the node, pod and service ranges of fams.
func scenarioAddresses(f fam) behaviour.Addresses {
	return behaviour.Addresses{
		Family: f.family, NodeName: testHostname, Node: f.node,
		ServiceIP: f.svc, LocalPod: f.pod, RemotePod: f.rpod,
		External: f.external, AllowedRange: f.srcRange, ExternalIP: f.extIP, LoadBalancerIP: f.lb,
	}
}

// TestScenarios runs the behaviour table every proxier shares through this
// proxier's IPVS, ipset and iptables state, read by the ipvs-mode tracer.
func TestScenarios(t *testing.T) {
	for i, f := range fams {
		other := fams[1-i]
		t.Run(string(f.family), func(t *testing.T) {
			behaviour.Run(t, behaviour.IPVS, scenarioAddresses(f), scenarioAddresses(other), func(t *testing.T, sc behaviour.Scenario) behaviour.Evaluate {
				p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{localDetectorCIDR: f.clusterCIDR})
				if sc.NodeLabels != nil {
					p.OnTopologyChange(sc.NodeLabels)
				}
				for _, s := range sc.Services {
					p.OnServiceAdd(s)
				}
				for _, s := range sc.Slices {
					p.OnEndpointSliceAdd(s)
				}
				syncAll(t, p)
				tr := newTracer(t, env)
				t.Cleanup(func() {
					if t.Failed() {
						t.Log(env.dump(t))
					}
				})
				return func(pk behaviour.Packet) (behaviour.Outcome, error) {
					return behaviour.Trace(tr.ipvs, tr.node, behaviour.Interfaces{Pod: testBridge, Uplink: testUplink}, pk)
				}
			})
		})
	}
}
