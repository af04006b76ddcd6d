//go:build linux

package iptables

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"k8s.io/kube-proxy/pkg/proxy/source/testing/behaviour"
)

// scenarioAddresses places the shared behaviour table in this package's
// fakes: the node, pod and service ranges of families.
func scenarioAddresses(f fam) behaviour.Addresses {
	a := behaviour.Addresses{
		Family: f.family, NodeName: testNodeName, Node: f.node,
		ServiceIP: f.svc, LocalPod: f.pod, RemotePod: f.rpod,
		External: f.external, ExternalIP: f.extIP, LoadBalancerIP: f.lb,
	}
	if f.family == v1.IPv6Protocol {
		a.AllowedRange, a.DeniedClient = "2001:db8::/64", "2001:db8:1::9"
	} else {
		a.AllowedRange, a.DeniedClient = "203.0.113.0/24", "198.18.0.9"
	}
	return a
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
				return func(t testing.TB, p behaviour.Packet) behaviour.Outcome {
					t.Helper()
					pk := packet{src: p.Src, dst: p.Dst, proto: strings.ToLower(string(p.Protocol)), dport: p.Port}
					switch p.From {
					case behaviour.FromPod:
						pk.from, pk.iif = fromPod, "veth1"
					case behaviour.FromExternal:
						pk.from, pk.iif = fromExternal, "eth0"
					case behaviour.FromNode:
						pk.from = fromHost
					}
					outs, err := tr.trace(pk)
					if err != nil {
						t.Fatalf("trace %s: %v", p, err)
					}
					var os []tracedOutcome
					for _, o := range outs {
						os = append(os, tracedOutcome{verdict: o.verdict, dnat: o.dnat, masq: o.masq, affinity: len(o.recentSet) > 0})
					}
					return foldOutcomes(t, p, os)
				}
			})
		})
	}
}

// tracedOutcome is one path of a traced packet.
type tracedOutcome struct {
	verdict  string // ACCEPT, DROP, REJECT
	dnat     string
	masq     bool
	affinity bool
}

// foldOutcomes turns the paths a packet may take into one behaviour: every
// path must agree on the verdict and on masquerading, or the table's terms
// cannot describe it and the test fails.
func foldOutcomes(t testing.TB, p behaviour.Packet, outs []tracedOutcome) behaviour.Outcome {
	t.Helper()
	if len(outs) == 0 {
		t.Fatalf("%s: no outcome", p)
	}
	var res behaviour.Outcome
	for i, o := range outs {
		var v behaviour.Verdict
		switch {
		case o.verdict == "ACCEPT" && o.dnat != "":
			v = behaviour.DNAT
		case o.verdict == "ACCEPT":
			v = behaviour.NoMatch
		case o.verdict == "REJECT":
			v = behaviour.Reject
		case o.verdict == "DROP":
			v = behaviour.Drop
		default:
			t.Fatalf("%s: verdict %q", p, o.verdict)
		}
		if i > 0 && (v != res.Verdict || o.masq != res.Masquerade) {
			t.Fatalf("%s: paths disagree: %+v", p, outs)
		}
		res.Verdict, res.Masquerade = v, o.masq
		res.Affinity = res.Affinity || o.affinity
		if o.dnat != "" {
			res.Endpoints = append(res.Endpoints, o.dnat)
		}
	}
	return res
}
