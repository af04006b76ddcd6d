package winkernel

import (
	"context"
	"fmt"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	"k8s.io/kube-proxy/pkg/proxy/winkernel/hcnapi"
	hcntest "k8s.io/kube-proxy/pkg/proxy/winkernel/testing"
)

func TestMain(m *testing.M) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeKernelspace)
	os.Exit(m.Run())
}

const (
	testNode    = "node1"
	testNetwork = "cbr0"
	testRootEP  = "cbr0_ep"
	testHostMAC = "00-15-5d-00-00-01"
)

// fam holds the addresses of one IP family's scenarios: this node's pods
// are in localSubnet, the other node's in remoteSubnet (behind otherNode).
type fam struct {
	family       v1.IPFamily
	node         string
	otherNode    string
	svcBase      string
	podBase      string
	rpodBase     string
	localSubnet  string
	remoteSubnet string
	lb           string
	extIP        string
	public       string
	sourceVIP    string
}

var families = []fam{
	{
		family: v1.IPv4Protocol, node: "192.168.0.2", otherNode: "192.168.0.3",
		svcBase: "10.96.", podBase: "10.244.", rpodBase: "10.245.",
		localSubnet: "10.244.0.0/16", remoteSubnet: "10.128.0.0/9",
		lb: "198.51.100.10", extIP: "192.0.2.20", public: "203.0.113.9", sourceVIP: "10.244.0.250",
	},
	{
		family: v1.IPv6Protocol, node: "fd00:192::2", otherNode: "fd00:192::3",
		svcBase: "fd00:96::", podBase: "fd00:244::", rpodBase: "fd00:245::",
		localSubnet: "fd00:244::/64", remoteSubnet: "fd00:245::/64",
		lb: "2001:db8:100::10", extIP: "2001:db8:200::20", public: "2001:db8:9::9", sourceVIP: "fd00:244::fa",
	},
}

// svc, pod and rpod number service IPs, this node's pod IPs and the other
// node's pod IPs.
func (f fam) svc(i int) string { return f.num(f.svcBase, i) }
func (f fam) pod(i int) string { return f.num(f.podBase, i) }
func (f fam) rpod(i int) string {
	if f.family == v1.IPv4Protocol {
		// 10.128.0.0/9: room for the benchmarks' 100k endpoints and more.
		return fmt.Sprintf("10.%d.%d.%d", 128+i>>16, (i>>8)&255, i&255)
	}
	return f.num(f.rpodBase, i)
}

func (f fam) num(base string, i int) string {
	if f.family == v1.IPv6Protocol {
		return base + strconv.FormatInt(int64(i), 16)
	}
	return fmt.Sprintf("%s%d.%d", base, i/256, i%256)
}

// v6 is the IPv6 flag as the scenarios print it.
func (f fam) v6() string {
	if f.family == v1.IPv6Protocol {
		return ",IPv6"
	}
	return ""
}

type fakeMacs struct{}

func (fakeMacs) GetHostMac(net.IP) string { return testHostMAC }

// env is one proxier over a fake HNS with one network.
type env struct {
	t    testing.TB
	f    fam
	hns  *hcntest.Fake
	p    *Proxier
	cfg  *kubeproxyconfig.KubeProxyConfiguration
	mac  HostMacProvider
	done bool
}

type envOptions struct {
	networkType string
	features    *hcnapi.Features
	config      func(*kubeproxyconfig.KubeProxyConfiguration)
	// noLocalPods leaves out the local endpoints the CNI plugin would have
	// created for pod(1..9).
	noLocalPods bool
}

func newEnv(t testing.TB, f fam, o envOptions) *env {
	t.Helper()
	if o.networkType == "" {
		o.networkType = hcnapi.NetworkTypeL2Bridge
	}
	features := hcntest.AllFeatures()
	if o.features != nil {
		features = *o.features
	}
	fake := hcntest.NewFake(features)
	fake.AddNetwork(testNetwork, o.networkType,
		hcnapi.RemoteSubnet{DestinationPrefix: f.localSubnet, ProviderAddress: f.node},
		hcnapi.RemoteSubnet{DestinationPrefix: f.remoteSubnet, ProviderAddress: f.otherNode})
	if !o.noLocalPods {
		for i := 1; i <= 9; i++ {
			fake.AddEndpoint(testNetwork, hcnapi.Endpoint{IPs: []string{f.pod(i)}, MAC: fmt.Sprintf("00-15-5d-01-00-%02x", i)})
		}
	}
	cfg := &kubeproxyconfig.KubeProxyConfiguration{
		HealthzBindAddress: "0.0.0.0:10256",
		SyncPeriod:         metav1.Duration{Duration: 30 * time.Second},
		Winkernel:          kubeproxyconfig.KubeProxyWinkernelConfiguration{NetworkName: testNetwork, RootHnsEndpointName: testRootEP},
	}
	if strings.EqualFold(o.networkType, hcnapi.NetworkTypeOverlay) {
		cfg.Winkernel.SourceVip = f.sourceVIP
	}
	if o.config != nil {
		o.config(cfg)
	}
	e := &env{t: t, f: f, hns: fake, cfg: cfg, mac: fakeMacs{}}
	e.p = e.newProxier()
	return e
}

func (e *env) newProxier() *Proxier {
	e.t.Helper()
	_, ctx := ktesting.NewTestContext(e.t)
	if _, bench := e.t.(*testing.B); bench {
		// Benchmarks measure the proxier, not its V(3) logging.
		ctx = klog.NewContext(context.Background(), logr.Discard())
	}
	p, err := newProxierInternal(ctx, e.cfg, e.f.family, testNode, net.ParseIP(e.f.node),
		healthcheck.NewFakeServiceHealthServer(), nil, e.hns, e.mac, false)
	if err != nil {
		e.t.Fatalf("newProxierInternal: %v", err)
	}
	return p
}

// start delivers the objects and the informers' "synced", which syncs once.
func (e *env) start(objs ...any) {
	e.t.Helper()
	e.add(objs...)
	e.p.OnServiceSynced()
	e.p.OnEndpointSlicesSynced()
	if e.p.Syncs() != 1 {
		e.t.Fatalf("initial sync failed")
	}
}

func (e *env) add(objs ...any) {
	for _, o := range objs {
		switch o := o.(type) {
		case *v1.Service:
			e.p.OnServiceAdd(o)
		case *discovery.EndpointSlice:
			e.p.OnEndpointSliceAdd(o)
		default:
			e.t.Fatalf("unknown object %T", o)
		}
	}
}

func (e *env) sync() {
	e.t.Helper()
	if err := e.p.SyncNow(); err != nil {
		e.t.Fatalf("sync: %v", err)
	}
}

// state describes the fake HNS in words: every load balancer, then every
// remote endpoint (local ones are the CNI plugin's).
func (e *env) state() []string { return describe(e.hns) }

func describe(h *hcntest.Fake) []string {
	eps := map[string]hcnapi.Endpoint{}
	for _, ep := range h.Endpoints() {
		eps[ep.ID] = ep
	}
	var out []string
	for _, lb := range h.LoadBalancers() {
		out = append(out, describeLB(&lb, eps))
	}
	slices.Sort(out)
	var remote []string
	for _, ep := range eps {
		if ep.Remote || ep.Name != "" || ep.MAC == testHostMAC {
			remote = append(remote, describeEP(&ep))
		}
	}
	slices.Sort(remote)
	return append(out, remote...)
}

func describeEP(ep *hcnapi.Endpoint) string {
	kind := "local"
	if ep.Remote {
		kind = "remote"
	}
	s := fmt.Sprintf("EP %s %s mac=%s", kind, strings.Join(ep.IPs, ","), ep.MAC)
	if ep.ProviderAddress != "" {
		s += " pa=" + ep.ProviderAddress
	}
	if ep.Name != "" {
		s += " name=" + ep.Name
	}
	return s
}

func describeLB(lb *hcnapi.LoadBalancer, eps map[string]hcnapi.Endpoint) string {
	vip := lb.VIP()
	if vip == "" {
		vip = "*"
	}
	var ips []string
	for _, id := range lb.Endpoints {
		ep, ok := eps[id]
		switch {
		case !ok:
			ips = append(ips, "missing:"+id)
		case ep.Name != "":
			ips = append(ips, "gw")
		default:
			ips = append(ips, ep.IPs[0])
		}
	}
	slices.Sort(ips)
	pm := lb.PortMappings[0]
	s := fmt.Sprintf("LB %s %d/%s->%d eps=%s", vip, pm.ExternalPort, protoName(pm.Protocol), pm.InternalPort, strings.Join(ips, ","))
	if f := flagNames(lb.Flags, pm.Flags); f != "" {
		s += " flags=" + f
	}
	if pm.Distribution != hcnapi.DistributionNone {
		s += fmt.Sprintf(" dist=%d", pm.Distribution)
	}
	if lb.SourceVIP != "" {
		s += " src=" + lb.SourceVIP
	}
	return s
}

func protoName(p uint32) string {
	switch p {
	case 6:
		return "TCP"
	case 17:
		return "UDP"
	case 132:
		return "SCTP"
	}
	return strconv.Itoa(int(p))
}

func flagNames(f hcnapi.LoadBalancerFlags, pm hcnapi.PortMappingFlags) string {
	var n []string
	for _, x := range []struct {
		set  bool
		name string
	}{
		{f&hcnapi.LoadBalancerFlagsDSR != 0, "DSR"},
		{f&hcnapi.LoadBalancerFlagsIPv6 != 0, "IPv6"},
		{pm&hcnapi.PortMappingFlagsILB != 0, "ILB"},
		{pm&hcnapi.PortMappingFlagsLocalRoutedVIP != 0, "LocalRoutedVIP"},
		{pm&hcnapi.PortMappingFlagsUseMux != 0, "UseMux"},
		{pm&hcnapi.PortMappingFlagsPreserveDIP != 0, "PreserveDIP"},
		{pm&hcnapi.PortMappingFlagsVipExternalIP != 0, "VipExternalIP"},
	} {
		if x.set {
			n = append(n, x.name)
		}
	}
	return strings.Join(n, ",")
}
