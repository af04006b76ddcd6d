//go:build linux

package ipvs

import (
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	"k8s.io/component-base/metrics/testutil"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	conntracktest "k8s.io/net-utils/conntrack/testing"
	ipsettest "k8s.io/net-utils/ipset/testing"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// Two families' proxiers share one IPVS table and one ipset namespace, as
// NewDualStackProxier's do: each keeps to its own virtual servers and sets,
// also on full syncs.
func TestDualStackSharesKernelState(t *testing.T) {
	sharedIPVS, sharedSets := ipvstest.NewFake(), ipsettest.NewFake("v7.17")
	var ps []*Proxier
	for _, f := range fams {
		p, _ := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{ipvs: sharedIPVS, ipset: sharedSets})
		p.OnServiceAdd(webService(f, nil))
		p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1)}))
		syncAll(t, p)
		ps = append(ps, p)
	}
	for _, p := range ps {
		p.RequestFullSync()
		if err := p.SyncNow(); err != nil {
			t.Fatal(err)
		}
	}
	got := virtualServersOfFake(sharedIPVS)
	want := []string{"172.30.0.1:80/TCP", "192.168.0.2:30080/TCP", "[fd00:172:30::1]:80/TCP", "[fd00:192::2]:30080/TCP"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("virtual servers %v, want %v", got, want)
	}
	for _, set := range []string{"KUBE-CLUSTER-IP", "KUBE-6-CLUSTER-IP"} {
		if sharedSets.Entries[set].Len() != 1 {
			t.Errorf("set %s: %v", set, setEntries(sharedSets, set))
		}
	}
}

func setEntries(f *ipsettest.FakeIPSet, name string) []string {
	e, _ := f.ListEntries(name)
	return e
}

func TestNewDualStackProxierInitOnly(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
	cfg.IPVS.TCPTimeout = metav1.Duration{Duration: 5e9}
	sc := sysctltest.NewFake()
	fake := ipvstest.NewFake()
	p, err := NewDualStackProxier(ctx, cfg,
		map[v1.IPFamily]utiliptables.Interface{v1.IPv4Protocol: iptablestest.NewFake(), v1.IPv6Protocol: iptablestest.NewIPv6Fake()},
		fake, ipsettest.NewFake("v7.17"), sc,
		map[v1.IPFamily]proxyutil.LocalTrafficDetector{v1.IPv4Protocol: proxyutil.NewNoOpLocalDetector(), v1.IPv6Protocol: proxyutil.NewNoOpLocalDetector()},
		testHostname, map[v1.IPFamily]net.IP{v1.IPv4Protocol: net.ParseIP("192.168.0.2"), v1.IPv6Protocol: net.ParseIP("fd00:192::2")},
		nil, nil, true)
	if err != nil || p != nil {
		t.Fatalf("initOnly: provider %v, error %v; want neither", p, err)
	}
	if v, _ := sc.GetSysctl(sysctlVSConnTrack); v != 1 {
		t.Errorf("%s not set by initOnly", sysctlVSConnTrack)
	}
	if fake.TCPTimeout != 5e9 {
		t.Errorf("IPVS TCP timeout %v not set by initOnly", fake.TCPTimeout)
	}
}

func TestBadConfiguration(t *testing.T) {
	_, ctx := ktesting.NewTestContext(t)
	for _, tc := range []struct {
		name   string
		mutate func(*kubeproxyconfig.KubeProxyConfiguration)
		want   string
	}{
		{"masquerade bit", func(c *kubeproxyconfig.KubeProxyConfiguration) { c.IPTables.MasqueradeBit = ptr.To[int32](32) }, "masqueradeBit 32"},
		{"exclude CIDR", func(c *kubeproxyconfig.KubeProxyConfiguration) { c.IPVS.ExcludeCIDRs = []string{"10.0.0.0/33"} }, `"10.0.0.0/33"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := &kubeproxyconfig.KubeProxyConfiguration{}
			cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
			tc.mutate(cfg)
			_, err := NewProxier(ctx, cfg, v1.IPv4Protocol, iptablestest.NewFake(), ipvstest.NewFake(), ipsettest.NewFake("v7.17"),
				sysctltest.NewFake(), nil, testHostname, net.ParseIP("192.168.0.2"), nil, nil, false)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	t.Run("dry run with initOnly", func(t *testing.T) {
		// A dry run touches no host, so there is nothing to initialise.
		cfg := &kubeproxyconfig.KubeProxyConfiguration{}
		_, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, iptablestest.NewFake(), ipvstest.NewFake(), ipsettest.NewFake("v7.17"),
			sysctltest.NewFake(), nil, testHostname, net.ParseIP("192.168.0.2"), nil, nil, true,
			withDeps(deps{HostOptions: syncshell.HostOptions{DryRun: io.Discard}}))
		if err == nil || !strings.Contains(err.Error(), "dry run") {
			t.Errorf("error %v, want one about dry run", err)
		}
	})
}

func udpFlow(src, dst, replySrc string, dport, rport uint16) *netlink.ConntrackFlow {
	return &netlink.ConntrackFlow{
		Forward: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst), SrcPort: 40000, DstPort: dport},
		Reverse: netlink.IPTuple{Protocol: unix.IPPROTO_UDP, SrcIP: net.ParseIP(replySrc), DstIP: net.ParseIP(src), SrcPort: rport, DstPort: 40000},
	}
}

// After a UDP endpoint goes away, flows answered by it are deleted; flows
// to the remaining endpoint stay.
func TestStaleUDPConntrackCleanup(t *testing.T) {
	for _, f := range fams {
		t.Run(string(f.family), func(t *testing.T) {
			ct := conntracktest.NewFake()
			p, _ := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{conntrack: ct})
			svc := st.NewService("ns", "dns", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(10)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("dns", 53, v1.ProtocolUDP, 0)}
			})
			ports := []discovery.EndpointPort{st.SlicePort("dns", 5353, v1.ProtocolUDP)}
			two := st.Slice("ns", "dns", "dns-1", st.AddressTypeOf(f.family), ports, st.EP{IP: f.rpod(1)}, st.EP{IP: f.rpod(2)})
			p.OnServiceAdd(svc)
			p.OnEndpointSliceAdd(two)
			syncAll(t, p)
			ct.AddEntries(udpFlow(f.pod(9), f.svc(10), f.rpod(1), 53, 5353), udpFlow(f.pod(9), f.svc(10), f.rpod(2), 53, 5353))
			p.OnEndpointSliceUpdate(two, st.Slice("ns", "dns", "dns-1", st.AddressTypeOf(f.family), ports, st.EP{IP: f.rpod(2)}))
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			deleted := ct.Deleted()
			if len(deleted) != 1 || !deleted[0].Reverse.SrcIP.Equal(net.ParseIP(f.rpod(1))) {
				t.Errorf("deleted flows %v, want only the one answered by %s", deleted, f.rpod(1))
			}
		})
	}
}

func TestRestoreFailureMetric(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	f := fams[0]
	p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
	syncAll(t, p)
	before, _ := testutil.GetCounterMetricValue(metrics.IPTablesRestoreFailuresTotal.WithLabelValues(string(f.family)))
	env.ipt.SetRestoreError(errSyncForTest)
	p.OnServiceAdd(webService(f, nil))
	_ = p.SyncNow()
	after, _ := testutil.GetCounterMetricValue(metrics.IPTablesRestoreFailuresTotal.WithLabelValues(string(f.family)))
	if after != before+1 {
		t.Errorf("%s went from %v to %v, want +1", "sync_proxy_rules_iptables_restore_failures_total", before, after)
	}
}

var errSyncForTest = &net.AddrError{Err: "injected restore failure"}

// Topology hints are applied by the brain: the node's zone picks the
// hinted endpoints, and a zone change resyncs everything.
func TestTopologyHints(t *testing.T) {
	for _, f := range fams {
		t.Run(string(f.family), func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-a"})
			p.OnServiceAdd(webService(f, nil))
			p.OnEndpointSliceAdd(webSlice(f, v1.ProtocolTCP, st.EP{IP: f.rpod(1), Zones: []string{"zone-a"}}, st.EP{IP: f.rpod(2), Zones: []string{"zone-b"}}))
			syncAll(t, p)
			pkt := packet{from: fromPod, src: f.pod(9), dst: f.svc(1), proto: "tcp", dport: 80}
			if got, want := newTracer(t, env).trace(pkt).String(), "ipvs "+f.hp(f.rpod(1), 8080); got != want {
				t.Errorf("zone-a: %s, want %s", got, want)
			}
			p.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "zone-b"})
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got, want := newTracer(t, env).trace(pkt).String(), "ipvs "+f.hp(f.rpod(2), 8080); got != want {
				t.Errorf("zone-b: %s, want %s", got, want)
			}
		})
	}
}
