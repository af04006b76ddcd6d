package trace

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

// testdata/cluster-node1.* are the rules kube-proxy programs for node-1 of
// examples/cluster (IPv4): the nftables --dry-run script, and what the
// kernel gave back after kube-proxy programmed a private network namespace
// (nft -j list ruleset, iptables-save). The tracer must read all three and
// give the same answers from the script and the kernel's JSON.

func loadCluster(t testing.TB) (script, js *NFTables, ipt *IPTables) {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile("testdata/" + name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var err error
	if script, err = ParseNFTScript(string(read("cluster-node1.nft")), "kube-proxy"); err != nil {
		t.Fatalf("script: %v", err)
	}
	if js, err = ParseNFTJSON(read("cluster-node1.nft.json"), "kube-proxy"); err != nil {
		t.Fatalf("JSON: %v", err)
	}
	if ipt, err = ParseIPTablesSave(string(read("cluster-node1.iptables-save"))); err != nil {
		t.Fatalf("iptables-save: %v", err)
	}
	return script, js, ipt
}

var clusterNode = &Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("198.18.0.10")}}

// clusterPackets covers every Service kind of examples/cluster, from a pod,
// from outside and from the node.
func clusterPackets() []Packet {
	ip := netip.MustParseAddr
	pod := func(dst string, port uint16, proto string) Packet {
		return Packet{Src: ip("198.19.1.99"), Dst: ip(dst), Port: port, Protocol: proto, From: FromPod, InInterface: "veth9"}
	}
	ext := func(src, dst string, port uint16) Packet {
		return Packet{Src: ip(src), Dst: ip(dst), Port: port, Protocol: "tcp", From: FromExternal, InInterface: "eth0"}
	}
	host := func(dst string, port uint16) Packet {
		return Packet{Src: ip("198.18.0.10"), Dst: ip(dst), Port: port, Protocol: "tcp", From: FromHost}
	}
	return []Packet{
		pod("10.96.0.10", 80, "tcp"),           // web: two endpoints
		pod("10.96.0.11", 443, "tcp"),          // api: NodePort, one endpoint
		pod("10.96.0.12", 80, "tcp"),           // lb
		pod("10.96.0.13", 80, "tcp"),           // local
		pod("10.96.0.14", 80, "tcp"),           // dual
		pod("10.96.0.53", 53, "udp"),           // dns, affinity
		pod("10.96.0.53", 53, "tcp"),           // dns-tcp
		pod("10.96.0.10", 81, "tcp"),           // a cluster IP's unused port
		pod("10.96.0.99", 80, "tcp"),           // an unallocated cluster IP
		pod("10.96.0.53", 53, "sctp"),          // wrong protocol
		ext("203.0.113.9", "198.18.100.1", 80), // LB, source not allowed
		ext("198.18.7.7", "198.18.100.1", 80),  // LB, allowed range
		ext("203.0.113.9", "198.18.100.2", 80), // eTP=Local LB
		ext("203.0.113.9", "198.18.0.10", 30443),
		ext("203.0.113.9", "198.18.0.10", 30081),
		host("10.96.0.10", 80),
		host("198.18.0.10", 30443),
	}
}

func outcomeSummary(r *Result) []string {
	var s []string
	for _, o := range r.Outcomes {
		s = append(s, fmt.Sprintf("%s (%.1f%%)", o.Key(), o.Probability*100))
	}
	return s
}

func TestClusterScriptAndKernelJSONAgree(t *testing.T) {
	script, js, _ := loadCluster(t)
	for _, pk := range clusterPackets() {
		a, err := script.Trace(pk, clusterNode)
		if err != nil {
			t.Fatalf("%s: %v", pk, err)
		}
		b, err := js.Trace(pk, clusterNode)
		if err != nil {
			t.Fatalf("%s: %v", pk, err)
		}
		if a.HasUnknown() || b.HasUnknown() {
			t.Errorf("%s: unknowns: script %v, JSON %v", pk, a.Unknowns, b.Unknowns)
		}
		if x, y := outcomeSummary(a), outcomeSummary(b); !slices.Equal(x, y) {
			t.Errorf("%s:\nscript: %q\nJSON:   %q", pk, x, y)
		}
	}
	if d := CompareNFT(js, script, 0); len(d) != 0 {
		t.Errorf("kernel JSON and script differ: %v", d)
	}
}

// Both modes send the same packets to the same endpoints with the same
// probabilities: the tracer reads each mode's load-balancing correctly.
func TestClusterModesAgree(t *testing.T) {
	_, nft, ipt := loadCluster(t)
	want := map[string][]string{
		"10.96.0.10:80":  {"ACCEPT dnat=198.19.1.10:8080 (50.0%)", "ACCEPT dnat=198.19.2.10:8080 (50.0%)"},
		"10.96.0.11:443": {"ACCEPT dnat=198.19.1.11:8443 (100.0%)"},
		"10.96.0.53:53":  {"ACCEPT dnat=198.19.1.53:53 (50.0%)", "ACCEPT dnat=198.19.2.53:53 (50.0%)"},
	}
	for _, pk := range clusterPackets()[:7] {
		if pk.Protocol != "tcp" && pk.Protocol != "udp" {
			continue
		}
		a, err := nft.Trace(pk, clusterNode)
		if err != nil {
			t.Fatal(err)
		}
		b, err := ipt.Trace(pk, clusterNode)
		if err != nil {
			t.Fatal(err)
		}
		if b.HasUnknown() {
			t.Errorf("%s: iptables unknowns: %v", pk, b.Unknowns)
		}
		if x, y := outcomeSummary(a), outcomeSummary(b); !slices.Equal(x, y) {
			t.Errorf("%s:\nnftables: %q\niptables: %q", pk, x, y)
		}
		if w, ok := want[hostPort(pk.Dst, pk.Port)]; ok && !slices.Equal(outcomeSummary(a), w) {
			t.Errorf("%s: got %q, want %q", pk, outcomeSummary(a), w)
		}
	}
}

// Every outcome is annotated with the Service it belongs to.
func TestClusterAnnotations(t *testing.T) {
	script, _, ipt := loadCluster(t)
	pk := clusterPackets()[5] // dns/udp
	for _, tr := range []Tracer{script, ipt} {
		r, err := tr.Trace(pk, clusterNode)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range r.Outcomes {
			if o.Service != "kube-system/kube-dns:dns" || o.Endpoint != o.DNAT || len(o.AffinitySet) != 1 {
				t.Errorf("%s: outcome %s: service %q endpoint %q affinity %v", tr.Mode(), o.Key(), o.Service, o.Endpoint, o.AffinitySet)
			}
		}
		var b strings.Builder
		if err := r.WriteText(&b, false); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), "service kube-system/kube-dns:dns") {
			t.Errorf("%s: text lacks the service:\n%s", tr.Mode(), b.String())
		}
	}
}
