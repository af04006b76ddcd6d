//go:build linux

package app

import (
	"context"
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2/ktesting"

	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"

	"k8s.io/kube-proxy/pkg/proxy/trace"
)

// On a kernel without IPVS the live read fails naming the missing kernel
// support, rather than tracing iptables rules alone.
func TestTraceIPVSLiveWithoutKernelSupport(t *testing.T) {
	ns := newTraceNetns(t, "iptables-save", "ipset")
	if err := utilipvs.Available(); err == nil {
		t.Skip("this kernel has IPVS; the test is of a kernel without it")
	}
	_, err := runTrace(t, "--proxy-mode=ipvs", "--netns="+ns, "--from=198.19.1.5", "--to=10.96.0.10:80")
	if err == nil || !strings.Contains(err.Error(), "kernel lacks IPVS support") || !strings.Contains(err.Error(), "ip_vs") {
		t.Fatalf("error %v, want one naming the kernel's missing IPVS support (ip_vs)", err)
	}
}

// ipvs mode has a dry run: its planned state (ip addr, ipvsadm-save -n,
// ipset save, iptables-save) parses back, and a trace computed from it
// DNATs a ClusterIP to the Service's endpoints, as the live state would.
func TestIPVSDryRunParsesAndTraces(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	// The gate is on by default; another test of this package turns it off
	// process-wide.
	gate := "--feature-gates=KubeProxyIPVS=true"
	s, out, err := newDryRunServer(ctx, t, "--manifests="+clusterManifests, "--hostname-override=node-1", "--proxy-mode=ipvs", gate)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{
		"# kube-proxy --dry-run: IPv4, " + ipvsDryRunKind,
		"ip addr add 10.96.0.10/32 dev kube-ipvs0",
		"-A -t 10.96.0.10:80 -s rr",
		"-a -t 10.96.0.10:80 -r 198.19.1.10:8080 -m -w 1",
		"-A -t 198.18.0.10:30080 -s rr", // a NodePort on the Node's address
		"add KUBE-CLUSTER-IP 10.96.0.10,tcp:80",
		"-A KUBE-SERVICES",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run lacks %q", want)
		}
	}
	v, err := parseComputed(text, "ipvs", "IPv4")
	if err != nil {
		t.Fatalf("the dry run does not parse back: %v\n%s", err, text)
	}
	if len(v.(*trace.IPVS).VirtualServers) == 0 {
		t.Errorf("no virtual servers parsed")
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("dry run:\n%s", text)
	}

	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--from=198.19.1.5", "--to=10.96.0.10:80"}, []string{"ACCEPT dnat=198.19.1.10:8080", "ACCEPT dnat=198.19.2.10:8080"}},
		{[]string{"--from=198.19.1.5", "--to=10.96.0.10:81"}, nil},
	} {
		rout, err := runTrace(t, append([]string{"--manifests=" + clusterManifests, "--hostname-override=node-1", "--proxy-mode=ipvs", gate, "-o", "json"}, tc.args...)...)
		if err != nil {
			t.Fatal(err)
		}
		rep := decodeReport(t, rout)
		if got := outcomeList(rep.Result); tc.want != nil && !slices.Equal(got, tc.want) {
			t.Errorf("%v: got %q, want %q\n%s", tc.args, got, tc.want, rout)
		} else if tc.want == nil && slices.ContainsFunc(got, func(o string) bool { return strings.Contains(o, "dnat") }) {
			t.Errorf("%v: a port the Service lacks was DNATed: %q", tc.args, got)
		}
		if !strings.HasPrefix(rep.Rules, "computed from --manifests") {
			t.Errorf("rules: %q", rep.Rules)
		}
	}
}

// The live read: iptables rules, ip sets and kube-ipvs0's addresses from a
// private namespace, and an IPVS table (which the kernel here may not
// have) from net-utils' fake.
func TestTraceIPVSLive(t *testing.T) {
	ns := newTraceNetns(t, "iptables-save", "iptables-restore", "ipset")
	// The proxier's kube-ipvs0 is a dummy device; this kernel may lack the
	// dummy driver, and only the addresses on it are read.
	nsRun(t, ns, "ip", "link", "add", ipvsDummyDevice, "type", "veth", "peer", "name", "kipvs-peer")
	nsRun(t, ns, "ip", "addr", "add", "10.96.0.10/32", "dev", ipvsDummyDevice)
	nsRun(t, ns, "ip", "link", "add", "cni0", "type", "bridge")
	nsRun(t, ns, "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "eth0-peer")
	nsRun(t, ns, "ip", "addr", "add", "198.18.0.2/24", "dev", "eth0")
	nsRunInput(t, ns, `create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536
add KUBE-CLUSTER-IP 10.96.0.10,tcp:80
create KUBE-LOOP-BACK hash:ip,port,ip family inet hashsize 1024 maxelem 65536
add KUBE-LOOP-BACK 198.19.1.5,tcp:8080,198.19.1.5
`, "ipset", "restore")
	nsRunInput(t, ns, `*nat
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-MARK-MASQ - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-SERVICES -m comment --comment "Kubernetes service cluster ip + port for masquerade purpose" -m set --match-set KUBE-CLUSTER-IP dst,dst ! -s 198.19.0.0/16 -j KUBE-MARK-MASQ
-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT
-A KUBE-POSTROUTING -m comment --comment "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose" -m set --match-set KUBE-LOOP-BACK dst,dst,src -j MASQUERADE
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -j MASQUERADE --random-fully
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
COMMIT
`, "iptables-restore")

	fake := ipvstest.NewFake()
	vs := &utilipvs.VirtualServer{Address: net.ParseIP("10.96.0.10"), Port: 80, Protocol: "TCP", Scheduler: "rr"}
	for _, err := range []error{
		fake.AddVirtualServer(vs),
		fake.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP("198.19.1.5"), Port: 8080, Weight: 1}),
		fake.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP("198.19.2.5"), Port: 8080, Weight: 1}),
		fake.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP("198.19.3.5"), Port: 8080, Weight: 0}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	old := ipvsTableReader
	ipvsTableReader = func(string) ([]trace.VirtualServer, error) { return ipvsTable(fake) }
	t.Cleanup(func() { ipvsTableReader = old })

	for _, tc := range []struct {
		name string
		args []string
		want []string
		// compared: rules were computed too, and compared with the live
		// ones (which are a small part of them).
		compared bool
		// read is a part of the Read: line.
		read string
	}{
		{name: "pod via the bridge, hairpin masqueraded", args: []string{"--from=198.19.1.5", "--in-interface=cni0"},
			want: []string{"ACCEPT dnat=198.19.1.5:8080 masq", "ACCEPT dnat=198.19.2.5:8080"}, read: "the backend kube-proxy there would use"},
		{name: "off-cluster client masqueraded", args: []string{"--from=203.0.113.9", "--in-interface=eth0"},
			want: []string{"ACCEPT dnat=198.19.1.5:8080 masq", "ACCEPT dnat=198.19.2.5:8080 masq"}},
		{name: "--iptables-backend says which iptables rules to read", args: []string{"--from=203.0.113.9", "--in-interface=eth0",
			"--iptables-backend=" + traceTestBackend(t)},
			want: []string{"ACCEPT dnat=198.19.1.5:8080 masq", "ACCEPT dnat=198.19.2.5:8080 masq"},
			read: "iptables-" + traceTestBackend(t) + " rules (iptables-" + traceTestBackend(t) + "-save) from network namespace " + ns + ", the backend kube-proxy there would use: --iptables-backend=" + traceTestBackend(t)},
		{name: "with --manifests the live rules are traced and compared", args: []string{"--from=203.0.113.9", "--in-interface=eth0",
			"--live", "--manifests=" + clusterManifests, "--hostname-override=node-1", "--feature-gates=KubeProxyIPVS=true", "--max-differences=0"},
			want: []string{"ACCEPT dnat=198.19.1.5:8080 masq", "ACCEPT dnat=198.19.2.5:8080 masq"}, compared: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runTrace(t, append([]string{"--proxy-mode=ipvs", "--netns=" + ns, "--to=10.96.0.10:80/tcp", "-o", "json"}, tc.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			rep := decodeReport(t, out)
			if got := outcomeList(rep.Result); !slices.Equal(got, tc.want) {
				t.Errorf("outcomes %q, want %q\n%s", got, tc.want, out)
			}
			if !strings.Contains(rep.Read, tc.read) || !strings.Contains(rep.Read, "ipset save, the IPVS table and the addresses on kube-ipvs0") {
				t.Errorf("read %q, want it to hold %q and name the ip sets, the IPVS table and kube-ipvs0", rep.Read, tc.read)
			}
			if rep.Note != "" {
				t.Errorf("note %q, want none", rep.Note)
			}
			if (rep.InSync != nil) != tc.compared {
				t.Fatalf("in sync %v, want a comparison: %v\n%s", rep.InSync, tc.compared, out)
			}
			if tc.compared {
				// The namespace holds one Service of examples/cluster, with
				// other endpoints (198.19.1.5, ...): those differ, and so
				// does every other Service's virtual server. The draining
				// 198.19.3.5 (weight 0) is graceful termination, no difference.
				var wheres []string
				for _, d := range rep.Differences {
					wheres = append(wheres, d.Where)
				}
				if draining := "ipvs virtual server 10.96.0.10:80/TCP real server 198.19.3.5:8080"; slices.Contains(wheres, draining) {
					t.Errorf("a draining real server is reported as a difference: %s", draining)
				}
				for _, want := range []string{
					"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.1.10:8080",
					"ipvs virtual server 10.96.0.53:53/UDP",
					"ip set KUBE-CLUSTER-IP member 10.96.0.53,udp:53",
					"kube-ipvs0 address 10.96.0.11",
				} {
					if *rep.InSync || !slices.Contains(wheres, want) {
						t.Errorf("differences lack %q:\n%s", want, strings.Join(wheres, "\n"))
					}
				}
				if rep.Computed == nil {
					t.Errorf("no computed trace")
				}
			}
			for _, o := range rep.Result.Outcomes {
				if o.IPVS == nil || o.IPVS.VirtualServer != "10.96.0.10:80/TCP" || o.Probability != 0.5 ||
					!slices.Equal(o.IPVS.Draining, []string{"198.19.3.5:8080"}) {
					t.Errorf("outcome %s: ipvs %+v probability %v, want virtual server 10.96.0.10:80/TCP, 0.5, 198.19.3.5:8080 draining", o.Key(), o.IPVS, o.Probability)
				}
			}
			if rep.Result.HasUnknown() {
				t.Errorf("unknowns: %+v", rep.Result.Unknowns)
			}
		})
	}
}

// traceTestBackend is the iptables backend `iptables-restore` (what the
// test namespaces are loaded with) is.
func traceTestBackend(t *testing.T) string {
	t.Helper()
	out, err := exec.Command("iptables-restore", "--version").CombinedOutput()
	if err != nil {
		t.Skipf("iptables-restore --version: %v", err)
	}
	if strings.Contains(string(out), "nf_tables") {
		return "nft"
	}
	return "legacy"
}

// ipvsTable converts net-utils' virtual servers, persistence included.
func TestIPVSTable(t *testing.T) {
	fake := ipvstest.NewFake()
	vs := &utilipvs.VirtualServer{Address: net.ParseIP("fd00::10"), Port: 53, Protocol: "UDP", Scheduler: "sh",
		Flags: utilipvs.FlagPersistent | utilipvs.FlagSourceHash, Timeout: 10800}
	if err := fake.AddVirtualServer(vs); err != nil {
		t.Fatal(err)
	}
	if err := fake.AddRealServer(vs, &utilipvs.RealServer{Address: net.ParseIP("fd00::2"), Port: 5353, Weight: 2}); err != nil {
		t.Fatal(err)
	}
	got, err := ipvsTable(fake)
	if err != nil {
		t.Fatal(err)
	}
	want := []trace.VirtualServer{{Address: netip.MustParseAddr("fd00::10"), Port: 53, Protocol: "UDP", Scheduler: "sh",
		Persistent: true, Timeout: 10800, Flags: []string{"sh-port"},
		RealServers: []trace.RealServer{{Address: netip.MustParseAddr("fd00::2"), Port: 5353, Weight: 2, Forward: "Masq"}}}}
	if len(got) != 1 || got[0].String() != want[0].String() || got[0].Timeout != 10800 || !got[0].Persistent ||
		!slices.Equal(got[0].Flags, want[0].Flags) || !slices.Equal(got[0].RealServers, want[0].RealServers) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

// The planned state of examples/cluster compared with itself, as trace
// --live compares it (the live side is the same dry-run text, edited): in
// sync whatever the order of its lines, and each edit of meaning reported
// once, where it is.
func TestIPVSCompareDryRun(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	s, out, err := newDryRunServer(ctx, t, "--manifests="+clusterManifests, "--hostname-override=node-1", "--proxy-mode=ipvs",
		"--feature-gates=KubeProxyIPVS=true")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Run(ctx); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	edit := func(old, new string) func(*testing.T, string) string {
		return func(t *testing.T, s string) string {
			if !strings.Contains(s, old) {
				t.Fatalf("the dry run lacks %q:\n%s", old, s)
			}
			return strings.Replace(s, old, new, 1)
		}
	}
	// reorder reverses each run of lines that start with prefix: the
	// kernel lists virtual servers, set members and addresses in its own
	// order.
	reorder := func(prefix string) func(*testing.T, string) string {
		return func(t *testing.T, s string) string {
			lines := strings.Split(s, "\n")
			for i := 0; i < len(lines); {
				j := i
				for j < len(lines) && strings.HasPrefix(lines[j], prefix) {
					j++
				}
				if j > i {
					slices.Reverse(lines[i:j])
					i = j
				} else {
					i++
				}
			}
			return strings.Join(lines, "\n")
		}
	}
	for _, tc := range []struct {
		name   string
		family string
		edit   func(*testing.T, string) string
		// want are the differences' places; none means in sync.
		want []string
	}{
		{name: "itself", family: "IPv4"},
		{name: "itself, IPv6", family: "IPv6"},
		{name: "real servers, set members and addresses in other orders", family: "IPv4",
			edit: func(t *testing.T, s string) string {
				return reorder("add KUBE-")(t, reorder("-a -t 10.96.0.10:80 ")(t, reorder("ip addr add ")(t, s)))
			}},
		{name: "a real server removed", family: "IPv4",
			edit: edit("-a -t 10.96.0.10:80 -r 198.19.2.10:8080 -m -w 1\n", ""),
			want: []string{"ipvs virtual server 10.96.0.10:80/TCP real server 198.19.2.10:8080"}},
		{name: "a real server draining", family: "IPv4",
			edit: edit("-a -t 10.96.0.53:53 -r 198.19.1.53:53 -m -w 1", "-a -t 10.96.0.53:53 -r 198.19.1.53:53 -m -w 0"),
			want: []string{"ipvs virtual server 10.96.0.53:53/TCP real server 198.19.1.53:53"}},
		{name: "an ip set member removed", family: "IPv4",
			edit: edit("add KUBE-CLUSTER-IP 10.96.0.53,udp:53\n", ""),
			want: []string{"ip set KUBE-CLUSTER-IP member 10.96.0.53,udp:53"}},
		{name: "a kube-ipvs0 address removed", family: "IPv4",
			edit: edit("ip addr add 198.18.100.2/32 dev kube-ipvs0\n", ""),
			want: []string{"kube-ipvs0 address 198.18.100.2"}},
		{name: "a virtual server's persistence removed, IPv6 untouched", family: "IPv4",
			edit: edit("-A -u 10.96.0.53:53 -s rr -p 10800", "-A -u 10.96.0.53:53 -s rr"),
			want: []string{"ipvs virtual server 10.96.0.53:53/UDP"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			family := v1.IPFamily(tc.family)
			computed, err := parseComputed(text, "ipvs", family)
			if err != nil {
				t.Fatal(err)
			}
			liveText := text
			if tc.edit != nil {
				liveText = tc.edit(t, text)
				if liveText == text {
					t.Fatalf("the edit changed nothing")
				}
			}
			live, err := parseComputed(liveText, "ipvs", family)
			if err != nil {
				t.Fatal(err)
			}
			diffs, err := compareRules(live, computed, family, 0)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, d := range diffs {
				got = append(got, d.Where)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("differences %q, want %q:\n%v", got, tc.want, diffs)
			}
		})
	}
}
