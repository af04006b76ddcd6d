package trace

import (
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
)

func pkt(from Origin, iif, src, dst string, port uint16, proto string) Packet {
	return Packet{From: from, InInterface: iif, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), Port: port, Protocol: proto}
}

var semNode = &Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}}

const iptBase = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-A - [0:0]
:KUBE-SEP-1 - [0:0]
:KUBE-SEP-2 - [0:0]
:KUBE-SEP-3 - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-POSTROUTING - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-SERVICES -d 10.0.0.1/32 -p tcp -m comment --comment "ns/a:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-A
-A KUBE-SVC-A -d 10.0.0.1/32 -p tcp -m tcp --dport 80 ! -s 10.1.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.1.0.5:8080" -m recent --name KUBE-SEP-1 --rcheck --seconds 10800 --reap -j KUBE-SEP-1
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.1.0.5:8080" -m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-1
-A KUBE-SVC-A -m comment --comment "ns/a:http -> 10.1.0.6:8080" -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-2
-A KUBE-SVC-A -m comment --comment "ns/a:http -> [fd00::1]:8080" -j KUBE-SEP-3
-A KUBE-SEP-1 -m comment --comment ns/a:http -m recent --set --name KUBE-SEP-1 --mask 255.255.255.255 --rsource -p tcp -m tcp -j DNAT --to-destination 10.1.0.5:8080
-A KUBE-SEP-2 -m comment --comment ns/a:http -p tcp -m tcp -j DNAT --to-destination 10.1.0.6:8080
-A KUBE-SEP-3 -m comment --comment ns/a:http -p tcp -m tcp -j DNAT --to-destination 10.1.0.7:8080
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:DOCKER-USER - [0:0]
-A FORWARD -j DOCKER-USER
-A FORWARD -m conntrack --ctstate INVALID -j DROP
-A FORWARD -d 10.9.9.9/32 -j REJECT --reject-with icmp-port-unreachable
-A DOCKER-USER -s 10.66.0.0/16 -j DROP
-A DOCKER-USER -s 10.77.0.0/16 -m set --match-set blocked src -j DROP
-A DOCKER-USER -j RETURN
-A INPUT -i eth+ -p udp -j DROP
COMMIT
`

func TestIPTablesSemantics(t *testing.T) {
	ipt, err := ParseIPTablesSave(iptBase)
	if err != nil {
		t.Fatal(err)
	}
	recentNode := &Node{LocalAddrs: semNode.LocalAddrs, Recent: map[string][]netip.Addr{"KUBE-SEP-1": {netip.MustParseAddr("10.1.0.9")}}}
	tests := []struct {
		name      string
		ipt       *IPTables
		node      *Node
		pk        Packet
		want      []string
		unknown   string
		foreign   bool
		noForeign bool
	}{
		{name: "three endpoints by statistic, masqueraded from off-cluster", pk: pkt(FromExternal, "eth0", "192.168.0.1", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.6:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.7:8080 masq (33.3%)"}},
		{name: "in-cluster source not masqueraded", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 (33.3%)", "ACCEPT dnat=10.1.0.6:8080 (33.3%)", "ACCEPT dnat=10.1.0.7:8080 (33.3%)"}},
		{name: "affinity: a source in the recent list sticks", node: recentNode, pk: pkt(FromPod, "veth1", "10.1.0.9", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 (100.0%)"}},
		{name: "host traffic goes through OUTPUT", pk: pkt(FromHost, "", "192.168.0.10", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.6:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.7:8080 masq (33.3%)"}},
		{name: "wrong port untouched", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 81, "tcp"), want: []string{"ACCEPT (100.0%)"}},
		{name: "wrong protocol untouched", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 80, "udp"), want: []string{"ACCEPT (100.0%)"}},
		{name: "reject in forward", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.9.9.9", 80, "tcp"), want: []string{"REJECT (100.0%)"}},
		{name: "invalid dropped and not NATed", pk: Packet{From: FromPod, InInterface: "veth1", Src: netip.MustParseAddr("10.1.0.8"), Dst: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: "tcp", Invalid: true},
			want: []string{"DROP (100.0%)"}},
		{name: "interface wildcard on input", pk: pkt(FromExternal, "eth0", "192.168.0.1", "192.168.0.10", 53, "udp"), want: []string{"DROP (100.0%)"}},
		{name: "host traffic to itself has no input interface... until lo", pk: pkt(FromHost, "", "192.168.0.10", "192.168.0.10", 53, "udp"), want: []string{"ACCEPT (100.0%)"}},
		{name: "a foreign chain that is understood is traced and named", pk: pkt(FromPod, "veth1", "10.66.0.1", "10.3.3.3", 80, "tcp"),
			want: []string{"DROP (100.0%)"}, foreign: true},
		{name: "a foreign rule with an unmodelled match is unknown, not guessed", pk: pkt(FromPod, "veth1", "10.77.0.1", "10.3.3.3", 80, "tcp"),
			want: []string{"UNKNOWN (100.0%)"}, unknown: `match module "set" not modelled`},
		{name: "the unmodelled rule does not matter when its modelled part does not match", pk: pkt(FromPod, "veth1", "10.78.0.1", "10.3.3.3", 80, "tcp"),
			want: []string{"ACCEPT (100.0%)"}},
		{name: "drop policy", ipt: ipt.WithPolicy("filter", "FORWARD", "DROP"), pk: pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 80, "tcp"),
			want: []string{"DROP dnat=10.1.0.5:8080 (33.3%)", "DROP dnat=10.1.0.6:8080 (33.3%)", "DROP dnat=10.1.0.7:8080 (33.3%)"}},
		{name: "only kube-proxy's rules: nothing foreign", ipt: mustIPT(t, strings.Replace(strings.Replace(iptBase, "-A FORWARD -j DOCKER-USER\n", "", 1), "-A FORWARD -d 10.9.9.9/32 -j REJECT --reject-with icmp-port-unreachable\n", "", 1)),
			pk: pkt(FromPod, "veth1", "10.1.0.8", "10.9.9.9", 80, "tcp"), want: []string{"ACCEPT (100.0%)"}, noForeign: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := ipt
			if tc.ipt != nil {
				rs = tc.ipt
			}
			node := semNode
			if tc.node != nil {
				node = tc.node
			}
			r, err := rs.Trace(tc.pk, node)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomeSummary(r); !slices.Equal(got, tc.want) {
				var b strings.Builder
				_ = r.WriteText(&b, true)
				t.Errorf("got %q, want %q\n%s", got, tc.want, b.String())
			}
			if tc.unknown != "" && (len(r.Unknowns) != 1 || !strings.Contains(r.Unknowns[0].Reason, tc.unknown)) {
				t.Errorf("unknowns %v, want one saying %q", r.Unknowns, tc.unknown)
			}
			if tc.unknown == "" && len(r.Unknowns) > 0 {
				t.Errorf("unexpected unknowns %v", r.Unknowns)
			}
			if tc.foreign && len(r.Foreign) == 0 {
				t.Errorf("no foreign rules reported")
			}
			if tc.noForeign && len(r.Foreign) > 0 {
				t.Errorf("foreign rules reported: %v", r.Foreign)
			}
		})
	}
}

func mustIPT(t *testing.T, text string) *IPTables {
	t.Helper()
	ipt, err := ParseIPTablesSave(text)
	if err != nil {
		t.Fatal(err)
	}
	return ipt
}

func TestIPTablesParseErrors(t *testing.T) {
	for _, bad := range []string{
		"-A X -j Y\n",                   // rule outside a table
		"*nat\n:X - [0:0]\n-A Y -j Z\n", // undeclared chain
		"*nat\n:X - [0:0]\n-A X -m comment --comment \"open\n", // unterminated quote
		"*nat\nbogus\n",
		"*\n",
	} {
		if _, err := ParseIPTablesSave(bad); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
	// What the tracer cannot model is not a parse error: it is reported
	// when a packet reaches it.
	for _, rule := range []string{
		"-A PREROUTING -m frobnicate -j ACCEPT",
		"-A PREROUTING --frob 1 -j ACCEPT",
		"-A PREROUTING -j NOWHERE",
		"-A PREROUTING -j SNAT --to-source 1.2.3.4",
		"-A PREROUTING -p tcp --sport 80 -j ACCEPT",
		"-A PREROUTING -m statistic --mode nth --every 2 -j ACCEPT",
		// connmark's --mark is not the packet mark the tracer knows.
		"-A PREROUTING -m connmark --mark 0x1 -j ACCEPT",
		"-A PREROUTING -m multiport --dports 80,443 -j ACCEPT",
	} {
		ipt, err := ParseIPTablesSave("*nat\n:PREROUTING ACCEPT [0:0]\n" + rule + "\nCOMMIT\n")
		if err != nil {
			t.Fatalf("%q: %v", rule, err)
		}
		r, err := ipt.Trace(pkt(FromExternal, "eth0", "1.1.1.1", "2.2.2.2", 80, "tcp"), nil)
		if err != nil {
			t.Fatal(err)
		}
		if !r.HasUnknown() || r.Outcomes[0].Verdict != Unknown {
			t.Errorf("%q: want UNKNOWN, got %q", rule, outcomeSummary(r))
		}
	}
}

// Two tables hook prerouting; their base chains run by priority, an accept
// ends only its own base chain, and a drop ends the packet.
const nftBase = `add table ip kube-proxy
add chain ip kube-proxy nat-prerouting { type nat hook prerouting priority -100 ; }
add chain ip kube-proxy nat-output { type nat hook output priority -100 ; }
add chain ip kube-proxy nat-postrouting { type nat hook postrouting priority 100 ; }
add chain ip kube-proxy filter-forward { type filter hook forward priority 0 ; }
add chain ip kube-proxy services
add chain ip kube-proxy service-AAAA-ns/a/tcp/http
add chain ip kube-proxy endpoint-BBBB-ns/a/tcp/http__10.1.0.5/8080
add chain ip kube-proxy endpoint-CCCC-ns/a/tcp/http__10.1.0.6/8080
add chain ip kube-proxy masquerading
add chain ip kube-proxy mark-for-masquerade
add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }
add map ip kube-proxy endpoints-a { typeof numgen random mod 1 : ip daddr . tcp dport ; }
add set ip kube-proxy affinity-BBBB-ns/a/tcp/http__10.1.0.5/8080 { type ipv4_addr ; flags dynamic,timeout ; timeout 3h ; }
add rule ip kube-proxy nat-prerouting jump services
add rule ip kube-proxy nat-output jump services
add rule ip kube-proxy nat-postrouting jump masquerading
add rule ip kube-proxy masquerading mark and 0x4000 != 0 mark set mark xor 0x4000 masquerade fully-random
add rule ip kube-proxy mark-for-masquerade mark set mark or 0x4000
add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips
add rule ip kube-proxy service-AAAA-ns/a/tcp/http ip daddr 10.0.0.1 ip saddr != 10.1.0.0/16 jump mark-for-masquerade
add rule ip kube-proxy service-AAAA-ns/a/tcp/http ip saddr @affinity-BBBB-ns/a/tcp/http__10.1.0.5/8080 goto endpoint-BBBB-ns/a/tcp/http__10.1.0.5/8080
add rule ip kube-proxy service-AAAA-ns/a/tcp/http numgen random mod 3 vmap { 0 : goto endpoint-BBBB-ns/a/tcp/http__10.1.0.5/8080 , 1 : goto endpoint-CCCC-ns/a/tcp/http__10.1.0.6/8080 }
add rule ip kube-proxy service-AAAA-ns/a/tcp/http meta l4proto tcp dnat ip addr . port to numgen random mod 2 offset 0 map @endpoints-a
add rule ip kube-proxy endpoint-BBBB-ns/a/tcp/http__10.1.0.5/8080 update @affinity-BBBB-ns/a/tcp/http__10.1.0.5/8080 { ip saddr }
add rule ip kube-proxy endpoint-BBBB-ns/a/tcp/http__10.1.0.5/8080 meta l4proto tcp dnat to 10.1.0.5:8080
add rule ip kube-proxy endpoint-CCCC-ns/a/tcp/http__10.1.0.6/8080 meta l4proto tcp dnat to 10.1.0.6:8080
add rule ip kube-proxy filter-forward ip daddr 10.9.9.9 reject
add element ip kube-proxy service-ips { 10.0.0.1 . tcp . 80 : goto service-AAAA-ns/a/tcp/http }
add element ip kube-proxy endpoints-a { 0 : 10.1.0.7 . 8080 }
add element ip kube-proxy affinity-BBBB-ns/a/tcp/http__10.1.0.5/8080 { 10.1.0.9 }
add table inet firewall
add chain inet firewall pre { type filter hook prerouting priority -200 ; policy accept ; }
add chain inet firewall fwd { type filter hook forward priority 10 ; policy drop ; }
add rule inet firewall pre iifname "eth*" ip saddr 10.66.0.0/16 drop
add rule inet firewall pre ip saddr 10.77.0.0/16 ct mark 0x1 drop
add rule inet firewall pre accept
add rule inet firewall fwd ip daddr 10.1.0.0/16 accept
`

func TestNFTSemantics(t *testing.T) {
	nft, err := ParseNFTScript(nftBase, "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		pk      Packet
		want    []string
		unknown string
		foreign bool
	}{
		{name: "numgen vmap and the slot map after it: 1/3, 1/3, and 1/3 of which slot 1 is empty",
			pk:   pkt(FromPod, "veth1", "10.1.0.8", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 (33.3%)", "ACCEPT dnat=10.1.0.6:8080 (33.3%)", "ACCEPT dnat=10.1.0.7:8080 (16.7%)", "DROP (16.7%)"}},
		{name: "off-cluster source masqueraded", pk: pkt(FromExternal, "ens3", "192.168.0.1", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.6:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.7:8080 masq (16.7%)", "DROP (16.7%)"}},
		{name: "affinity set hit", pk: pkt(FromPod, "veth1", "10.1.0.9", "10.0.0.1", 80, "tcp"), want: []string{"ACCEPT dnat=10.1.0.5:8080 (100.0%)"}},
		{name: "a reject in kube-proxy's chain", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.9.9.9", 80, "tcp"), want: []string{"REJECT (100.0%)"}},
		{name: "the foreign forward policy drops what it does not accept", pk: pkt(FromPod, "veth1", "10.1.0.8", "10.3.3.3", 80, "tcp"), want: []string{"DROP (100.0%)"}, foreign: true},
		{name: "a foreign drop by interface wildcard", pk: pkt(FromExternal, "eth0", "10.66.0.1", "10.0.0.1", 80, "tcp"), want: []string{"DROP (100.0%)"}, foreign: true},
		{name: "a foreign rule the tracer cannot read is unknown", pk: pkt(FromExternal, "eth0", "10.77.0.1", "10.0.0.1", 80, "tcp"),
			want: []string{"UNKNOWN (100.0%)"}, unknown: "ct mark", foreign: true},
		{name: "host traffic takes the output path", pk: pkt(FromHost, "", "192.168.0.10", "10.0.0.1", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.6:8080 masq (33.3%)", "ACCEPT dnat=10.1.0.7:8080 masq (16.7%)", "ACCEPT masq (16.7%)"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := nft.Trace(tc.pk, semNode)
			if err != nil {
				t.Fatal(err)
			}
			if got := outcomeSummary(r); !slices.Equal(got, tc.want) {
				var b strings.Builder
				_ = r.WriteText(&b, true)
				t.Errorf("got %q, want %q\n%s", got, tc.want, b.String())
			}
			if tc.unknown != "" && (len(r.Unknowns) != 1 || !strings.Contains(r.Unknowns[0].Reason, tc.unknown)) {
				t.Errorf("unknowns %v, want one saying %q", r.Unknowns, tc.unknown)
			}
			if tc.unknown == "" && len(r.Unknowns) > 0 {
				t.Errorf("unexpected unknowns %v", r.Unknowns)
			}
			if tc.foreign && len(r.Foreign) == 0 {
				t.Errorf("no foreign rules reported")
			}
		})
	}
}

func TestNFTScriptErrors(t *testing.T) {
	for _, bad := range []string{
		"add rule ip nosuch chain accept\n",
		"add table ip t\nadd rule ip t nochain accept\n",
		"add table ip t\nadd element ip t noset { 1 }\n",
		"add table ip t\nadd set ip t s { type ipv4_addr ; }\nadd element ip t s 1.2.3.4\n",
		"frobnicate\n",
		"add table bogus t\n",
	} {
		if _, err := ParseNFTScript(bad, "kube-proxy"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestNFTJSONErrors(t *testing.T) {
	for _, bad := range []string{
		``, `{`, `[]`, `{"foo": 1}`,
		`{"nftables": [{"table": {"family": "ip"}}]}`,
		`{"nftables": [{"chain": {"family": "ip", "table": "t", "name": "c", "prio": "sideways"}}]}`,
		`{"nftables": [{"map": {"family": "ip", "table": "t", "name": "m", "elem": [1]}}]}`,
	} {
		if _, err := ParseNFTJSON([]byte(bad), "kube-proxy"); err == nil {
			t.Errorf("%q: no error", bad)
		}
	}
}

func TestPacketValidation(t *testing.T) {
	ipt, _ := ParseIPTablesSave("")
	for _, pk := range []Packet{
		{},
		{Src: netip.MustParseAddr("1.1.1.1"), Dst: netip.MustParseAddr("::1"), Protocol: "tcp"},
		{Src: netip.MustParseAddr("1.1.1.1"), Dst: netip.MustParseAddr("2.2.2.2"), Protocol: "icmp"},
		{Src: netip.MustParseAddr("1.1.1.1"), Dst: netip.MustParseAddr("2.2.2.2"), Protocol: "tcp", From: 7},
	} {
		if _, err := ipt.Trace(pk, nil); err == nil {
			t.Errorf("%+v: no error", pk)
		}
	}
}

// A rule edited behind kube-proxy's back, and a missing element, show up
// as differences; the same rules read twice show none.
func TestCompare(t *testing.T) {
	script, js, ipt := loadCluster(t)
	if d := CompareIPTables(ipt, ipt, 0); len(d) != 0 {
		t.Errorf("a ruleset differs from itself: %v", d)
	}
	edited := strings.Replace(readTestdata(t, "cluster-node1.iptables-save"), "--probability 0.50000000000", "--probability 0.90000000000", 1)
	ipt2, err := ParseIPTablesSave(edited)
	if err != nil {
		t.Fatal(err)
	}
	if d := CompareIPTables(ipt2, ipt, 0); len(d) != 1 || !strings.Contains(d[0].Live, "0.9") {
		t.Errorf("edited probability: %v", d)
	}
	// Rules kube-proxy does not own do not count.
	foreign, err := ParseIPTablesSave(readTestdata(t, "cluster-node1.iptables-save") + "*raw\n:PREROUTING ACCEPT [0:0]\n:CALI-X - [0:0]\n-A PREROUTING -j CALI-X\nCOMMIT\n")
	if err != nil {
		t.Fatal(err)
	}
	if d := CompareIPTables(foreign, ipt, 0); len(d) != 0 {
		t.Errorf("foreign chains counted: %v", d)
	}
	// The nfacct counting rule a live kube-proxy adds (the testdata has it)
	// and a dry run does not is not a difference.
	var kept []string
	for _, line := range strings.Split(readTestdata(t, "cluster-node1.iptables-save"), "\n") {
		if !strings.Contains(line, "localhost_nps_accepted_pkts") {
			kept = append(kept, line)
		}
	}
	uncounted, err := ParseIPTablesSave(strings.Join(kept, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	if d := CompareIPTables(ipt, uncounted, 0); len(d) != 0 {
		t.Errorf("localhost NodePort counter counted: %v", d)
	}

	if d := CompareNFT(js, script, 0); len(d) != 0 {
		t.Errorf("JSON and script differ: %v", d)
	}
	edScript := strings.Replace(readTestdata(t, "cluster-node1.nft"), "add element ip kube-proxy service-ips { 10.96.0.10 . tcp . 80 : goto", "add element ip kube-proxy service-ips { 10.96.0.99 . tcp . 80 : goto", 1)
	script2, err := ParseNFTScript(edScript, "kube-proxy")
	if err != nil {
		t.Fatal(err)
	}
	d := CompareNFT(js, script2, 0)
	if len(d) != 2 || d[0].Live == "" || d[1].Expected == "" {
		t.Errorf("moved element: %v", d)
	}
	if d := CompareNFT(js, script2, 1); len(d) != 1 {
		t.Errorf("limit 1: %d differences", len(d))
	}
}

func readTestdata(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestAnnotations(t *testing.T) {
	for _, tc := range []struct{ name, svc, ep string }{
		{"service-AXK6CI2C-demo/web/tcp/http", "demo/web:http", ""},
		{"endpoint-YVAMPADO-kube-system/kube-dns/udp/dns__198.19.1.53/53", "kube-system/kube-dns:dns", "198.19.1.53:53"},
		{"endpoint-X-ns/s/tcp/p__fd00::1/65535", "ns/s:p", "[fd00::1]:65535"},
		{"endpoint-X-ns/s/tcp/p__10.0.0.1/65536", "ns/s:p", "10.0.0.1:0"},
		{"services", "", ""},
		{"service-nohash", "", ""},
	} {
		if svc, ep := annotateNFTName(tc.name); svc != tc.svc || ep != tc.ep {
			t.Errorf("annotateNFTName(%q) = %q, %q; want %q, %q", tc.name, svc, ep, tc.svc, tc.ep)
		}
	}
	for _, tc := range []struct{ comment, svc, ep string }{
		{"ns1/svc1:p80 cluster IP", "ns1/svc1:p80", ""},
		{"ns1/svc1:p80 -> 10.0.1.1:8080", "ns1/svc1:p80", "10.0.1.1:8080"},
		{"pod traffic for ns2/web:https external destinations", "ns2/web:https", ""},
		{"ns2/web", "ns2/web", ""},
		{"kubernetes service portals", "", ""},
	} {
		if svc, ep := annotateComment(tc.comment); svc != tc.svc || ep != tc.ep {
			t.Errorf("annotateComment(%q) = %q, %q; want %q, %q", tc.comment, svc, ep, tc.svc, tc.ep)
		}
	}
}
