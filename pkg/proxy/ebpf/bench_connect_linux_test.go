//go:build linux

package ebpf

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// BenchmarkConnect compares, in one run and interleaved, three ways a client on the
// node reaches a Service's endpoint, with 1k and 50k Services programmed:
//
//   - socketlb: nftables + socket LB. The client is in the cgroup the programs are
//     attached to; the connect hook translates the ClusterIP.
//   - nftables: nftables alone. The same ClusterIP from a client in a sibling cgroup
//     without programs: kube-proxy-shaped nftables rules (nftRuleset) DNAT it.
//   - direct: the endpoint's own address from that sibling cgroup, the limit: no
//     translation at all.
//   - direct-hooked: the endpoint's own address from the attached cgroup: the
//     programs run and find nothing to translate. Against direct it is the cost of
//     having the hooks at all; against socketlb, the cost of the translation.
//
// All three run in the same network namespace, with the same nftables ruleset and BPF
// maps loaded, against the same server, over loopback: what differs is only the path
// the Service address takes. Each connection is timed in three parts: setup (connect,
// the handshake), request (one line written, one line read back) and the whole cycle
// with close; conns/s is one sequential client's rate, 1/mean cycle. The columns take
// turns in blocks of blockSize connections each (the client process moves between the
// two cgroups between blocks; a socket keeps the cgroup it was created in), so they
// see the same machine load, and each block is one kind of connection only. ns/op is the wall time of one connection of each
// column.
func BenchmarkConnect(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			if _, err := exec.LookPath("nft"); err != nil {
				b.Skip("needs nft for the nftables column")
			}
			st := benchState(n)
			// The Service under test: a ClusterIP outside the benchmark's 10.96/16 plan,
			// one endpoint: the server the benchmark runs in the child.
			target := svc("target", localnode.TCP, benchVIP, 80)
			target.Endpoints = []localnode.Endpoint{{IP: netip.MustParseAddr(v4Backends[0]), Port: benchPort,
				Ready: true, Serving: true, ForCluster: true, ForLocal: true}}
			target.HasAnyEndpoints = true
			st.Services = append(st.Services, target)
			st.Normalize()
			// The child loads the ruleset itself, in its namespace, when asked to set
			// up: it reads the file named in the environment it inherits.
			ruleset := filepath.Join(b.TempDir(), "ruleset.nft")
			if err := os.WriteFile(ruleset, []byte(nftRuleset(st)), 0o644); err != nil {
				b.Fatal(err)
			}
			b.Setenv(benchRulesetEnv, ruleset)
			e := newEnv(b)
			plain := e.cg + plainSuffix
			if err := os.Mkdir(plain, 0o755); err != nil {
				b.Fatal(err)
			}
			// The child ends every request back in e.cg, so this is empty by then.
			b.Cleanup(func() { _ = os.Remove(plain) })
			start := time.Now()
			if err := e.differ.Sync(b.Context(), st); err != nil {
				b.Fatal(err)
			}
			b.Logf("%d services: BPF maps synced in %v", len(st.Services), time.Since(start).Round(time.Millisecond))
			start = time.Now()
			if res, err := e.try2(request{Op: "bench", Addr: benchVIP + ":80", Direct: benchDirect(), Count: 0}); err != nil || res.Err != "" {
				b.Fatalf("bench setup: %v %s", err, res.Err)
			}
			b.Logf("%d services: nftables ruleset loaded and paths checked in %v", len(st.Services), time.Since(start).Round(time.Millisecond))
			// A sub-benchmark, so the setup above runs once and not once per b.N tried.
			b.Run("paths", func(b *testing.B) {
				res, err := e.try2(request{Op: "bench", Addr: benchVIP + ":80", Direct: benchDirect(), Count: b.N})
				if err != nil || res.Err != "" {
					b.Fatalf("bench: %v %s", err, res.Err)
				}
				cols := decodeColumns(res)
				for _, name := range columnNames {
					c := cols[name]
					b.ReportMetric(c.setupP50, name+"-setup-p50-us")
					b.ReportMetric(c.setupP99, name+"-setup-p99-us")
					b.ReportMetric(c.reqP50, name+"-req-p50-us")
					b.ReportMetric(c.reqP99, name+"-req-p99-us")
					b.ReportMetric(c.connsPerSec, name+"-conns/s")
				}
				b.ReportMetric(cols["socketlb"].connsPerSec/cols["direct"].connsPerSec, "socketlb/direct-conns")
				b.ReportMetric(cols["nftables"].connsPerSec/cols["direct"].connsPerSec, "nftables/direct-conns")
				b.ReportMetric(cols["socketlb"].setupP50/cols["direct"].setupP50, "socketlb/direct-setup-p50")
				b.ReportMetric(cols["direct-hooked"].setupP50/cols["direct"].setupP50, "hooked/direct-setup-p50")
			})
		})
	}
}

const (
	benchVIP  = "10.97.0.1"
	benchPort = 9000
	// blockSize connections per column before the client changes cgroup.
	blockSize = 50
	// plainSuffix names the cgroup without programs: the test cgroup's path plus it.
	plainSuffix = "-plain"
	// benchRulesetEnv names the nftables ruleset file the child loads.
	benchRulesetEnv = "KUBE_PROXY_SOCKETLB_BENCH_RULESET"
	// benchClusterCIDR contains every client address of the benchmark, so the
	// "masquerade traffic from outside the cluster" rule is walked and does not
	// match, as for a pod.
	benchClusterCIDR = "198.18.0.0/15"
	benchServiceCIDR = "10.96.0.0/14"
	benchNodeSrc     = "198.18.1.1"
)

var columnNames = []string{"socketlb", "nftables", "direct", "direct-hooked"}

func benchDirect() string {
	return netip.AddrPortFrom(netip.MustParseAddr(v4Backends[0]), benchPort).String()
}

// summary is one column's figures, in microseconds and connections per second.
type summary struct{ setupP50, setupP99, reqP50, reqP99, connsPerSec float64 }

// summarize reduces one column's (setup, request, cycle) triples to its summary.
func summarize(v []float64) summary {
	var setup, req []float64
	var cycles float64
	for i := 0; i+2 < len(v); i += 3 {
		setup, req, cycles = append(setup, v[i]), append(req, v[i+1]), cycles+v[i+2]
	}
	s := summary{setupP50: percentile(setup, 0.5), setupP99: percentile(setup, 0.99),
		reqP50: percentile(req, 0.5), reqP99: percentile(req, 0.99)}
	if cycles > 0 {
		s.connsPerSec = float64(len(setup)) / (cycles / 1e6)
	}
	return s
}

// The child answers with the summaries only (a line of every sample would outgrow the
// parent's line reader): Via holds five figures per column, in columnNames order.
func decodeColumns(res result) map[string]summary {
	out := map[string]summary{}
	for i, name := range columnNames {
		if len(res.Via) >= 5*(i+1) {
			v := res.Via[5*i:]
			out[name] = summary{v[0], v[1], v[2], v[3], v[4]}
		}
	}
	return out
}

func percentile(v []float64, p float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// nftRuleset writes st's ClusterIPs as kube-proxy's nftables mode programs them (the
// shape of pkg/proxy/nftables/testdata/basic-IPv4.nft): the base chains and their
// checks, one service chain per Service that DNATs through a per-Service endpoint map
// picked by numgen, and the service-ips verdict map every new connection is looked up
// in. Only what a ClusterIP connection meets is filled; the other maps exist, empty.
func nftRuleset(st *localnode.State) string {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	p("add table ip kube-proxy")
	p("flush table ip kube-proxy")
	for _, c := range []string{
		"filter-forward { type filter hook forward priority 0 ; }",
		"filter-input { type filter hook input priority 0 ; }",
		"filter-output { type filter hook output priority 0 ; }",
		"filter-output-pre-dnat { type filter hook output priority -110 ; }",
		"filter-prerouting-pre-dnat { type filter hook prerouting priority -110 ; }",
		"nat-output { type nat hook output priority -100 ; }",
		"nat-postrouting { type nat hook postrouting priority 100 ; }",
		"nat-prerouting { type nat hook prerouting priority -100 ; }",
		"cluster-ips-check", "firewall-check", "masquerading", "nodeport-endpoints-check",
		"reject-chain", "service-endpoints-check", "services",
	} {
		p("add chain ip kube-proxy %s", c)
	}
	p("add set ip kube-proxy cluster-ips { type ipv4_addr ; }")
	p("add set ip kube-proxy nodeport-ips { type ipv4_addr ; }")
	p("add set ip kube-proxy hairpin-connections { type ipv4_addr . ipv4_addr . inet_proto . inet_service ; }")
	p("add map ip kube-proxy firewall-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }")
	p("add map ip kube-proxy no-endpoint-nodeports { type inet_proto . inet_service : verdict ; }")
	p("add map ip kube-proxy no-endpoint-services { type ipv4_addr . inet_proto . inet_service : verdict ; }")
	p("add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }")
	p("add map ip kube-proxy service-nodeports { type inet_proto . inet_service : verdict ; }")
	p("add rule ip kube-proxy cluster-ips-check ip daddr @cluster-ips reject")
	p("add rule ip kube-proxy cluster-ips-check ip daddr { %s } drop", benchServiceCIDR)
	p("add rule ip kube-proxy filter-forward ct state new jump service-endpoints-check")
	p("add rule ip kube-proxy filter-forward ct state new jump cluster-ips-check")
	p("add rule ip kube-proxy filter-input ct state new jump nodeport-endpoints-check")
	p("add rule ip kube-proxy filter-input ct state new jump service-endpoints-check")
	p("add rule ip kube-proxy filter-output ct state new jump service-endpoints-check")
	p("add rule ip kube-proxy filter-output ct state new jump cluster-ips-check")
	p("add rule ip kube-proxy filter-output-pre-dnat ct state new jump firewall-check")
	p("add rule ip kube-proxy filter-prerouting-pre-dnat ct state new jump firewall-check")
	p("add rule ip kube-proxy firewall-check ip daddr . meta l4proto . th dport vmap @firewall-ips")
	p("add rule ip kube-proxy masquerading mark and 0x00004000 != 0 mark set mark xor 0x00004000 masquerade fully-random")
	p("add rule ip kube-proxy masquerading ct status dnat ip saddr . ip daddr . meta l4proto . th dport @hairpin-connections masquerade fully-random")
	p("add rule ip kube-proxy nat-output jump services")
	p("add rule ip kube-proxy nat-postrouting jump masquerading")
	p("add rule ip kube-proxy nat-prerouting jump services")
	p("add rule ip kube-proxy nodeport-endpoints-check ip daddr @nodeport-ips meta l4proto . th dport vmap @no-endpoint-nodeports")
	p("add rule ip kube-proxy reject-chain reject")
	p("add rule ip kube-proxy service-endpoints-check ip daddr . meta l4proto . th dport vmap @no-endpoint-services")
	p("add rule ip kube-proxy services ip daddr @cluster-ips ip saddr != %s mark set mark or 0x00004000", benchClusterCIDR)
	p("add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips")
	p("add rule ip kube-proxy services ip daddr @nodeport-ips meta l4proto . th dport vmap @service-nodeports")
	var vips, svcIPs []string
	for i, s := range st.Services {
		proto := strings.ToLower(string(s.Name.Protocol))
		chain := fmt.Sprintf("service-%d-%s/%s/%s/%s", i, s.Name.Namespace, s.Name.Name, proto, s.Name.Port)
		epMap := fmt.Sprintf("endpoints-%d", i)
		p("add chain ip kube-proxy %s", chain)
		p("add map ip kube-proxy %s { typeof numgen random mod 1 : ip daddr . %s dport ; }", epMap, proto)
		p("add rule ip kube-proxy %s meta l4proto %s dnat ip addr . port to numgen random mod %d offset 0 map @%s", chain, proto, len(s.Endpoints), epMap)
		var eps []string
		for j, ep := range s.Endpoints {
			eps = append(eps, fmt.Sprintf("%d : %s . %d", j, ep.IP, ep.Port))
		}
		p("add element ip kube-proxy %s { %s }", epMap, strings.Join(eps, ", "))
		vips = append(vips, s.ClusterIP.String())
		svcIPs = append(svcIPs, fmt.Sprintf("%s . %s . %d : goto %s", s.ClusterIP, proto, s.Port, chain))
	}
	// Elements in batches: the kernel finds a set by name with a walk of the
	// table's sets, so one command per element would cost minutes at 50k.
	for _, set := range []struct {
		name  string
		elems []string
	}{{"cluster-ips", vips}, {"service-ips", svcIPs}} {
		for len(set.elems) > 0 {
			k := min(1000, len(set.elems))
			p("add element ip kube-proxy %s { %s }", set.name, strings.Join(set.elems[:k], ", "))
			set.elems = set.elems[k:]
		}
	}
	return b.String()
}

var benchSetup struct {
	sync.Once
	err error
}

// bench is the child's side of BenchmarkConnect. Count 0 sets up: the benchmark's
// server, a default route (a node has one; the nftables path needs a route to the
// ClusterIP before its DNAT), and the ruleset, checking on the way that the ClusterIP
// answers from the plain cgroup only once nftables translates it.
func bench(req request) result {
	benchSetup.Do(func() { benchSetup.err = benchPrepare(req) })
	if benchSetup.err != nil {
		return result{Err: benchSetup.err.Error()}
	}
	attached, plain, err := benchCgroups()
	if err != nil {
		return result{Err: err.Error()}
	}
	// Whatever happens, end in the attached cgroup: the parent removes the plain one.
	defer func() { _ = moveSelf(attached) }()
	var lb, nft, direct, hooked []float64
	cols := []struct {
		name, cgroup, addr string
		out                *[]float64
	}{
		{"socketlb", attached, req.Addr, &lb},
		{"nftables", plain, req.Addr, &nft},
		{"direct", plain, req.Direct, &direct},
		{"direct-hooked", attached, req.Direct, &hooked},
	}
	for round, done := 0, 0; done < req.Count; round++ {
		k := min(blockSize, req.Count-done)
		// The order turns each round, so no column always comes first after a
		// cgroup move or last before one.
		for i := range cols {
			col := cols[(round+i)%len(cols)]
			if err := moveSelf(col.cgroup); err != nil {
				return result{Err: err.Error()}
			}
			for range k {
				s, r, c, err := benchOne(col.addr)
				if err != nil {
					return result{Err: col.name + ": " + err.Error()}
				}
				*col.out = append(*col.out, s, r, c)
			}
		}
		done += k
	}
	var res result
	for _, v := range [][]float64{lb, nft, direct, hooked} {
		sum := summarize(v)
		res.Via = append(res.Via, sum.setupP50, sum.setupP99, sum.reqP50, sum.reqP99, sum.connsPerSec)
	}
	return res
}

// benchOne makes one connection and one request on it, in microseconds: setup
// (connect), request (write a line, read the answer) and the whole cycle with close.
func benchOne(addr string) (setup, request, cycle float64, err error) {
	us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
	t0 := time.Now()
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		return 0, 0, 0, err
	}
	t1 := time.Now()
	if _, err := c.Write([]byte("ping\n")); err != nil {
		c.Close()
		return 0, 0, 0, err
	}
	if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
		c.Close()
		return 0, 0, 0, err
	}
	t2 := time.Now()
	c.Close()
	return us(t1.Sub(t0)), us(t2.Sub(t1)), us(time.Since(t0)), nil
}

func benchPrepare(req request) error {
	ln, err := net.Listen("tcp", req.Direct)
	if err != nil {
		return fmt.Errorf("benchmark server: %w", err)
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					if _, err := r.ReadString('\n'); err != nil {
						return
					}
					if _, err := c.Write([]byte("pong\n")); err != nil {
						return
					}
				}
			}()
		}
	}()
	for _, args := range [][]string{
		// A veth pair stands for the node's uplink (no dummy module on every kernel):
		// what leaves by it ends at its peer, which does not forward.
		{"link", "add", "kpbench0", "type", "veth", "peer", "name", "kpbench1"},
		{"link", "set", "kpbench1", "up"},
		{"link", "set", "kpbench0", "up"},
		{"addr", "add", benchNodeSrc + "/32", "dev", "kpbench0"},
		{"route", "add", "default", "dev", "kpbench0"},
	} {
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %v: %w: %s", args, err, out)
		}
	}
	attached, plain, err := benchCgroups()
	if err != nil {
		return err
	}
	defer func() { _ = moveSelf(attached) }()
	if err := moveSelf(plain); err != nil {
		return err
	}
	// From a source port outside the ephemeral range: this attempt leaves a conntrack
	// entry without NAT for its tuple, and a benchmark connection that drew the same
	// port would then meet that entry instead of the DNAT rules, and the reject of
	// cluster-ips-check (seen as occasional ECONNREFUSED in the nftables column).
	d := net.Dialer{Timeout: 500 * time.Millisecond, LocalAddr: &net.TCPAddr{IP: net.ParseIP(benchNodeSrc), Port: 61999}}
	if c, err := d.Dial("tcp", req.Addr); err == nil {
		c.Close()
		return fmt.Errorf("%s answered from the cgroup without programs before nftables was loaded: the nftables column would not measure nftables", req.Addr)
	}
	path := os.Getenv(benchRulesetEnv)
	if out, err := exec.Command("nft", "-f", path).CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f %s: %w: %s", path, err, out)
	}
	if _, _, _, err := benchOne(req.Addr); err != nil {
		return fmt.Errorf("%s through nftables: %w", req.Addr, err)
	}
	return nil
}

// benchCgroups returns the child's own cgroup (the one the programs are attached to)
// and its plain sibling, as paths under the cgroup v2 mount.
func benchCgroups() (attached, plain string, err error) {
	data, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", "", err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			rel = strings.TrimSuffix(rel, plainSuffix)
			attached = filepath.Join(DefaultCgroupPath, rel)
			return attached, attached + plainSuffix, nil
		}
	}
	return "", "", fmt.Errorf("no cgroup v2 line in /proc/self/cgroup: %q", data)
}

// moveSelf moves this whole process into cgroup cg. Sockets keep the cgroup they were
// created in, so only connections opened afterwards see the change.
func moveSelf(cg string) error {
	if err := os.WriteFile(filepath.Join(cg, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return fmt.Errorf("moving the client into cgroup %s: %w", cg, err)
	}
	return nil
}
