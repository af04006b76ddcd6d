//go:build linux

package app

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// BenchmarkTraceIPVSLive is issue 20's figure for ipvs mode (root only):
// 10,000 ClusterIP Services of two endpoints loaded into a private
// namespace as ip sets and kube-ipvs0 addresses (ipvs mode's iptables rules
// do not grow with Services), and `kube-proxy trace --netns`'s read
// (iptables-save, ipset save, ip addr, ip link), parse and one trace. The
// IPVS table comes from net-utils' fake: this kernel may have no IPVS, so
// its netlink read is not in the figure.
func BenchmarkTraceIPVSLive(b *testing.B) {
	if os.Geteuid() != 0 {
		b.Skip("needs root to create a network namespace")
	}
	for _, tool := range []string{"ipset", "iptables-restore", "iptables-save"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("needs %s", tool)
		}
	}
	ns := fmt.Sprintf("kptrace-ipvsbench-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput(); err != nil {
		b.Skipf("cannot create a network namespace: %v: %s", err, out)
	}
	b.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	nsRun(b, ns, "ip", "link", "add", ipvsDummyDevice, "type", "veth", "peer", "name", "kipvs-peer")

	fake := ipvstest.NewFake()
	var sets, addrs strings.Builder
	sets.WriteString("create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536\n")
	sets.WriteString("create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536\n")
	sets.WriteString("create KUBE-IPVS-IPS hash:ip family inet hashsize 1024 maxelem 65536\n")
	for i := range benchServices {
		vip := fmt.Sprintf("10.96.%d.%d", 1+i/250, 1+i%250)
		ep1, ep2 := fmt.Sprintf("198.19.%d.%d", 100+i/250, 1+i%250), fmt.Sprintf("198.19.%d.%d", 150+i/250, 1+i%250)
		fmt.Fprintf(&sets, "add KUBE-CLUSTER-IP %s,tcp:80\nadd KUBE-IPVS-IPS %s\nadd KUBE-LOOP-BACK %s,tcp:8080,%s\n", vip, vip, ep1, ep1)
		fmt.Fprintf(&addrs, "addr add %s/32 dev %s\n", vip, ipvsDummyDevice)
		vs := &utilipvs.VirtualServer{Address: net.ParseIP(vip), Port: 80, Protocol: "TCP", Scheduler: "rr"}
		if err := fake.AddVirtualServer(vs); err != nil {
			b.Fatal(err)
		}
		for _, ep := range []string{ep1, ep2} {
			if err := fake.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP(ep), Port: 8080, Weight: 1}); err != nil {
				b.Fatal(err)
			}
		}
	}
	nsRunInput(b, ns, sets.String(), "ipset", "restore")
	nsRunInput(b, ns, addrs.String(), "ip", "-batch", "-")
	nsRunInput(b, ns, `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A PREROUTING -j KUBE-SERVICES
-A OUTPUT -j KUBE-SERVICES
-A POSTROUTING -j KUBE-POSTROUTING
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 198.19.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
*filter
:INPUT ACCEPT [0:0]
:KUBE-IPVS-FILTER - [0:0]
-A INPUT -j KUBE-IPVS-FILTER
-A KUBE-IPVS-FILTER -m set --match-set KUBE-CLUSTER-IP dst,dst -j RETURN
-A KUBE-IPVS-FILTER -m conntrack --ctstate NEW -m set --match-set KUBE-IPVS-IPS dst -j REJECT
COMMIT
`, "iptables-restore")

	table, err := ipvsTable(fake)
	if err != nil {
		b.Fatal(err)
	}
	old := ipvsTableReader
	ipvsTableReader = func(string) ([]trace.VirtualServer, error) { return table, nil }
	b.Cleanup(func() { ipvsTableReader = old })

	pk := trace.Packet{Src: netip.MustParseAddr("198.19.1.5"), Dst: netip.MustParseAddr("10.96.20.1"), Protocol: "tcp", Port: 80, From: trace.FromPod}
	ctx := context.Background()
	var read, one time.Duration
	for b.Loop() {
		start := time.Now()
		v, bridges, _, err := (&traceOptions{netns: ns}).readLiveIPVS(ctx, nil, v1.IPv4Protocol)
		if err != nil {
			b.Fatal(err)
		}
		read += time.Since(start)
		start = time.Now()
		r, err := v.Trace(pk, &trace.Node{Bridges: bridges})
		if err != nil {
			b.Fatal(err)
		}
		one += time.Since(start)
		if len(r.Outcomes) != 2 || r.HasUnknown() {
			b.Fatalf("outcomes %+v, unknowns %+v", r.Outcomes, r.Unknowns)
		}
	}
	n := float64(b.N)
	b.ReportMetric(float64(read.Milliseconds())/n, "read+parse-ms/op")
	b.ReportMetric(float64(one.Microseconds())/n/1000, "trace-ms/op")
}
