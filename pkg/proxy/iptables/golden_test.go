//go:build linux

package iptables

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/utils/ptr"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// representativeCluster has one of everything the proxier renders.
func representativeCluster(f fam) scenario {
	return scenario{
		services: []*v1.Service{
			// ClusterIP, two endpoints.
			f.stdService(nil),
			// NodePort + LB with source ranges, eTP Local, health check,
			// external IP, ClientIP affinity.
			st.NewService("ns2", "web", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeLoadBalancer
				s.Spec.ClusterIP = f.svc(2)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("https", 443, v1.ProtocolTCP, 30443)}
				s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = 30000
				s.Spec.ExternalIPs = []string{f.extIP}
				s.Spec.LoadBalancerSourceRanges = []string{f.cidr(f.external), f.cidr(f.node)}
				s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](600)}}
				s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: f.lb}}
			}),
			// No endpoints.
			st.NewService("ns3", "empty", func(s *v1.Service) {
				s.Spec.Type = v1.ServiceTypeNodePort
				s.Spec.ClusterIP = f.svc(3)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("", 8080, v1.ProtocolUDP, 30080)}
			}),
			// iTP Local, no local endpoints.
			st.NewService("ns4", "local-only", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(4)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 0)}
				s.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
			}),
		},
		slices: []*discovery.EndpointSlice{
			f.stdSlice(),
			st.Slice("ns2", "web", "web-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("https", 8443, v1.ProtocolTCP)},
				st.EP{IP: f.pod(2), Node: testNodeName}, st.EP{IP: f.rpod(2), Node: "node2"}, st.EP{IP: f.rpod(3), Node: "node3"}),
			st.Slice("ns4", "local-only", "local-only-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)},
				st.EP{IP: f.rpod(4), Node: "node2"}),
		},
	}
}

// TestGolden keeps a readable copy of a full sync's restore input for a
// representative cluster. The behaviour tests, not this file, decide what is
// correct; this shows what changed. Regenerate with `go test -run TestGolden -update`.
func TestGolden(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			env := setupScenario(t, f, representativeCluster(f))
			got := env.restore[len(env.restore)-1]
			path := filepath.Join("testdata", "full-sync-"+strings.ToLower(string(f.family))+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if !bytes.Equal(want, []byte(got)) {
				t.Errorf("%s differs from the current output (run with -update if the change is intended):\n%s", path, lineDiff(string(want), got))
			}
		})
	}
}

// lineDiff lists lines only in a ("-") or only in b ("+").
func lineDiff(a, b string) string {
	in := func(s string) map[string]int {
		m := map[string]int{}
		for _, l := range strings.Split(s, "\n") {
			m[l]++
		}
		return m
	}
	ma, mb := in(a), in(b)
	var out strings.Builder
	for _, l := range strings.Split(a, "\n") {
		if mb[l] == 0 {
			out.WriteString("- " + l + "\n")
		}
	}
	for _, l := range strings.Split(b, "\n") {
		if ma[l] == 0 {
			out.WriteString("+ " + l + "\n")
		}
	}
	return out.String()
}

// TestUpstreamParity compares our full-sync output with what upstream
// kube-proxy v1.37.2's iptables proxier wrote for the same cluster
// (representativeCluster, node 192.168.0.2 / fd00:192::2, nfacct available;
// testdata/upstream-v1.37.2-*.txt, captured from upstream's NewProxier with a
// recording iptables interface). Upstream orders services by map iteration,
// so lines are compared as sorted multisets; the order inside each chain is
// pinned by the probabilities and by the behaviour tests.
func TestUpstreamParity(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			sc := representativeCluster(f)
			sc.cfg.nfacct = true
			env := setupScenario(t, f, sc)
			ours := strings.Split(strings.TrimSpace(env.restore[len(env.restore)-1]), "\n")
			raw, err := os.ReadFile(filepath.Join("testdata", "upstream-v1.37.2-"+strings.ToLower(string(f.family))+".txt"))
			if err != nil {
				t.Fatal(err)
			}
			theirs := strings.Split(strings.TrimSpace(string(raw)), "\n")
			slices.Sort(ours)
			slices.Sort(theirs)
			if !slices.Equal(ours, theirs) {
				t.Errorf("output differs from upstream v1.37.2:\n%s", lineDiff(strings.Join(theirs, "\n"), strings.Join(ours, "\n")))
			}
		})
	}
}
