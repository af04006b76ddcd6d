//go:build linux

package iptables

import (
	"maps"
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2/ktesting"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	conntracktest "k8s.io/net-utils/conntrack/testing"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

func udpFlow(src, dst, replySrc string, dport, rport uint16) *netlink.ConntrackFlow {
	return &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst), SrcPort: 40000, DstPort: dport},
		Reverse: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(replySrc), DstIP: net.ParseIP(src), SrcPort: rport, DstPort: 40000},
	}
}

// After a UDP endpoint goes away, flows still pointing at it are deleted,
// so clients do not keep sending into the void; flows to the remaining
// endpoint are kept.
func TestStaleUDPConntrackCleanup(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			env := newTestEnv(t, f, envConfig{})
			ct := env.ct
			svc := st.NewService("ns1", "dns", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(10)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 0)}
			})
			slcs := []*discovery.EndpointSlice{st.Slice("ns1", "dns", "dns-1", st.AddressTypeOf(f.family), []discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)},
				st.EP{IP: f.rpod(1), Node: "node2"}, st.EP{IP: f.rpod(2), Node: "node2"})}
			env.p.OnServiceAdd(svc)
			env.p.OnEndpointSliceAdd(slcs[0])
			env.start(t)

			toGone := udpFlow(f.pod(9), f.svc(10), f.rpod(1), 53, 5353)
			toKept := udpFlow(f.pod(9), f.svc(10), f.rpod(2), 53, 5353)
			ct.AddEntries(toGone, toKept)
			updateSlice(env.p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints = s.Endpoints[1:] })
			env.sync(t)

			deleted := ct.Deleted()
			if len(deleted) != 1 || !deleted[0].Reverse.SrcIP.Equal(net.ParseIP(f.rpod(1))) {
				t.Errorf("deleted flows %v, want only the one answered by %s", deleted, f.rpod(1))
			}
		})
	}
}

func TestNewDualStackProxier(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := newTestConfig(envConfig{})
	ipts := map[v1.IPFamily]utiliptables.Interface{v1.IPv4Protocol: iptablestest.NewFake(), v1.IPv6Protocol: iptablestest.NewIPv6Fake()}
	dets := map[v1.IPFamily]proxyutil.LocalTrafficDetector{
		v1.IPv4Protocol: proxyutil.NewDetectLocalByCIDR("10.0.0.0/8"),
		v1.IPv6Protocol: proxyutil.NewDetectLocalByCIDR("fd00:10::/64"),
	}
	ips := map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.ParseIP("192.168.0.2"), v1.IPv6Protocol: net.ParseIP("fd00:192::2")}
	sc := sysctltest.NewFake()

	// initOnly: sysctls only, no provider.
	p, err := NewDualStackProxierWithOptions(ctx, cfg, ipts, sc, dets, testNodeName, ips, nil, nil, true, WithoutMonitor())
	if err != nil || p != nil {
		t.Fatalf("initOnly: got (%v, %v), want (nil, nil)", p, err)
	}
	if v, _ := sc.GetSysctl(sysctlRouteLocalnet); v != 1 {
		t.Errorf("initOnly did not set route_localnet")
	}

	p, err = NewDualStackProxierWithOptions(ctx, cfg, ipts, sc, dets, testNodeName, ips, nil, nil, false,
		WithoutMonitor(), WithNFAcct(nil), proxieropts.WithServiceHealthServer(&recordingHealthServer{}), proxieropts.WithConntrack(conntracktest.NewFake()))
	if err != nil {
		t.Fatal(err)
	}
	// Both stacks, through the metaproxier: a dual-stack service and one
	// slice per family.
	svc := st.NewService("ns1", "svc1", func(s *v1.Service) {
		s.Spec.ClusterIP = families[0].svc(1)
		s.Spec.ClusterIPs = []string{families[0].svc(1), families[1].svc(1)}
		s.Spec.IPFamilies = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}
		s.Spec.Ports = []v1.ServicePort{st.ServicePort("p80", 80, v1.ProtocolTCP, 0)}
	})
	p.OnServiceAdd(svc)
	for _, f := range families {
		p.OnEndpointSliceAdd(st.Slice("ns1", "svc1", "svc1-"+strings.ToLower(string(f.family)), st.AddressTypeOf(f.family),
			[]discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}, st.EP{IP: f.rpod(1), Node: "node2"}))
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	for i, f := range families {
		ipt := ipts[f.family].(*iptablestest.FakeIPTables)
		env := &testEnv{f: f, ipt: ipt}
		outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svc(1), 80))
		if err != nil {
			t.Fatal(err)
		}
		if len(outs) != 1 || outs[0].dnat != f.hp(f.rpod(1), 8080) {
			t.Errorf("stack %d (%s): %v", i, f.family, summary(outs))
		}
	}
}

func TestConstructorErrors(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := newTestConfig(envConfig{})
	bad := newTestConfig(envConfig{})
	bit := int32(40)
	bad.IPTables.MasqueradeBit = &bit
	tests := []struct {
		name string
		call func() error
	}{
		{"nil config", func() error {
			_, err := NewProxier(ctx, nil, v1.IPv4Protocol, iptablestest.NewFake(), sysctltest.NewFake(), nil, testNodeName, nil, nil, nil, false)
			return err
		}},
		{"bad family", func() error {
			_, err := NewProxier(ctx, cfg, "IPv5", iptablestest.NewFake(), sysctltest.NewFake(), nil, testNodeName, nil, nil, nil, false)
			return err
		}},
		{"nil iptables", func() error {
			_, err := NewProxier(ctx, cfg, v1.IPv4Protocol, nil, sysctltest.NewFake(), nil, testNodeName, nil, nil, nil, false)
			return err
		}},
		{"masquerade bit out of range", func() error {
			_, err := NewProxierWithOptions(ctx, bad, v1.IPv4Protocol, iptablestest.NewFake(), sysctltest.NewFake(), nil, testNodeName, nil, nil, nil, false, WithoutMonitor(), WithNFAcct(nil))
			return err
		}},
	}
	for _, tc := range tests {
		if err := tc.call(); err == nil {
			t.Errorf("%s: expected an error", tc.name)
		}
	}
}

// Before both informers have synced, nothing is written: a partial view
// would drop traffic for services not seen yet.
func TestNoSyncBeforeInformersSynced(t *testing.T) {
	f := families[0]
	env := newTestEnv(t, f, envConfig{})
	env.p.OnServiceAdd(f.stdService(nil))
	env.p.OnServiceSynced()
	if env.ipt.LastRestoreInput() != nil {
		t.Fatalf("restored before endpoint slices synced:\n%s", env.ipt.LastRestoreInput())
	}
	env.p.OnEndpointSlicesSynced()
	if env.ipt.LastRestoreInput() == nil {
		t.Fatalf("no restore after both informers synced")
	}
}

// Topology changes re-render every service (a full sync).
func TestTopologyChangeForcesFullSync(t *testing.T) {
	f := families[0]
	env := setupScenario(t, f, scenario{services: []*v1.Service{f.stdService(nil)}, slices: []*discovery.EndpointSlice{f.stdSlice(
		st.EP{IP: f.pod(1), Node: testNodeName, Zones: []string{"zone-a"}},
		st.EP{IP: f.rpod(1), Node: "node2", Zones: []string{"zone-b"}},
	)}})
	env.sync(t)
	if n := len(serviceChainsIn(env.restore[len(env.restore)-1])); n != 0 {
		t.Fatalf("idle sync rewrote %d chains", n)
	}
	env.p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-b"})
	env.sync(t)
	outs, err := env.tracer(t).trace(f.fromPod(f.pod(9), f.svc(1), 80))
	if err != nil {
		t.Fatal(err)
	}
	if len(outs) != 1 || outs[0].dnat != f.hp(f.rpod(1), 8080) {
		t.Errorf("after moving to zone-b: %v", summary(outs))
	}
}

// cleanupLeftoversForFamily removes every chain and jump of ours, and
// nothing else.
func TestCleanupLeftoversFake(t *testing.T) {
	for _, f := range families {
		t.Run(string(f.family), func(t *testing.T) {
			sc := representativeCluster(f)
			env := setupScenario(t, f, sc)
			// Someone else's rules must survive.
			if _, err := env.ipt.EnsureChain(utiliptables.TableFilter, "OTHER"); err != nil {
				t.Fatal(err)
			}
			if _, err := env.ipt.EnsureRule(utiliptables.Append, utiliptables.TableFilter, utiliptables.ChainInput, "-j", "OTHER"); err != nil {
				t.Fatal(err)
			}
			_, ctx := ktesting.NewTestContext(t)
			if cleanupLeftoversForFamily(ctx, env.ipt) {
				t.Errorf("cleanup reported an error")
			}
			left := env.dump(t)
			for _, l := range strings.Split(left, "\n") {
				if strings.Contains(l, "KUBE-") && !strings.Contains(l, "KUBE-FIREWALL") {
					t.Errorf("cleanup left %q", l)
				}
			}
			if !strings.Contains(left, "-A INPUT -j OTHER") {
				t.Errorf("cleanup removed a foreign rule:\n%s", left)
			}
		})
	}
}

// countJumps counts the rules of a saved ruleset that are one of our jumps
// from a builtin chain, by "SRC->DST".
func countJumps(save string) map[string]int {
	n := map[string]int{}
	for _, l := range strings.Split(save, "\n") {
		for _, j := range append(jumpRules, kubeletJumpRules...) {
			if strings.HasPrefix(l, "-A "+string(j.Src)+" ") && strings.HasSuffix(l, "-j "+string(j.Dst)) {
				n[string(j.Src)+"->"+string(j.Dst)]++
				break // a line is one rule, even if two tables share its shape
			}
		}
	}
	return n
}

// checkEveryJumpOnce fails unless countJumps found each jump once
// (OUTPUT->KUBE-SERVICES twice: it exists in filter and in nat).
func checkEveryJumpOnce(t *testing.T, n map[string]int) {
	t.Helper()
	for k, v := range n {
		if wantN := map[bool]int{true: 2, false: 1}[k == "OUTPUT->KUBE-SERVICES"]; v != wantN {
			t.Errorf("jump %s present %d times, want %d", k, v, wantN)
		}
	}
	if len(n) != 13 {
		t.Errorf("found %d distinct jumps, want 13: %v", len(n), n)
	}
}

// Jump rules are ensured once, never duplicated by later full syncs, and
// put back when something removes one.
func TestJumpRulesEnsured(t *testing.T) {
	f := families[0]
	env := setupScenario(t, f, scenario{services: []*v1.Service{f.stdService(nil)}, slices: []*discovery.EndpointSlice{f.stdSlice()}})
	count := func() map[string]int { return countJumps(env.dump(t)) }
	want := count()
	checkEveryJumpOnce(t, want)
	for i := 0; i < 3; i++ {
		env.p.forceSyncProxyRules()
	}
	if got := count(); !maps.Equal(got, want) {
		t.Errorf("after repeated full syncs jumps are %v, want %v", got, want)
	}
	j := jumpRules[0]
	if err := env.ipt.DeleteRule(j.Table, j.Src, j.Args()...); err != nil {
		t.Fatal(err)
	}
	if got := count(); got[string(j.Src)+"->"+string(j.Dst)] != 0 {
		t.Fatalf("rule not deleted: %v", got)
	}
	env.p.forceSyncProxyRules()
	if got := count(); !maps.Equal(got, want) {
		t.Errorf("after repair jumps are %v, want %v", got, want)
	}
}

// TestLargeSyncBuffersReleased: the nat buffers a large full sync fills
// (every port's chains) are dropped before the next partial sync, which
// writes only the changed port, and a full sync sizes them again.
func TestLargeSyncBuffersReleased(t *testing.T) {
	ipt := &discardIPTables{}
	p, slcs := benchProxier(t, ipt, 2000, 10)
	held := func() int { return cap(p.tables.natRules.b) + cap(p.tables.natChains.b) }
	if held() <= keptRestoreBytes {
		t.Fatalf("a 2000-Service full sync left %d bytes of nat buffers, want more than %d for this test to mean anything", held(), keptRestoreBytes)
	}
	full := ipt.lastRestore
	toggleEndpoint(p, slcs, 0)
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	if held() > keptRestoreBytes {
		t.Errorf("after a partial sync the nat buffers hold %d bytes, want at most %d", held(), keptRestoreBytes)
	}
	if ipt.lastRestore*100 > full {
		t.Errorf("partial restore is %d bytes against %d for the full sync: it should be the changed port only", ipt.lastRestore, full)
	}
	p.RequestFullSync()
	if err := p.SyncNow(); err != nil {
		t.Fatal(err)
	}
	// One endpoint address differs from the first full sync's.
	if d := ipt.lastRestore - full; d < -100 || d > 100 {
		t.Errorf("full sync after release restored %d bytes, want about %d as the first time", ipt.lastRestore, full)
	}
}
