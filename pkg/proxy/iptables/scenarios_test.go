//go:build linux

package iptables

import (
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/source/testing/behaviour"
)

// scenarioAddresses places the shared behaviour table in this package's
// fakes: the node, pod and service ranges of families.
func scenarioAddresses(f fam) behaviour.Addresses {
	return behaviour.Addresses{
		Family: f.family, NodeName: testNodeName, Node: f.node,
		ServiceIP: f.svc, LocalPod: f.pod, RemotePod: f.rpod,
		External: f.external, ExternalIP: f.extIP, LoadBalancerIP: f.lb,
	}
}

// TestScenarios runs the behaviour table every proxier shares through this
// proxier's rules, read by the packet tracer.
func TestScenarios(t *testing.T) {
	for i, f := range families {
		other := families[1-i]
		t.Run(string(f.family), func(t *testing.T) {
			behaviour.Run(t, behaviour.IPTables, scenarioAddresses(f), scenarioAddresses(other), func(t *testing.T, sc behaviour.Scenario) behaviour.Evaluate {
				env := newTestEnv(t, f, envConfig{})
				if sc.NodeLabels != nil {
					env.p.OnTopologyChange(sc.NodeLabels)
				}
				for _, s := range sc.Services {
					env.p.OnServiceAdd(s)
				}
				for _, s := range sc.Slices {
					env.p.OnEndpointSliceAdd(s)
				}
				env.start(t)
				tr := env.tracer(t)
				if tr.err != nil {
					t.Fatalf("reading the ruleset: %v", tr.err)
				}
				return func(p behaviour.Packet) (behaviour.Outcome, error) {
					return behaviour.Trace(tr.ipt, &tr.node, behaviour.Interfaces{Pod: "veth1", Uplink: "eth0"}, p)
				}
			})
		})
	}
}
