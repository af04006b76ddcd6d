//go:build linux

package ipvs

import (
	"strings"
	"testing"
)

// TestParityFormat pins what the canonical dump normalises (and so what the
// upstream comparison cannot see) and what it keeps.
func TestParityFormat(t *testing.T) {
	for _, tc := range []struct {
		name       string
		a, b       parityDumpState
		wantEqual  bool
		wantSubstr string
	}{{
		name: "virtual servers, real servers, sets, entries and addresses in any order",
		a: parityDumpState{
			VirtualServers: []parityDumpVS{
				{Protocol: "TCP", Address: "10.0.0.2", Port: 80, Scheduler: "rr", RealServers: []parityDumpRS{{"10.1.0.2", 8080, 1}, {"10.1.0.1", 8080, 0}}},
				{Protocol: "UDP", Address: "fd00::1", Port: 53, Scheduler: "rr"},
			},
			Sets:  []parityDumpSet{{Name: "B", Type: "hash:ip", Family: "inet", Entries: []string{"2", "1"}}, {Name: "A", Type: "bitmap:port", PortRange: "0-65535"}},
			Bound: []string{"10.0.0.2", "10.0.0.1"}, DummyExists: true,
		},
		b: parityDumpState{
			VirtualServers: []parityDumpVS{
				{Protocol: "udp", Address: "fd00::1", Port: 53, Scheduler: "rr"},
				{Protocol: "tcp", Address: "10.0.0.2", Port: 80, Scheduler: "rr", RealServers: []parityDumpRS{{"10.1.0.1", 8080, 0}, {"10.1.0.2", 8080, 1}}},
			},
			Sets:  []parityDumpSet{{Name: "A", Type: "bitmap:port", Family: "inet", PortRange: "0-65535"}, {Name: "B", Type: "hash:ip", Family: "inet", Entries: []string{"1", "2"}}},
			Bound: []string{"10.0.0.1", "10.0.0.2"}, DummyExists: true,
		},
		wantEqual:  true,
		wantSubstr: "UDP [fd00::1]:53 sched=rr flags=0x0 timeout=0\n",
	}, {
		name:      "a real server's weight counts",
		a:         parityDumpState{VirtualServers: []parityDumpVS{{Protocol: "TCP", Address: "10.0.0.2", Port: 80, RealServers: []parityDumpRS{{"10.1.0.1", 8080, 0}}}}},
		b:         parityDumpState{VirtualServers: []parityDumpVS{{Protocol: "TCP", Address: "10.0.0.2", Port: 80, RealServers: []parityDumpRS{{"10.1.0.1", 8080, 1}}}}},
		wantEqual: false,
	}, {
		name:      "hash set options count",
		a:         parityDumpState{Sets: []parityDumpSet{{Name: "A", Type: "hash:ip", Family: "inet", HashSize: 1024, MaxElem: 65536}}},
		b:         parityDumpState{Sets: []parityDumpSet{{Name: "A", Type: "hash:ip", Family: "inet", HashSize: 4096, MaxElem: 65536}}},
		wantEqual: false,
	}, {
		name:       "conn_reuse_mode depends on the host kernel",
		a:          parityDumpState{Sysctls: map[string]int{"net/ipv4/vs/conn_reuse_mode": 0, "net/ipv4/ip_forward": 1}},
		b:          parityDumpState{Sysctls: map[string]int{"net/ipv4/ip_forward": 1}},
		wantEqual:  true,
		wantSubstr: "net/ipv4/ip_forward=1",
	}, {
		name:      "a missing dummy interface counts",
		a:         parityDumpState{DummyExists: true},
		b:         parityDumpState{},
		wantEqual: false,
	}, {
		name: "chain order, counters, quoting and empty built-in chains do not count",
		a: parityDumpState{IPTablesSave: `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:OUTPUT - [0:0]
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
COMMIT
`},
		b: parityDumpState{IPTablesSave: `*nat
:KUBE-SERVICES - [3:4]
:OUTPUT - [0:0]
-A KUBE-SERVICES  -s 127.0.0.0/8 -j RETURN
-A OUTPUT -m comment --comment kubernetes service portals -j KUBE-SERVICES
COMMIT
`},
		wantEqual:  true,
		wantSubstr: "*nat\n:KUBE-SERVICES\n:OUTPUT\n-A KUBE-SERVICES -s 127.0.0.0/8 -j RETURN\n",
	}, {
		name: "rule order within a chain counts",
		a: parityDumpState{IPTablesSave: `*filter
:KUBE-IPVS-FILTER - [0:0]
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
COMMIT
`},
		b: parityDumpState{IPTablesSave: `*filter
:KUBE-IPVS-FILTER - [0:0]
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
COMMIT
`},
		wantEqual: false,
	}, {
		name: "except in KUBE-IPVS-OUT-FILTER, written in map order upstream",
		a: parityDumpState{IPTablesSave: `*filter
:KUBE-IPVS-OUT-FILTER - [0:0]
-A KUBE-IPVS-OUT-FILTER -s 1.2.3.4 -m ipvs --vaddr 1.2.3.4 --vproto tcp --vport 80 -j DROP
-A KUBE-IPVS-OUT-FILTER -s 1.2.3.5 -m ipvs --vaddr 1.2.3.5 --vproto tcp --vport 80 -j DROP
COMMIT
`},
		b: parityDumpState{IPTablesSave: `*filter
:KUBE-IPVS-OUT-FILTER - [0:0]
-A KUBE-IPVS-OUT-FILTER -s 1.2.3.5 -m ipvs --vaddr 1.2.3.5 --vproto tcp --vport 80 -j DROP
-A KUBE-IPVS-OUT-FILTER -s 1.2.3.4 -m ipvs --vaddr 1.2.3.4 --vproto tcp --vport 80 -j DROP
COMMIT
`},
		wantEqual: true,
	}, {
		name:       "lines iptables-save would not write are shown, not dropped",
		a:          parityDumpState{IPTablesSave: "*nat\n:KUBE-SERVICES - [0:0]\n-I KUBE-SERVICES -j RETURN\nCOMMIT\n"},
		b:          parityDumpState{IPTablesSave: "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n"},
		wantEqual:  false,
		wantSubstr: "unparsed: -I KUBE-SERVICES -j RETURN",
	}, {
		name:      "ip6tables of a dual-stack node counts",
		a:         parityDumpState{IP6TablesSave: "*nat\n:KUBE-SERVICES - [0:0]\n-A KUBE-SERVICES -s ::1/128 -j RETURN\nCOMMIT\n"},
		b:         parityDumpState{},
		wantEqual: false,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := parityFormat(tc.a), parityFormat(tc.b)
			if (a == b) != tc.wantEqual {
				t.Errorf("equal = %v, want %v:\n%s", a == b, tc.wantEqual, parityLineDiff(a, b))
			}
			if !strings.Contains(a, tc.wantSubstr) {
				t.Errorf("dump lacks %q:\n%s", tc.wantSubstr, a)
			}
		})
	}
}

func TestParityLineDiff(t *testing.T) {
	for _, tc := range []struct {
		name, a, b, want string
	}{
		{"equal", "x\ny", "x\ny", ""},
		{"changed line with context", "a\nb\nc\nd\ne\nf\ng", "a\nb\nc\nD\ne\nf\ng",
			"  b\n  c\n+ D\n- d\n  e\n  f\n"},
		{"two changes far apart", "1\n2\n3\n4\n5\n6\n7\n8\n9", "x\n2\n3\n4\n5\n6\n7\n8\ny",
			"+ x\n- 1\n  2\n  3\n...\n  7\n  8\n+ y\n- 9\n"},
		{"added at the end", "a", "a\nb", "  a\n+ b\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := parityLineDiff(tc.a, tc.b); got != tc.want {
				t.Errorf("parityLineDiff:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}
