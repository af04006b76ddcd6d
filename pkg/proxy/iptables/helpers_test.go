//go:build linux

package iptables

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
	conntracktest "k8s.io/net-utils/conntrack/testing"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

const testNodeName = "node1"

// fam holds the addresses scenarios use, per IP family, so each scenario is
// written once and run for IPv4 and IPv6.
type fam struct {
	family      v1.IPFamily
	clusterCIDR string
	node        string // this node
	node2       string // a second local address of this node
	otherNode   string
	external    string // an off-cluster client
	lb, lb2     string // load balancer ingress IPs
	extIP       string // a service externalIP
	loopback    string
	bits        int
	svcBase     string
	podBase     string // pods on this node
	rpodBase    string // pods on other nodes
}

var families = []fam{
	{
		family: v1.IPv4Protocol, clusterCIDR: "10.0.0.0/8", node: "192.168.0.2", node2: "192.168.1.2", otherNode: "192.168.0.3",
		external: "203.0.113.5", lb: "198.51.100.10", lb2: "198.51.100.11", extIP: "192.0.2.20", loopback: "127.0.0.1", bits: 32,
		svcBase: "172.30.0.", podBase: "10.0.1.", rpodBase: "10.0.2.",
	},
	{
		family: v1.IPv6Protocol, clusterCIDR: "fd00:10::/64", node: "fd00:192::2", node2: "fd00:193::2", otherNode: "fd00:192::3",
		external: "2001:db8::5", lb: "2001:db8:100::10", lb2: "2001:db8:100::11", extIP: "2001:db8:200::20", loopback: "::1", bits: 128,
		svcBase: "fd00:172:30::", podBase: "fd00:10::1:", rpodBase: "fd00:10::2:",
	},
}

func (f fam) svc(i int) string  { return f.svcBase + strconv.Itoa(i) }
func (f fam) pod(i int) string  { return f.podBase + strconv.Itoa(i) }
func (f fam) rpod(i int) string { return f.rpodBase + strconv.Itoa(i) }
func (f fam) hp(ip string, port int) string {
	return net.JoinHostPort(ip, strconv.Itoa(port))
}
func (f fam) cidr(ip string) string { return ip + "/" + strconv.Itoa(f.bits) }

// testEnv is a proxier wired to fakes.
type testEnv struct {
	f       fam
	p       *Proxier
	ipt     *iptablestest.FakeIPTables
	sysctl  *sysctltest.Fake
	ct      *conntracktest.Fake
	hc      *recordingHealthServer
	logs    *bytes.Buffer
	ctx     context.Context
	nfacct  *fakeNFAcct
	restore []string // restore inputs, in order ("" for a sync without one)

	restoreCalls, recordedCalls int
}

// envConfig tweaks the proxier under test.
type envConfig struct {
	masqueradeAll      bool
	localhostNodePorts *bool
	nodePortAddresses  []string
	detector           string // "cidr" (default), "bridge", "prefix", "none"
	beLiberal          bool
	nfacct             bool
	masqueradeBit      *int32
	noRandomFully      bool                           // iptables without MASQUERADE --random-fully
	healthz            *healthcheck.ProxyHealthServer // nil: none
}

// recordingHealthServer records what the proxier asks the per-service
// health check server to serve.
type recordingHealthServer struct {
	services  map[string]uint16
	endpoints map[string]int
}

func (r *recordingHealthServer) SyncServices(m map[types.NamespacedName]uint16) error {
	r.services = map[string]uint16{}
	for k, v := range m {
		r.services[k.String()] = v
	}
	return nil
}

func (r *recordingHealthServer) SyncEndpoints(m map[types.NamespacedName]int) error {
	r.endpoints = map[string]int{}
	for k, v := range m {
		r.endpoints[k.String()] = v
	}
	return nil
}

var _ healthcheck.ServiceHealthServer = &recordingHealthServer{}

// fakeNFAcct accepts every counter.
type fakeNFAcct struct{ ensured map[string]bool }

func (f *fakeNFAcct) Ensure(name string) error {
	if f.ensured == nil {
		f.ensured = map[string]bool{}
	}
	f.ensured[name] = true
	return nil
}
func (f *fakeNFAcct) Add(name string) error { return f.Ensure(name) }
func (f *fakeNFAcct) Get(name string) (*nfacct.Counter, error) {
	return &nfacct.Counter{Name: name}, nil
}
func (f *fakeNFAcct) List() ([]*nfacct.Counter, error) { return nil, nil }

func newTestConfig(cfg envConfig) *kubeproxyconfig.KubeProxyConfiguration {
	config := &kubeproxyconfig.KubeProxyConfiguration{}
	config.IPTables.MasqueradeBit = ptr.To[int32](14)
	config.IPTables.LocalhostNodePorts = ptr.To(true)
	if cfg.localhostNodePorts != nil {
		config.IPTables.LocalhostNodePorts = cfg.localhostNodePorts
	}
	if cfg.masqueradeBit != nil {
		config.IPTables.MasqueradeBit = cfg.masqueradeBit
	}
	config.Linux.MasqueradeAll = cfg.masqueradeAll
	config.NodePortAddresses = cfg.nodePortAddresses
	config.SyncPeriod = metav1.Duration{Duration: 30e9}
	config.MinSyncPeriod = metav1.Duration{Duration: 1e9}
	return config
}

// testNetwork is the node's interfaces: two addresses on eth0, loopback on lo.
func testNetwork(f fam) *proxyutiltest.FakeNetwork {
	nw := proxyutiltest.NewFakeNetwork()
	nw.AddInterfaceAddr(&net.Interface{Name: "eth0"}, []net.Addr{
		&net.IPNet{IP: net.ParseIP(f.node), Mask: net.CIDRMask(f.bits, f.bits)},
		&net.IPNet{IP: net.ParseIP(f.node2), Mask: net.CIDRMask(f.bits, f.bits)},
	})
	nw.AddInterfaceAddr(&net.Interface{Name: "lo"}, []net.Addr{
		&net.IPNet{IP: net.ParseIP(f.loopback), Mask: net.CIDRMask(f.bits, f.bits)},
	})
	return nw
}

func newTestEnv(t testing.TB, f fam, cfg envConfig) *testEnv {
	t.Helper()
	logger, ctx := ktesting.NewTestContext(t)
	_ = logger
	var ipt *iptablestest.FakeIPTables
	if f.family == v1.IPv6Protocol {
		ipt = iptablestest.NewIPv6Fake()
	} else {
		ipt = iptablestest.NewFake()
	}
	if cfg.noRandomFully {
		features := ipt.Features()
		features.RandomFully = false
		ipt.SetFeatures(features)
	}
	sc := sysctltest.NewFake()
	if cfg.beLiberal {
		_ = sc.SetSysctl(sysctlNFConntrackTCPBeLiberal, 1)
	}
	var det proxyutil.LocalTrafficDetector
	switch cfg.detector {
	case "", "cidr":
		det = proxyutil.NewDetectLocalByCIDR(f.clusterCIDR)
	case "bridge":
		det = proxyutil.NewDetectLocalByBridgeInterface("cbr0")
	case "prefix":
		det = proxyutil.NewDetectLocalByInterfaceNamePrefix("veth")
	case "none":
		det = proxyutil.NewNoOpLocalDetector()
	default:
		t.Fatalf("unknown detector %q", cfg.detector)
	}
	config := newTestConfig(cfg)
	nw := testNetwork(f)

	env := &testEnv{f: f, ipt: ipt, sysctl: sc, ct: conntracktest.NewFake(), hc: &recordingHealthServer{}, ctx: ctx}
	var nfa nfacct.Interface
	if cfg.nfacct {
		env.nfacct = &fakeNFAcct{}
		nfa = env.nfacct
	}
	p, err := NewProxierWithOptions(ctx, config, f.family, &countingIPT{FakeIPTables: ipt, env: env}, sc, det, testNodeName, net.ParseIP(f.node), nil, cfg.healthz, false,
		proxieropts.WithConntrack(env.ct), WithNFAcct(nfa), proxieropts.WithServiceHealthServer(env.hc), proxieropts.WithNetworkInterfacer(nw), WithoutMonitor())
	if err != nil {
		t.Fatalf("NewProxier: %v", err)
	}
	env.p = p
	return env
}

// start marks informers synced, which triggers the first (full) sync.
func (e *testEnv) start(t testing.TB) {
	t.Helper()
	e.p.OnServiceSynced()
	e.p.OnEndpointSlicesSynced()
	e.recordRestore()
}

// recordRestore records the sync's restore input: "" when the sync made no
// iptables-restore call (a sync with nothing to write makes none).
func (e *testEnv) recordRestore() {
	in := ""
	if e.restoreCalls != e.recordedCalls {
		in = string(e.ipt.LastRestoreInput())
	}
	e.recordedCalls = e.restoreCalls
	e.restore = append(e.restore, in)
}

// countingIPT counts the proxier's restores, so the env can tell a sync
// that restored nothing from one that restored what the last one did.
type countingIPT struct {
	*iptablestest.FakeIPTables
	env *testEnv
}

func (c *countingIPT) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	c.env.restoreCalls++
	return c.FakeIPTables.RestoreAll(data, flush, counters)
}

// sync runs one sync and fails the test on error.
func (e *testEnv) sync(t testing.TB) {
	t.Helper()
	if err := e.p.SyncNow(); err != nil {
		t.Fatalf("sync: %v", err)
	}
	e.recordRestore()
}

// dump returns the fake's current nat and filter tables as iptables-save text.
func (e *testEnv) dump(t testing.TB) string {
	t.Helper()
	var b bytes.Buffer
	for _, table := range []utiliptables.Table{utiliptables.TableFilter, utiliptables.TableNAT} {
		if err := e.ipt.SaveInto(table, &b); err != nil {
			t.Fatalf("SaveInto(%s): %v", table, err)
		}
	}
	return b.String()
}

func (e *testEnv) tracer(t testing.TB) *tracer {
	t.Helper()
	rs, err := parseRuleset(e.dump(t))
	if err != nil {
		t.Fatalf("parsing the fake's ruleset: %v", err)
	}
	return newTracer(rs, e.f.node, e.f.node2)
}

func fmtOutcomes(outs []outcome) string {
	var b bytes.Buffer
	for _, o := range outs {
		fmt.Fprintf(&b, "  %s (%.1f%%)\n", o, o.prob*100)
		for _, r := range o.trace {
			fmt.Fprintf(&b, "      %s\n", r)
		}
	}
	return b.String()
}

var _ = klog.Background

// setLogger replaces the logger of the proxier and its parts (benchmarks and
// long randomized tests quiet them).
func (p *Proxier) setLogger(l klog.Logger) {
	p.logger, p.gen.logger, p.syncer.logger = l, l, l
}
