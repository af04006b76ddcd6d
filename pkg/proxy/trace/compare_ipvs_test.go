package trace

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// An ipvs-mode node's planned state, as kube-proxy's dry run writes it.
const (
	plannedIPVSAdm = `-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1
-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1
-A -t 10.96.0.53:53 -s rr -p 10800
-a -t 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1
-A -u 10.96.0.53:53 -s sh -b sh-port -p 10800
-a -u 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1
`
	plannedIPSets = `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
add KUBE-CLUSTER-IP 10.96.0.53,tcp:53
add KUBE-CLUSTER-IP 10.96.0.53,udp:53
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.18.100.1,tcp:80,198.18.0.0/16
create KUBE-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-NODE-PORT-TCP 30080
`
	plannedIPTables = `*nat
:PREROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000
COMMIT
`
)

var plannedBound = []string{"10.96.0.10", "10.96.0.53"}

func TestCompareIPVS(t *testing.T) {
	build := func(t *testing.T, ipvsadm, sets, ipt string, bound []string) *IPVS {
		t.Helper()
		vss, err := ParseIPVSAdmSave(ipvsadm)
		if err != nil {
			t.Fatal(err)
		}
		ss, err := ParseIPSets(sets)
		if err != nil {
			t.Fatal(err)
		}
		rules, err := ParseIPTablesSave(ipt)
		if err != nil {
			t.Fatal(err)
		}
		var addrs []netip.Addr
		for _, b := range bound {
			addrs = append(addrs, netip.MustParseAddr(b))
		}
		v, err := NewIPVS(rules, ss, vss, addrs)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	drop := func(s, line string) string {
		if !strings.Contains(s, line) {
			t.Fatalf("fixture lacks %q", line)
		}
		return strings.Replace(s, line, "", 1)
	}
	replace := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(s, old, new, 1)
	}

	for _, tc := range []struct {
		name    string
		ipvsadm string
		sets    string
		ipt     string
		bound   []string
		limit   int
		// want are the differences as "where|live|expected".
		want []string
	}{
		{
			name: "same state",
		},
		{
			name: "other order, other spellings, counters, the other family and kernel addresses",
			// Virtual servers listed in another order, real servers too;
			// ipvsadm -Ln's numbers spelled through ParseIPVSAdmSave are
			// the same state.
			ipvsadm: `-A -u 10.96.0.53:53 -s sh -p 10800 -b sh-port
-a -u 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1
-A -t 10.96.0.10:80 -s rr
-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1
-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1
-A -t 10.96.0.53:53 -s rr -p 10800
-a -t 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1
-A -t [fd00:10:96::14]:80 -s rr
-a -t [fd00:10:96::14]:80 -r [fd00:1:1::15]:8080 -m -w 1
`,
			// Members in another order, with options ipset writes
			// (comments, the default protocol); an IPv6 set and another
			// program's set are not compared.
			sets: `create KUBE-NODE-PORT-TCP bitmap:port range 0-65535 comment
add KUBE-NODE-PORT-TCP 30080
create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 4096 maxelem 131072 bucketsize 12 initval 0x1
add KUBE-CLUSTER-IP 10.96.0.53,udp:53 comment "kube-system/kube-dns:dns"
add KUBE-CLUSTER-IP 10.96.0.53,53
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
create KUBE-LOAD-BALANCER-SOURCE-CIDR hash:ip,port,net family inet hashsize 1024 maxelem 65536
add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.18.100.1,tcp:80,198.18.0.0/16
create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536
add KUBE-6-CLUSTER-IP fd00:10:96::14,tcp:80
create KUBE-6-NODE-PORT-TCP bitmap:port range 0-65535
add KUBE-6-NODE-PORT-TCP 30099
create cni-allow hash:ip family inet hashsize 1024 maxelem 65536
add cni-allow 10.0.0.1
`,
			// Packet counters and option order, as iptables-save writes.
			ipt: strings.ReplaceAll(replace(plannedIPTables,
				`-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP src,dst -j KUBE-MARK-MASQ`,
				`-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP src,dst -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -j KUBE-MARK-MASQ`), "[0:0]", "[1234:567890]"),
			bound: []string{"10.96.0.53", "10.96.0.10", "fd00:10:96::14", "fe80::1"},
		},
		{
			name:    "a real server missing",
			ipvsadm: drop(plannedIPVSAdm, "-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1\n"),
			want:    []string{"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.2.10:8080||weight 1 Masq"},
		},
		{
			// Graceful termination: a removed endpoint drains at weight 0.
			name:    "a draining real server is not a difference",
			ipvsadm: plannedIPVSAdm + "-a -t 10.96.0.10:80 -r 198.19.3.10:8080 -m -w 0\n",
		},
		{
			// A planned real server at weight 0 is still one (the weight differs).
			name:    "a planned real server at weight 0",
			ipvsadm: replace(plannedIPVSAdm, "-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1", "-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 0"),
			want:    []string{"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.2.10:8080|weight 0 Masq|weight 1 Masq"},
		},
		{
			name:    "a real server not expected",
			ipvsadm: plannedIPVSAdm + "-a -t 10.96.0.10:80 -r 198.19.3.10:8080 -m -w 1\n",
			want:    []string{"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.3.10:8080|weight 1 Masq|"},
		},
		{
			name: "a weight changed",
			ipvsadm: replace(plannedIPVSAdm, "-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1",
				"-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 0"),
			want: []string{"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.1.10:8080|weight 0 Masq|weight 1 Masq"},
		},
		{
			name: "scheduler and persistence changed",
			ipvsadm: replace(plannedIPVSAdm, "-A -t 10.96.0.53:53 -s rr -p 10800",
				"-A -t 10.96.0.53:53 -s wrr -p 60"),
			want: []string{"ipvs virtual server 10.96.0.53:53/TCP|scheduler wrr persistent 60|scheduler rr persistent 10800"},
		},
		{
			name: "a scheduler flag lost",
			ipvsadm: replace(plannedIPVSAdm, "-A -u 10.96.0.53:53 -s sh -b sh-port -p 10800",
				"-A -u 10.96.0.53:53 -s sh -p 10800"),
			want: []string{"ipvs virtual server 10.96.0.53:53/UDP|scheduler sh persistent 10800|scheduler sh persistent 10800 flags sh-port"},
		},
		{
			name: "a virtual server missing",
			ipvsadm: drop(drop(plannedIPVSAdm, "-A -t 10.96.0.10:80 -s rr\n"),
				"-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1\n-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1\n"),
			want: []string{"ipvs virtual server 10.96.0.10:80/TCP||scheduler rr"},
		},
		{
			name:    "a firewall-mark virtual server kube-proxy never programs",
			ipvsadm: plannedIPVSAdm + "-A -f 7 -s rr\n",
			want:    []string{"ipvs virtual server fwmark 7|scheduler rr|"},
		},
		{
			name: "an ip set entry missing",
			sets: drop(plannedIPSets, "add KUBE-CLUSTER-IP 10.96.0.53,udp:53\n"),
			want: []string{"ip set KUBE-CLUSTER-IP member 10.96.0.53,udp:53||add KUBE-CLUSTER-IP 10.96.0.53,udp:53"},
		},
		{
			name: "an ip set entry of another net",
			sets: replace(plannedIPSets, "198.18.100.1,tcp:80,198.18.0.0/16", "198.18.100.1,tcp:80,198.18.0.0/15"),
			want: []string{
				"ip set KUBE-LOAD-BALANCER-SOURCE-CIDR member 198.18.100.1,tcp:80,198.18.0.0/15|add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.18.100.1,tcp:80,198.18.0.0/15|",
				"ip set KUBE-LOAD-BALANCER-SOURCE-CIDR member 198.18.100.1,tcp:80,198.18.0.0/16||add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.18.100.1,tcp:80,198.18.0.0/16",
			},
		},
		{
			name: "an ip set of another type",
			sets: replace(replace(plannedIPSets, "create KUBE-NODE-PORT-TCP bitmap:port range 0-65535", "create KUBE-NODE-PORT-TCP hash:ip,port family inet"),
				"add KUBE-NODE-PORT-TCP 30080", "add KUBE-NODE-PORT-TCP 10.0.0.1,tcp:30080"),
			want: []string{"ip set KUBE-NODE-PORT-TCP|hash:ip,port family inet|bitmap:port"},
		},
		{
			name: "an ip set missing",
			sets: drop(plannedIPSets, "create KUBE-NODE-PORT-TCP bitmap:port range 0-65535\nadd KUBE-NODE-PORT-TCP 30080\n"),
			want: []string{"ip set KUBE-NODE-PORT-TCP||bitmap:port"},
		},
		{
			name:  "a kube-ipvs0 address missing",
			bound: []string{"10.96.0.53"},
			want:  []string{"kube-ipvs0 address 10.96.0.10||ip addr add 10.96.0.10/32 dev kube-ipvs0"},
		},
		{
			name:  "a kube-ipvs0 address not expected",
			bound: append(slices.Clone(plannedBound), "10.96.0.99"),
			want:  []string{"kube-ipvs0 address 10.96.0.99|ip addr add 10.96.0.99/32 dev kube-ipvs0|"},
		},
		{
			name: "an iptables rule changed",
			ipt: replace(plannedIPTables, "-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
				"-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j DROP"),
			want: []string{"nat KUBE-SERVICES rule 2|-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j DROP|-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT"},
		},
		{
			name:    "the limit counts all parts",
			ipvsadm: drop(plannedIPVSAdm, "-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1\n"),
			sets:    drop(plannedIPSets, "add KUBE-CLUSTER-IP 10.96.0.53,udp:53\n"),
			bound:   []string{"10.96.0.53"},
			limit:   2,
			want: []string{
				"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.2.10:8080||weight 1 Masq",
				"ip set KUBE-CLUSTER-IP member 10.96.0.53,udp:53||add KUBE-CLUSTER-IP 10.96.0.53,udp:53",
			},
		},
		{
			name:    "without a limit every difference, iptables last",
			ipvsadm: drop(plannedIPVSAdm, "-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1\n"),
			bound:   []string{"10.96.0.53"},
			ipt: replace(plannedIPTables, "--match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
				"--match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT"),
			want: []string{
				"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.2.10:8080||weight 1 Masq",
				"kube-ipvs0 address 10.96.0.10||ip addr add 10.96.0.10/32 dev kube-ipvs0",
				"nat KUBE-SERVICES rule 2|-A KUBE-SERVICES -m set --match-set KUBE-LOAD-BALANCER dst,dst -j ACCEPT|-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT",
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			expected := build(t, plannedIPVSAdm, plannedIPSets, plannedIPTables, plannedBound)
			or := func(s, def string) string {
				if s == "" {
					return def
				}
				return s
			}
			bound := tc.bound
			if bound == nil {
				bound = plannedBound
			}
			live := build(t, or(tc.ipvsadm, plannedIPVSAdm), or(tc.sets, plannedIPSets), or(tc.ipt, plannedIPTables), bound)
			var got []string
			for _, d := range CompareIPVS(live, expected, "inet", tc.limit) {
				got = append(got, d.Where+"|"+d.Live+"|"+d.Expected)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("differences:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
			}
		})
	}
}
