//go:build linux

package ipvs

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	ipvstesting "k8s.io/kube-proxy/pkg/proxy/ipvs/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
	ipsettest "k8s.io/net-utils/ipset/testing"
	iptablestest "k8s.io/net-utils/iptables/testing"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

const testHostname = "test-hostname"

// fakeProxierOptions tweak newFakeProxier's proxier. The zero value is
// upstream's defaults (rr, masquerade bit 14, no detect-local).
type fakeProxierOptions struct {
	masqueradeAll bool
	scheduler     string
	strictARP     bool
	excludeCIDRs  []string
	// nodePortAddresses is --nodeport-addresses (CIDRs or "primary").
	nodePortAddresses []string
	// localDetectorCIDR, when set, detects local traffic by this cluster CIDR.
	localDetectorCIDR string
	// kernelVersion is the kernel reported to the conn_reuse_mode rule
	// ("" means 5.15).
	kernelVersion string
	// tcpTimeout, tcpFinTimeout and udpTimeout are the IPVS timeouts.
	tcpTimeout, tcpFinTimeout, udpTimeout time.Duration
	// serviceHealth serves health check node ports (nil: a fake).
	serviceHealth healthcheck.ServiceHealthServer
	// onSync is told of every sync.
	onSync func(syncshell.SyncResult)
	// quiet discards the proxier's logs (benchmarks).
	quiet bool
	// ipvs, ipset and conntrack, when set, are used instead of new fakes
	// (to share them between two families' proxiers, or to seed flows).
	ipvs      *ipvstest.FakeIPVS
	ipset     *ipsettest.FakeIPSet
	conntrack conntrack.Interface
}

// fakeEnv exposes the fakes a fake proxier programs.
type fakeEnv struct {
	ipt       *iptablestest.FakeIPTables
	ipvs      *ipvstest.FakeIPVS
	ipset     *ipsettest.FakeIPSet
	netlink   *ipvstesting.FakeNetlinkHandle
	sysctl    *sysctltest.Fake
	clock     *testingclock.FakeClock
	conntrack conntrack.Interface
	network   *proxyutiltest.FakeNetwork
	ctx       context.Context
}

// newFakeProxier returns a proxier of family wired to fakes: nodeIPs are
// the node's addresses (on "eth0", the first is the node IP), kube-ipvs0
// does not exist yet, and nothing has synced. Call p.OnServiceSynced and
// p.OnEndpointSlicesSynced (or syncAll) to start.
func newFakeProxier(t testing.TB, family v1.IPFamily, nodeIPs []string, opts fakeProxierOptions) (*Proxier, *fakeEnv) {
	t.Helper()
	_, ctx := ktesting.NewTestContext(t)
	if opts.quiet {
		ctx = klog.NewContext(context.Background(), logr.Discard())
	}
	env := &fakeEnv{
		ipvs:      ipvstest.NewFake(),
		ipset:     ipsettest.NewFake("v7.17"),
		netlink:   ipvstesting.NewFakeNetlinkHandle(family == v1.IPv6Protocol),
		sysctl:    sysctltest.NewFake(),
		clock:     testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)),
		conntrack: conntrack.NewFake(),
		network:   proxyutiltest.NewFakeNetwork(),
		ctx:       ctx,
	}
	if opts.ipvs != nil {
		env.ipvs = opts.ipvs
	}
	if opts.ipset != nil {
		env.ipset = opts.ipset
	}
	if opts.conntrack != nil {
		env.conntrack = opts.conntrack
	}
	if family == v1.IPv6Protocol {
		env.ipt = iptablestest.NewIPv6Fake()
	} else {
		env.ipt = iptablestest.NewFake()
	}
	if err := env.netlink.SetLocalAddresses("eth0", nodeIPs...); err != nil {
		t.Fatal(err)
	}
	var addrs []net.Addr
	for _, s := range nodeIPs {
		ip := net.ParseIP(s)
		bits := 128
		if ip.To4() != nil {
			bits = 32
		}
		addrs = append(addrs, &net.IPNet{IP: ip, Mask: net.CIDRMask(bits, bits)})
	}
	env.network.AddInterfaceAddr(&net.Interface{Name: "eth0", Index: 2}, addrs)

	config := &kubeproxyconfig.KubeProxyConfiguration{}
	config.IPTables.MasqueradeBit = ptr.To[int32](14)
	config.Linux.MasqueradeAll = opts.masqueradeAll
	config.NodePortAddresses = opts.nodePortAddresses
	config.IPVS.Scheduler = opts.scheduler
	config.IPVS.StrictARP = opts.strictARP
	config.IPVS.ExcludeCIDRs = opts.excludeCIDRs
	config.IPVS.TCPTimeout = metav1.Duration{Duration: opts.tcpTimeout}
	config.IPVS.TCPFinTimeout = metav1.Duration{Duration: opts.tcpFinTimeout}
	config.IPVS.UDPTimeout = metav1.Duration{Duration: opts.udpTimeout}
	config.SyncPeriod = metav1.Duration{Duration: 30 * time.Second}
	config.MinSyncPeriod = metav1.Duration{Duration: 0}

	var det proxyutil.LocalTrafficDetector = proxyutil.NewNoOpLocalDetector()
	if opts.localDetectorCIDR != "" {
		det = proxyutil.NewDetectLocalByCIDR(opts.localDetectorCIDR)
	}
	kv := opts.kernelVersion
	if kv == "" {
		kv = "5.15"
	}
	hs := opts.serviceHealth
	if hs == nil {
		hs = healthcheck.NewFakeServiceHealthServer()
	}
	var nodeIP net.IP
	if len(nodeIPs) > 0 {
		nodeIP = net.ParseIP(nodeIPs[0])
	}
	p, err := NewProxierWithOptions(ctx, config, family, env.ipt, env.ipvs, env.ipset, env.sysctl, det, testHostname, nodeIP, nil, nil, false, withDeps(deps{
		netlink:        env.netlink,
		conntrack:      env.conntrack,
		kernelVersion:  func() (*version.Version, error) { return version.ParseGeneric(kv) },
		clock:          env.clock,
		noGracefulLoop: true,
		HostOptions: syncshell.HostOptions{
			ServiceHealthServer: hs,
			NetworkInterfacer:   env.network,
			SyncHook:            opts.onSync,
		},
	}))
	if err != nil {
		t.Fatalf("NewProxierWithOptions: %v", err)
	}
	return p, env
}

// syncAll marks both informers synced (which runs the first, full, sync)
// and fails the test if that sync failed.
func syncAll(t testing.TB, p *Proxier) {
	t.Helper()
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	if err := p.SyncNow(); err != nil {
		t.Fatalf("sync: %v", err)
	}
}

// withDeps replaces every dependency NewProxierWithOptions takes from the
// host with d: the fakes a test builds.
func withDeps(d deps) Option {
	return func(o *proxieropts.Options) {
		o.HostOptions, o.Conntrack = d.HostOptions, d.conntrack
		proxieropts.Set(func(x *deps) { *x = d })(o)
	}
}
