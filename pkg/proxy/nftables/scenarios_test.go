//go:build linux

package nftables

import (
	"testing"

	"k8s.io/kube-proxy/pkg/proxy/source/testing/behaviour"
)

// scenarioAddresses places the shared behaviour table in this package's
// fakes: the node and pod ranges of families and the service CIDRs
// newTestProxier announces.
func scenarioAddresses(tf testFamily) behaviour.Addresses {
	num := func(prefix string) func(int) string {
		return func(i int) string { return tf.ip(prefix + itoa(i)) }
	}
	return behaviour.Addresses{
		Family: tf.family, NodeName: testNodeName, Node: tf.nodeIP,
		ServiceIP: num("172.30.0."), LocalPod: num("10.0.1."), RemotePod: num("10.0.2."),
		External: tf.external, ExternalIP: tf.ip("192.168.99.11"), LoadBalancerIP: tf.ip("1.2.3.4"),
	}
}

// TestScenarios runs the behaviour table every proxier shares through this
// proxier's ruleset, read by the packet tracer.
func TestScenarios(t *testing.T) {
	for i, tf := range families {
		other := families[1-i]
		t.Run(string(tf.family), func(t *testing.T) {
			behaviour.Run(t, behaviour.NFTables, scenarioAddresses(tf), scenarioAddresses(other), func(t *testing.T, sc behaviour.Scenario) behaviour.Evaluate {
				p, fake := newTestProxier(t, tf, nil)
				if sc.NodeLabels != nil {
					p.OnTopologyChange(sc.NodeLabels)
				}
				startProxier(p, sc.Services, sc.Slices)
				tr := newTracer(t, fake.Fake, tf.nodeIP)
				return func(pk behaviour.Packet) (behaviour.Outcome, error) {
					return behaviour.Trace(tr.nft, &tr.node, behaviour.Interfaces{Pod: "veth1", Uplink: "eth0"}, pk)
				}
			})
		})
	}
}
