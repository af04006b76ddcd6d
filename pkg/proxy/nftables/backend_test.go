//go:build linux

package nftables

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/knftables"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

type flowCase struct {
	name     string
	src, dst string // IPv4 notation; mapped for IPv6
	proto    string
	port     int
	fromHost bool
	verdict  string
	dnat     []string // "ip:port" in IPv4 notation
	masq     bool
}

func runFlows(t *testing.T, tr *tracer, tf testFamily, cases []flowCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			proto := tc.proto
			if proto == "" {
				proto = "tcp"
			}
			src := tc.src
			if src == "node" {
				src = tf.nodeIP
			} else if src == "external" {
				src = tf.external
			} else {
				src = tf.ip(src)
			}
			dst := tc.dst
			if dst == "node" {
				dst = tf.nodeIP
			} else {
				dst = tf.ip(dst)
			}
			got := tr.trace(packet{src: src, dst: dst, proto: proto, dport: tc.port, fromHost: tc.fromHost})
			want := traceResult{verdict: tc.verdict, dnat: eps(tf.ip, tc.dnat...), masq: tc.masq}
			slices.Sort(want.dnat)
			if diff := cmp.Diff(want, got, cmp.AllowUnexported(traceResult{}), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("%s -> %s:%d (-want +got):\n%s", src, dst, tc.port, diff)
			}
		})
	}
}

// basicFlows is what every behaviour in testServices must do.
var basicFlows = []flowCase{
	{name: "pod to clusterIP", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:80"}},
	{name: "off-cluster to clusterIP is masqueraded", src: "external", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:80"}, masq: true},
	{name: "second port of a service", src: "10.1.2.3", dst: "172.30.0.41", port: 443, verdict: "ACCEPT", dnat: []string{"10.180.0.1:443"}},
	{name: "undefined port of a clusterIP is rejected", src: "10.1.2.3", dst: "172.30.0.41", port: 8080, verdict: "REJECT"},
	{name: "unallocated clusterIP is dropped", src: "10.1.2.3", dst: "172.30.0.99", port: 80, verdict: "DROP"},
	// The node IP is outside the pod CIDR, so detect-local treats it as off-cluster.
	{name: "host to clusterIP", src: "node", dst: "172.30.0.41", port: 80, fromHost: true, verdict: "ACCEPT", dnat: []string{"10.180.0.1:80"}, masq: true},

	{name: "pod to multi-endpoint clusterIP", src: "10.1.2.3", dst: "172.30.0.42", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}},
	{name: "external to NodePort", src: "external", dst: "node", port: 3001, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}, masq: true},
	{name: "external to externalIP", src: "external", dst: "192.168.99.22", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}, masq: true},
	{name: "LB from allowed source range", src: "203.0.113.9", dst: "1.2.3.4", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}, masq: true},
	{name: "LB from outside source ranges is dropped", src: "203.0.113.200", dst: "1.2.3.4", port: 80, verdict: "DROP"},
	{name: "host to NodePort", src: "node", dst: "node", port: 3001, fromHost: true, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}, masq: true},
	{name: "unknown NodePort is not touched", src: "external", dst: "node", port: 3999, verdict: "ACCEPT"},

	{name: "eTP=Local NodePort keeps source and uses local endpoints", src: "external", dst: "node", port: 3003, verdict: "ACCEPT", dnat: []string{"10.180.0.3:80"}},
	{name: "eTP=Local LB from pod short-circuits to all endpoints", src: "10.1.2.3", dst: "5.6.7.8", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.3:80", "10.180.2.3:80"}},
	{name: "eTP=Local NodePort from host is masqueraded to all endpoints", src: "node", dst: "node", port: 3003, fromHost: true, verdict: "ACCEPT", dnat: []string{"10.180.0.3:80", "10.180.2.3:80"}, masq: true},
	{name: "eTP=Local clusterIP uses all endpoints", src: "10.1.2.3", dst: "172.30.0.43", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.3:80", "10.180.2.3:80"}},

	{name: "no endpoints: clusterIP rejected", src: "10.1.2.3", dst: "172.30.0.44", port: 80, verdict: "REJECT"},
	{name: "no endpoints: NodePort rejected", src: "external", dst: "node", port: 3004, verdict: "REJECT"},
	{name: "no endpoints: externalIP rejected", src: "external", dst: "192.168.99.44", port: 80, verdict: "REJECT"},

	{name: "eTP=Local no local endpoints: NodePort dropped", src: "external", dst: "node", port: 3005, verdict: "DROP"},
	{name: "eTP=Local no local endpoints: LB dropped", src: "external", dst: "5.6.7.9", port: 80, verdict: "DROP"},
	{name: "eTP=Local no local endpoints: LB from pod works", src: "10.1.2.3", dst: "5.6.7.9", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.2.5:80"}},
	{name: "eTP=Local no local endpoints: clusterIP works", src: "10.1.2.3", dst: "172.30.0.45", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.2.5:80"}},

	{name: "iTP=Local no local endpoints: clusterIP dropped", src: "10.1.2.3", dst: "172.30.0.46", port: 80, verdict: "DROP"},

	{name: "affinity service balances over both endpoints", src: "10.1.2.3", dst: "172.30.0.47", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.7:80", "10.180.1.7:8080"}},

	{name: "UDP service", src: "10.1.2.3", dst: "172.30.0.48", proto: "udp", port: 53, verdict: "ACCEPT", dnat: []string{"10.180.0.8:5353"}},
	{name: "UDP port with TCP is rejected", src: "10.1.2.3", dst: "172.30.0.48", proto: "tcp", port: 53, verdict: "REJECT"},
	{name: "hairpin to own pod is masqueraded", src: "10.180.0.8", dst: "172.30.0.48", proto: "udp", port: 53, verdict: "ACCEPT", dnat: []string{"10.180.0.8:5353"}, masq: true},
}

func TestPacketFlows(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			s, fake := newTestSyncer(t, tf, nil)
			if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
				t.Fatalf("sync: %v", err)
			}
			runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, basicFlows)
			golden(t, "basic-"+string(tf.family)+".nft", fake.Dump())
		})
	}
}

func TestMasqueradeAll(t *testing.T) {
	tf := families[0]
	s, fake := newTestSyncer(t, tf, func(c *syncerConfig) { c.masqueradeAll = true })
	if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
		t.Fatal(err)
	}
	runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
		{name: "pod to clusterIP is masqueraded", src: "10.1.2.3", dst: "172.30.0.41", port: 80, verdict: "ACCEPT", dnat: []string{"10.180.0.1:80"}, masq: true},
	})
}

func TestNodePortAddressesAll(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			s, fake := newTestSyncer(t, tf, func(c *syncerConfig) {
				zero := "0.0.0.0/0"
				if tf.family == v1.IPv6Protocol {
					zero = "::/0"
				}
				c.nodePortAddresses = newNPA(tf.family, zero)
			})
			if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
				t.Fatal(err)
			}
			tr := newTracer(t, fake.Fake, tf.nodeIP, tf.ip("192.168.1.77"))
			runFlows(t, tr, tf, []flowCase{
				{name: "NodePort on a secondary node IP", src: "external", dst: "192.168.1.77", port: 3001, verdict: "ACCEPT", dnat: []string{"10.180.0.2:80", "10.180.1.2:80"}, masq: true},
				{name: "no-endpoint NodePort on a secondary node IP", src: "external", dst: "192.168.1.77", port: 3004, verdict: "REJECT"},
			})
			// localhost NodePorts are not served without the gate
			lo := "127.0.0.1"
			if tf.family == v1.IPv6Protocol {
				lo = "::1"
			}
			got := tr.trace(packet{src: lo, dst: lo, proto: "tcp", dport: 3001, fromHost: true})
			if got.verdict != "ACCEPT" || len(got.dnat) != 0 {
				t.Errorf("localhost NodePort must not be DNATed without the gate: %v", got)
			}
		})
	}
}

// With session affinity, above maxRuleBalancedEndpoints a single numgen vmap
// balances; without, one endpoint map rule does at any size. Every form must
// reach every endpoint.
func TestManyEndpoints(t *testing.T) {
	for _, tf := range families {
		t.Run(string(tf.family), func(t *testing.T) {
			for _, n := range []int{maxRuleBalancedEndpoints, maxRuleBalancedEndpoints + 1, 300} {
				for _, affinity := range []int{0, 60} {
					sv := tsvc{ns: "big", name: "big", portName: "p", clusterIP: "172.30.0.90", port: 80, affinitySeconds: affinity}
					var want []string
					for i := range n {
						a := "10.180." + itoa(9+i/250) + "." + itoa(i%250+1)
						sv.eps = append(sv.eps, tep{ip: a, port: 80})
						want = append(want, a+":80")
					}
					s, fake := newTestSyncer(t, tf, nil)
					if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, sv)}); err != nil {
						t.Fatal(err)
					}
					dump := fake.Dump()
					usesVmap := strings.Contains(dump, "vmap {")
					if usesVmap != (affinity > 0 && n > maxRuleBalancedEndpoints) {
						t.Errorf("n=%d affinity=%d: vmap form used=%v", n, affinity, usesVmap)
					}
					usesEndpointMap := strings.Contains(dump, "map @"+endpointMapPrefix)
					if usesEndpointMap != (affinity == 0) {
						t.Errorf("n=%d affinity=%d: endpoint map used=%v", n, affinity, usesEndpointMap)
					}
					runFlows(t, newTracer(t, fake.Fake, tf.nodeIP), tf, []flowCase{
						{name: "n=" + itoa(n) + " affinity=" + itoa(affinity), src: "10.1.2.3", dst: "172.30.0.90", port: 80, verdict: "ACCEPT", dnat: want},
					})
				}
			}
		})
	}
}

// Interface-based detect-local: pod traffic is recognised by its input
// interface instead of its source address.
func TestDetectLocalByInterface(t *testing.T) {
	tf := families[0]
	for _, tc := range []struct {
		name     string
		detector proxyutil.LocalTrafficDetector
		podIf    string
	}{
		{"bridge", proxyutil.NewDetectLocalByBridgeInterface("cbr0"), "cbr0"},
		{"prefix", proxyutil.NewDetectLocalByInterfaceNamePrefix("veth"), "veth1234"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, fake := newTestSyncer(t, tf, func(c *syncerConfig) { c.localDetector = tc.detector })
			if _, err := s.sync(context.Background(), syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
				t.Fatal(err)
			}
			tr := newTracer(t, fake.Fake, tf.nodeIP)
			// svc5: eTP=Local LB without local endpoints.
			fromPod := tr.trace(packet{src: "203.0.113.50", dst: "5.6.7.9", proto: "tcp", dport: 80, iif: tc.podIf})
			if fromPod.verdict != "ACCEPT" || len(fromPod.dnat) != 1 {
				t.Errorf("pod traffic (iif %s) must short-circuit: %v", tc.podIf, fromPod)
			}
			fromOutside := tr.trace(packet{src: "203.0.113.50", dst: "5.6.7.9", proto: "tcp", dport: 80, iif: "eth0"})
			if fromOutside.verdict != "DROP" {
				t.Errorf("external traffic must be dropped: %v", fromOutside)
			}
			// clusterIP from outside the pod interfaces is masqueraded.
			ext := tr.trace(packet{src: "203.0.113.50", dst: "172.30.0.41", proto: "tcp", dport: 80, iif: "eth0"})
			pod := tr.trace(packet{src: "203.0.113.50", dst: "172.30.0.41", proto: "tcp", dport: 80, iif: tc.podIf})
			if !ext.masq || pod.masq {
				t.Errorf("masquerade: external=%v pod=%v", ext, pod)
			}
		})
	}
}

// sync lets go of the models it has turned into rules, so that a cold
// start's models are not kept alive while its transactions are rendered.
func TestSyncReleasesModels(t *testing.T) {
	tf := families[0]
	s, _ := newTestSyncer(t, tf, nil)
	in := syncInput{full: true, services: models(tf.ip, testServices...)}
	if _, err := s.sync(context.Background(), in); err != nil {
		t.Fatal(err)
	}
	for i, m := range in.services {
		if m != nil {
			t.Errorf("services[%d] (%s) still referenced after sync", i, m.owner)
		}
	}
}

// A full sync lists what the kernel holds, but without the table (a cold
// start, or after it was deleted) there is nothing to list: no container's
// elements are asked for, one nft run each on a real host. With the table
// there, every container is listed, and stray elements are removed.
func TestFullSyncListsElementsOnlyWithTheTable(t *testing.T) {
	ctx := context.Background()
	tf := families[0]
	s, nft := newTestSyncer(t, tf, nil)
	ref, refNFT := newTestSyncer(t, tf, nil)
	full := func(step string, want int32) {
		t.Helper()
		before := nft.elementLists.Load()
		for _, sy := range []*syncer{s, ref} {
			if _, err := sy.sync(ctx, syncInput{full: true, services: models(tf.ip, testServices...)}); err != nil {
				t.Fatalf("%s: %v", step, err)
			}
		}
		if got := nft.elementLists.Load() - before; got != want {
			t.Errorf("%s: %d element listings, want %d", step, got, want)
		}
		if diff := cmp.Diff(refNFT.Dump(), nft.Dump()); diff != "" {
			t.Errorf("%s: table differs from a cold start's (-want +got):\n%s", step, diff)
		}
	}
	full("cold start", 0)

	tx := nft.NewTransaction()
	tx.Add(&knftables.Element{Set: clusterIPsSet, Key: []string{tf.ip("172.30.99.99")}})
	if err := nft.Fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	full("table present, one stray element", int32(numContainers)-1) // localhost-nodeport-reject-ports is not enabled

	tx = nft.NewTransaction()
	tx.Delete(&knftables.Table{})
	if err := nft.Fake.Run(ctx, tx); err != nil {
		t.Fatal(err)
	}
	full("table deleted", 0)
}
