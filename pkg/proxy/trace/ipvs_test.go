package trace

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestParseIPSets(t *testing.T) {
	save := `create A hash:ip,port family inet hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0x3828f0d7
add A 10.0.0.2,udp:53
add A 10.0.0.1,tcp:80 comment "x y"
create B bitmap:port range 0-65535 comment
add B 30080
create C hash:ip,port,net family inet6 hashsize 1024 maxelem 65536
add C fd00::1,tcp:80,2001:db8::/64
create D hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add D 10.0.0.1,sctp:80,10.0.0.1 timeout 30
create E hash:net family inet hashsize 1024 maxelem 65536
add E 10.1.0.0/16
add E 10.1.2.0/24 nomatch
create F hash:ip family inet6 hashsize 1024 maxelem 65536
add F fd00::5
create G hash:net,iface family inet hashsize 1024 maxelem 65536
add G 10.0.0.0/8,eth0
`
	list := `Name: A
Type: hash:ip,port
Revision: 7
Header: family inet hashsize 1024 maxelem 65536 comment bucketsize 12 initval 0x3828f0d7
Size in memory: 364
References: 0
Number of entries: 2
Members:
10.0.0.2,udp:53
10.0.0.1,tcp:80 comment "x: y"

Name: B
Type: bitmap:port
Revision: 3
Header: range 0-65535 comment
Size in memory: 532552
References: 0
Number of entries: 1
Members:
30080
`
	for _, tc := range []struct {
		name    string
		text    string
		want    map[string][]string // name -> type, family, members...
		wantErr string
	}{
		{name: "ipset save", text: save, want: map[string][]string{
			"A": {"hash:ip,port", "inet", "10.0.0.2,udp:53", `10.0.0.1,tcp:80 comment "x y"`},
			"B": {"bitmap:port", "", "30080"},
			"C": {"hash:ip,port,net", "inet6", "fd00::1,tcp:80,2001:db8::/64"},
			"D": {"hash:ip,port,ip", "inet", "10.0.0.1,sctp:80,10.0.0.1 timeout 30"},
			"E": {"hash:net", "inet", "10.1.0.0/16", "10.1.2.0/24 nomatch"},
			"F": {"hash:ip", "inet6", "fd00::5"},
			"G": {"hash:net,iface", "inet", "10.0.0.0/8,eth0"},
		}},
		{name: "ipset list", text: list, want: map[string][]string{
			"A": {"hash:ip,port", "inet", "10.0.0.2,udp:53", `10.0.0.1,tcp:80 comment "x: y"`},
			"B": {"bitmap:port", "", "30080"},
		}},
		{name: "empty", text: "", want: map[string][]string{}},
		{name: "member before create", text: "add A 1.2.3.4\n", wantErr: "before it is created"},
		{name: "created twice", text: "create A hash:ip\ncreate A hash:ip\n", wantErr: "created twice"},
		{name: "bad address", text: "create A hash:ip family inet\nadd A 1.2.3\n", wantErr: `member "1.2.3"`},
		{name: "bad port", text: "create A hash:ip,port family inet\nadd A 1.2.3.4,tcp:99999\n", wantErr: "port"},
		{name: "too few parts", text: "create A hash:ip,port,ip family inet\nadd A 1.2.3.4,tcp:80\n", wantErr: "want 3 comma-separated parts"},
		{name: "bad family", text: "create A hash:ip family ipx\n", wantErr: "family"},
		{name: "garbage", text: "hello\n", wantErr: "unexpected"},
		{name: "list without type", text: "Name: A\nMembers:\n1.2.3.4\n", wantErr: "type missing"},
		{name: "netmask is kept but not modelled", text: "create N hash:ip family inet netmask 24\nadd N 10.0.0.0\n", want: map[string][]string{
			"N": {"hash:ip", "inet", "10.0.0.0"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sets, err := ParseIPSets(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := map[string][]string{}
			for _, s := range sets {
				got[s.Name] = append([]string{s.Type, s.Family}, s.Members...)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("sets %v, want %v", got, tc.want)
			}
			for n, w := range tc.want {
				if !slices.Equal(got[n], w) {
					t.Errorf("set %s: %q, want %q", n, got[n], w)
				}
			}
		})
	}
}

func TestIPSetTest(t *testing.T) {
	a := netip.MustParseAddr
	mk := func(typ, fam string, members ...string) *IPSet {
		s, err := NewIPSet("S", typ, fam, members)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, tc := range []struct {
		name        string
		set         *IPSet
		flags       string
		src, dst    string
		proto       string
		port        uint16
		want        bool
		wantUnknown string
	}{
		{"hash:ip,port hit", mk("hash:ip,port", "inet", "10.0.0.1,tcp:80"), "dst,dst", "1.1.1.1", "10.0.0.1", "tcp", 80, true, ""},
		{"hash:ip,port other protocol", mk("hash:ip,port", "inet", "10.0.0.1,tcp:80"), "dst,dst", "1.1.1.1", "10.0.0.1", "udp", 80, false, ""},
		{"hash:ip,port default protocol is tcp", mk("hash:ip,port", "inet", "10.0.0.1,80"), "dst,dst", "1.1.1.1", "10.0.0.1", "tcp", 80, true, ""},
		{"hash:ip,port src address", mk("hash:ip,port", "inet", "1.1.1.1,tcp:80"), "src,dst", "1.1.1.1", "10.0.0.1", "tcp", 80, true, ""},
		{"fewer flags than dimensions never match", mk("hash:ip,port", "inet", "10.0.0.1,tcp:80"), "dst", "1.1.1.1", "10.0.0.1", "tcp", 80, false, ""},
		{"source port is not traced", mk("hash:ip,port", "inet", "10.0.0.1,tcp:80"), "dst,src", "1.1.1.1", "10.0.0.1", "tcp", 80, false, "source port"},
		{"other family never matches", mk("hash:ip,port", "inet6", "fd00::1,tcp:80"), "dst,dst", "1.1.1.1", "10.0.0.1", "tcp", 80, false, ""},
		{"bitmap:port", mk("bitmap:port", "", "30080"), "dst", "1.1.1.1", "10.0.0.1", "udp", 30080, true, ""},
		{"bitmap:port miss", mk("bitmap:port", "", "30080"), "dst", "1.1.1.1", "10.0.0.1", "udp", 30081, false, ""},
		{"hash:ip,port,ip hairpin", mk("hash:ip,port,ip", "inet", "10.1.0.5,tcp:8080,10.1.0.5"), "dst,dst,src", "10.1.0.5", "10.1.0.5", "tcp", 8080, true, ""},
		{"hash:ip,port,ip other source", mk("hash:ip,port,ip", "inet", "10.1.0.5,tcp:8080,10.1.0.5"), "dst,dst,src", "10.1.0.6", "10.1.0.5", "tcp", 8080, false, ""},
		{"hash:ip,port,net in range", mk("hash:ip,port,net", "inet", "10.0.0.1,tcp:80,203.0.113.0/24"), "dst,dst,src", "203.0.113.9", "10.0.0.1", "tcp", 80, true, ""},
		{"hash:ip,port,net out of range", mk("hash:ip,port,net", "inet", "10.0.0.1,tcp:80,203.0.113.0/24"), "dst,dst,src", "203.0.114.9", "10.0.0.1", "tcp", 80, false, ""},
		{"hash:ip", mk("hash:ip", "inet6", "fd00::5"), "dst", "fd00::1", "fd00::5", "tcp", 1, true, ""},
		{"hash:net", mk("hash:net", "inet", "10.1.0.0/16", "10.1.2.0/24 nomatch"), "src", "10.1.3.4", "10.0.0.1", "tcp", 1, true, ""},
		{"hash:net nomatch carves a hole", mk("hash:net", "inet", "10.1.0.0/16", "10.1.2.0/24 nomatch"), "src", "10.1.2.4", "10.0.0.1", "tcp", 1, false, ""},
		{"unmodelled type", mk("hash:net,iface", "inet", "10.0.0.0/8,eth0"), "src,src", "10.1.2.4", "10.0.0.1", "tcp", 1, false, "does not model"},
		{"unknown flag", mk("hash:ip", "inet", "10.0.0.1"), "dst,dst,foo", "1.1.1.1", "10.0.0.1", "tcp", 1, false, "flag"},
		{"netmask", func() *IPSet {
			s, err := ParseIPSets("create N hash:ip family inet netmask 24\nadd N 10.0.0.0\n")
			if err != nil {
				t.Fatal(err)
			}
			return s[0]
		}(), "dst", "1.1.1.1", "10.0.0.1", "tcp", 1, false, "netmask 24"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, why := tc.set.test(strings.Split(tc.flags, ","), a(tc.src), a(tc.dst), tc.proto, tc.port)
			if tc.wantUnknown != "" {
				if !strings.Contains(why, tc.wantUnknown) {
					t.Fatalf("unknown %q, want one saying %q", why, tc.wantUnknown)
				}
				return
			}
			if why != "" || got != tc.want {
				t.Errorf("match %v (unknown %q), want %v", got, why, tc.want)
			}
		})
	}
}

const ipvsadmText = `IP Virtual Server version 1.2.1 (size=4096)
Prot LocalAddress:Port Scheduler Flags
  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn
TCP  10.96.0.1:443 rr
  -> 192.168.0.10:6443            Masq    1      0          0
TCP  10.96.0.10:80 wrr persistent 10800
  -> 10.1.0.5:8080                Masq    3      0          0
  -> 10.1.0.6:8080                Masq    1      0          0
  -> 10.1.0.7:8080                Masq    0      4          0
UDP  [fd00::10]:53 sh sh-port
  -> [fd00::2]:5353               Masq    1      0          0
TCP  10.96.0.11:80 rr
TCP  10.96.0.12:80 rr
  -> 10.2.0.5:8080                Route   1      0          0
FWM  4242 rr
  -> 10.1.0.9:80                  Masq    1      0          0
`

func TestParseIPVSAdm(t *testing.T) {
	vss, err := ParseIPVSAdm(ipvsadmText)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, vs := range vss {
		s := vs.String() + " " + vs.Scheduler
		if vs.Persistent {
			s += " persistent " + strconv.Itoa(int(vs.Timeout))
		}
		if len(vs.Flags) > 0 {
			s += " [" + strings.Join(vs.Flags, ",") + "]"
		}
		for _, rs := range vs.RealServers {
			s += " -> " + rs.String() + " " + rs.Forward + " " + strconv.Itoa(rs.Weight)
		}
		got = append(got, s)
	}
	want := []string{
		"10.96.0.1:443/TCP rr -> 192.168.0.10:6443 Masq 1",
		"10.96.0.10:80/TCP wrr persistent 10800 -> 10.1.0.5:8080 Masq 3 -> 10.1.0.6:8080 Masq 1 -> 10.1.0.7:8080 Masq 0",
		"[fd00::10]:53/UDP sh [sh-port] -> [fd00::2]:5353 Masq 1",
		"10.96.0.11:80/TCP rr",
		"10.96.0.12:80/TCP rr -> 10.2.0.5:8080 Route 1",
		"fwmark 4242 rr -> 10.1.0.9:80 Masq 1",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, tc := range []struct{ text, want string }{
		{"  -> 10.1.0.5:8080 Masq 1 0 0\n", "before any virtual server"},
		{"TCP 10.0.0.1 rr\n", "virtual server"},
		{"ICMP 10.0.0.1:0 rr\n", "protocol"},
		{"TCP 10.0.0.1:80 rr persistent x\n", "persistence timeout"},
		{"TCP 10.0.0.1:80 rr\n  -> 10.1.0.5:8080 Masq -1 0 0\n", "weight"},
		{"TCP 10.0.0.1:80\n", "want"},
	} {
		if _, err := ParseIPVSAdm(tc.text); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one saying %q", tc.text, err, tc.want)
		}
	}
}

// ipvsBase is a small ipvs-mode node: cluster IP 10.96.0.10:80 (wrr,
// persistent, one draining real server), 10.96.0.11:80 without real
// servers, 10.96.0.12:80 with a Route real server, node port 30080.
const ipvsBase = `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-NODE-PORT - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
-A KUBE-SERVICES -m comment --comment "cluster ip" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 10.1.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m addrtype --dst-type LOCAL -j KUBE-NODE-PORT
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-NODE-PORT -p tcp -m set --match-set KUBE-NODE-PORT-TCP dst -j KUBE-MARK-MASQ
-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-IPVS-FILTER - [0:0]
:KUBE-IPVS-OUT-FILTER - [0:0]
:KUBE-EXT - [0:0]
-A INPUT -j KUBE-IPVS-FILTER
-A INPUT -j KUBE-EXT
-A OUTPUT -j KUBE-IPVS-OUT-FILTER
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
-A KUBE-IPVS-OUT-FILTER -s 10.96.0.13/32 -m ipvs --vaddr 10.96.0.13/32 --vproto tcp --vport 80 -j DROP
-A KUBE-EXT -d 10.96.0.14/32 -m physdev ! --physdev-is-in -j DROP
-A KUBE-EXT -d 10.96.0.15/32 -m set --match-set NOT-THERE dst -j DROP
COMMIT
`

const ipvsSets = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.11,tcp:80
add KUBE-CLUSTER-IP 10.96.0.12,tcp:80
add KUBE-CLUSTER-IP 10.96.0.13,tcp:80
add KUBE-CLUSTER-IP 10.96.0.14,tcp:80
add KUBE-CLUSTER-IP 10.96.0.15,tcp:80
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add KUBE-LOOP-BACK 10.1.0.5,tcp:8080,10.1.0.5
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536
add KUBE-IPVS-IPS 10.96.0.10
add KUBE-IPVS-IPS 10.96.0.11
add KUBE-IPVS-IPS 10.96.0.12
add KUBE-IPVS-IPS 10.96.0.13
`

func newTestIPVS(t testing.TB) *IPVS {
	t.Helper()
	ipt, err := ParseIPTablesSave(ipvsBase)
	if err != nil {
		t.Fatal(err)
	}
	sets, err := ParseIPSets(ipvsSets)
	if err != nil {
		t.Fatal(err)
	}
	vss, err := ParseIPVSAdm(ipvsadmText + `TCP  192.168.0.10:30080 rr
  -> 10.1.0.6:8080                Masq    1      0          0
TCP  10.96.0.13:80 rr
  -> 10.1.0.6:8080                Masq    1      0          0
TCP  10.96.0.14:80 rr
  -> 10.1.0.6:8080                Masq    1      0          0
TCP  10.96.0.15:80 rr
  -> 10.1.0.6:8080                Masq    1      0          0
`)
	if err != nil {
		t.Fatal(err)
	}
	var bound []netip.Addr
	for _, s := range []string{"10.96.0.1", "10.96.0.10", "10.96.0.11", "10.96.0.12", "10.96.0.13", "10.96.0.14", "10.96.0.15"} {
		bound = append(bound, netip.MustParseAddr(s))
	}
	v, err := NewIPVS(ipt, sets, vss, bound)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestIPVSSemantics(t *testing.T) {
	v := newTestIPVS(t)
	node := &Node{LocalAddrs: []netip.Addr{netip.MustParseAddr("192.168.0.10")}, Bridges: []string{"cni0"}}
	for _, tc := range []struct {
		name string
		pk   Packet
		node *Node
		// want is "KEY probability" per outcome.
		want        []string
		wantUnknown string
		check       func(t *testing.T, r *Result)
	}{
		{name: "wrr by weight, draining real server left out, pod source not masqueraded",
			pk:   pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.10", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 0.75", "ACCEPT dnat=10.1.0.6:8080 0.25"},
			check: func(t *testing.T, r *Result) {
				o := r.Outcomes[0]
				if o.IPVS == nil || o.IPVS.PersistenceTimeout != 10800 || o.IPVS.Scheduler != "wrr" ||
					!slices.Equal(o.IPVS.Draining, []string{"10.1.0.7:8080"}) || len(o.IPVS.Candidates) != 2 {
					t.Errorf("ipvs %+v", o.IPVS)
				}
				if len(o.AffinitySet) != 1 || !strings.Contains(o.AffinitySet[0], "persistence") {
					t.Errorf("affinity %v, want the persistence template", o.AffinitySet)
				}
			}},
		{name: "hairpin is masqueraded by KUBE-LOOP-BACK",
			pk:   pkt(FromPod, "cni0", "10.1.0.5", "10.96.0.10", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq 0.75", "ACCEPT dnat=10.1.0.6:8080 0.25"}},
		{name: "off-cluster source is marked and masqueraded",
			pk:   pkt(FromExternal, "eth0", "203.0.113.9", "10.96.0.10", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq 0.75", "ACCEPT dnat=10.1.0.6:8080 masq 0.25"}},
		{name: "from the node: IPVS takes it in OUTPUT",
			pk:   pkt(FromHost, "", "10.96.0.10", "10.96.0.10", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.5:8080 masq 0.75", "ACCEPT dnat=10.1.0.6:8080 masq 0.25"}},
		{name: "rr is even whatever the weights",
			pk:   pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.1", 443, "tcp"),
			want: []string{"ACCEPT dnat=192.168.0.10:6443 1"}},
		{name: "node port",
			pk:   pkt(FromExternal, "eth0", "203.0.113.9", "192.168.0.10", 30080, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.6:8080 masq 1"}},
		{name: "virtual server without real servers answers port unreachable",
			pk:   pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.11", 80, "tcp"),
			want: []string{"REJECT 1"},
			check: func(t *testing.T, r *Result) {
				if r.Outcomes[0].IPVS == nil {
					t.Error("the reject does not name the virtual server")
				}
			}},
		{name: "other port on a service address is rejected by KUBE-IPVS-FILTER",
			pk:   pkt(FromExternal, "eth0", "203.0.113.9", "10.96.0.10", 22, "tcp"),
			want: []string{"REJECT 1"}},
		{name: "other port on the node goes to the host",
			pk:   pkt(FromExternal, "eth0", "203.0.113.9", "192.168.0.10", 22, "tcp"),
			want: []string{"ACCEPT 1"}},
		{name: "not for this node is forwarded",
			pk:   pkt(FromPod, "cni0", "10.1.0.8", "10.1.0.9", 80, "tcp"),
			want: []string{"ACCEPT 1"}},
		{name: "-m ipvs matches the virtual server after IPVS took the packet",
			pk:   pkt(FromHost, "", "10.96.0.13", "10.96.0.13", 80, "tcp"),
			want: []string{"DROP dnat=10.1.0.6:8080 1"}},
		{name: "a forwarding method other than Masq is unknown",
			pk:          pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.12", 80, "tcp"),
			wantUnknown: "forwarding method \"Route\""},
		{name: "physdev with the node's bridges known",
			pk:   pkt(FromExternal, "eth0", "203.0.113.9", "10.96.0.14", 80, "tcp"),
			want: []string{"DROP 1"}},
		{name: "physdev through a bridge",
			pk:   pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.14", 80, "tcp"),
			want: []string{"ACCEPT dnat=10.1.0.6:8080 1"}},
		{name: "physdev without the node's bridges is unknown",
			pk:          pkt(FromExternal, "eth0", "203.0.113.9", "10.96.0.14", 80, "tcp"),
			node:        &Node{LocalAddrs: node.LocalAddrs},
			wantUnknown: "is a bridge"},
		{name: "a set that was not given is unknown",
			pk:          pkt(FromPod, "cni0", "10.1.0.8", "10.96.0.15", 80, "tcp"),
			wantUnknown: "NOT-THERE"},
		{name: "an invalid packet is not scheduled",
			pk:   Packet{From: FromPod, InInterface: "cni0", Src: netip.MustParseAddr("10.1.0.8"), Dst: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp", Invalid: true},
			want: []string{"ACCEPT 1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := node
			if tc.node != nil {
				n = tc.node
			}
			r, err := v.Trace(tc.pk, n)
			if err != nil {
				t.Fatal(err)
			}
			var b strings.Builder
			_ = r.WriteText(&b, true)
			if tc.wantUnknown != "" {
				if !r.HasUnknown() || !strings.Contains(r.Unknowns[0].Reason, tc.wantUnknown) {
					t.Fatalf("unknowns %+v, want one saying %q\n%s", r.Unknowns, tc.wantUnknown, b.String())
				}
				return
			}
			if r.HasUnknown() {
				t.Fatalf("unknowns %+v\n%s", r.Unknowns, b.String())
			}
			var got []string
			for _, o := range r.Outcomes {
				got = append(got, o.Key()+" "+strconv.FormatFloat(o.Probability, 'g', 4, 64))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("outcomes %q, want %q\n%s", got, tc.want, b.String())
			}
			if tc.check != nil {
				tc.check(t, r)
			}
		})
	}
}

func TestNewIPVSErrors(t *testing.T) {
	ipt, _ := ParseIPTablesSave(ipvsBase)
	vs := VirtualServer{Address: netip.MustParseAddr("10.0.0.1"), Port: 80, Protocol: "TCP", Scheduler: "rr"}
	for _, tc := range []struct {
		name string
		ipt  *IPTables
		sets []*IPSet
		vss  []VirtualServer
		want string
	}{
		{"no rules", nil, nil, nil, "iptables rules missing"},
		{"duplicate virtual server", ipt, nil, []VirtualServer{vs, vs}, "given twice"},
		{"bad protocol", ipt, nil, []VirtualServer{{Address: vs.Address, Port: 1, Protocol: "ICMP"}}, "protocol"},
		{"duplicate set", ipt, []*IPSet{{Name: "A"}, {Name: "A"}}, nil, "ip set A given twice"},
	} {
		if _, err := NewIPVS(tc.ipt, tc.sets, tc.vss, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", tc.name, err, tc.want)
		}
	}
}

func FuzzParseIPVS(f *testing.F) {
	f.Add(ipvsSets, ipvsadmText)
	f.Add("create A hash:ip,port,net family inet\nadd A 1.2.3.4,tcp:80,10.0.0.0/99\n", "TCP 1.2.3.4:80 rr\n  -> 1.2.3.5:80 Masq 0 0 0\n")
	f.Add("Name: A\nType: hash:net\nMembers:\n10.0.0.0/8 nomatch\n", "FWM 0x4000 rr persistent 0\n")
	cheapLimits(f)
	ipt, err := ParseIPTablesSave(ipvsBase)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, setText, ipvsText string) {
		sets, err := ParseIPSets(setText)
		if err != nil {
			return
		}
		vss, err := ParseIPVSAdm(ipvsText)
		if err != nil {
			return
		}
		v, err := NewIPVS(ipt, sets, vss, []netip.Addr{netip.MustParseAddr("10.0.0.1")})
		if err != nil {
			return
		}
		fuzzTrace(t, v)
		for _, vs := range vss {
			if vs.Address.IsValid() {
				_, _ = v.Trace(pkt(FromPod, "cni0", "10.1.0.8", vs.Address.String(), vs.Port, strings.ToLower(vs.Protocol)), &Node{Bridges: []string{}})
			}
		}
	})
}

func TestParseIPVSAdmSave(t *testing.T) {
	for _, tc := range []struct {
		name, text string
		want       []string // VirtualServer.String() and real servers "addr weight forward"
		wantErr    string
	}{
		{name: "services and real servers", text: `# a comment
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1
-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 0
-A -u 10.96.0.53:53 -s rr -p 10800
-a -u 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1
-A -t [fd00:10:96::14]:80 -s sh -b sh-port
-a -t [fd00:10:96::14]:80 -r [fd00:1:1::15]:8080 -g -w 2
-A -f 7 -s rr
`, want: []string{
			"10.96.0.10:80/TCP rr persistent=false flags=[] [198.19.1.10:8080 w1 Masq 198.19.2.10:8080 w0 Masq]",
			"10.96.0.53:53/UDP rr persistent=true flags=[] [198.19.1.53:53 w1 Masq]",
			"[fd00:10:96::14]:80/TCP sh persistent=false flags=[sh-port] [[fd00:1:1::15]:8080 w2 Route]",
			"fwmark 7 rr persistent=false flags=[] []",
		}},
		{name: "real server before its service", text: "-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1\n", wantErr: "line 1: real server of virtual server 10.96.0.10:80/TCP, which is not added before it"},
		{name: "service added twice", text: "-A -t 10.96.0.10:80 -s rr\n-A -t 10.96.0.10:80 -s rr\n", wantErr: "line 2: virtual server 10.96.0.10:80/TCP added twice"},
		{name: "unknown option", text: "-A -t 10.96.0.10:80 -s rr -x 1\n", wantErr: `line 1: option "-x" not understood`},
		{name: "not a save line", text: "TCP 10.96.0.10:80 rr\n", wantErr: "want an -A (virtual server) or -a (real server) line"},
		{name: "bad weight", text: "-A -t 10.96.0.10:80 -s rr\n-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w -1\n", wantErr: `line 2: weight "-1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vss, err := ParseIPVSAdmSave(tc.text)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, vs := range vss {
				var rss []string
				for _, rs := range vs.RealServers {
					rss = append(rss, fmt.Sprintf("%s w%d %s", rs, rs.Weight, rs.Forward))
				}
				got = append(got, fmt.Sprintf("%s %s persistent=%v flags=%v %v", vs.String(), vs.Scheduler, vs.Persistent, vs.Flags, rss))
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}
