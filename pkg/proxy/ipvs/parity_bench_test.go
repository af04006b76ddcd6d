//go:build linux

package ipvs

import (
	"bytes"
	"fmt"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/healthcheck"
	ipvstesting "k8s.io/kube-proxy/pkg/proxy/ipvs/testing"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
	"k8s.io/kube-proxy/pkg/proxy/syncshell"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
	utilipset "k8s.io/net-utils/ipset"
	ipsettest "k8s.io/net-utils/ipset/testing"
	utiliptables "k8s.io/net-utils/iptables"
	iptablestest "k8s.io/net-utils/iptables/testing"
	utilipvs "k8s.io/net-utils/ipvs"
	ipvstest "k8s.io/net-utils/ipvs/testing"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// BenchmarkParitySync is the twin of BenchmarkUpstreamIPVSSync
// (testdata/upstream-baseline/bench_test.go.txt, run against upstream
// v1.37.2 as UPSTREAM-CAPTURE.md describes): the same cluster (n services
// with 10 endpoints each, every tenth a NodePort, one endpoint in seven
// local), the same full and one-endpoint syncs, and the same counts of calls
// into the ipvs, ipset, iptables and netlink fakes, so that the two outputs
// can be read side by side.
func BenchmarkParitySync(b *testing.B) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPVS)
	for _, size := range []struct {
		name string
		n    int
	}{{"1k", 1000}, {"10k", 10000}} {
		b.Run(size.name+"/full", func(b *testing.B) {
			p, c, _ := parityBenchSetup(b, size.n)
			b.ReportAllocs()
			parityBenchLoop(b, c, func() {
				p.RequestFullSync()
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(size.name+"/one-endpoint", func(b *testing.B) {
			p, c, slices := parityBenchSetup(b, size.n)
			b.ReportAllocs()
			i := 0
			parityBenchLoop(b, c, func() {
				upd := slices[0].DeepCopy()
				upd.Endpoints[0].Addresses = []string{parityBenchPodIP(900000 + i%2)}
				i++
				p.OnEndpointSliceUpdate(slices[0], upd)
				slices[0] = upd
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			})
		})
	}
}

// parityBenchCounts counts calls into the fakes, by kind, with the same
// kinds as upstream's twin.
type parityBenchCounts struct {
	ipvsWrite, ipvsRead, ipvsList atomic.Int64
	ipset, iptRestore, iptOther   atomic.Int64
	restoreBytes, netlink         atomic.Int64
}

func (c *parityBenchCounts) reset() {
	for _, v := range []*atomic.Int64{&c.ipvsWrite, &c.ipvsRead, &c.ipvsList, &c.ipset, &c.iptRestore, &c.iptOther, &c.restoreBytes, &c.netlink} {
		v.Store(0)
	}
}

type parityBenchIPVS struct {
	*ipvstest.FakeIPVS
	c *parityBenchCounts
}

func (f parityBenchIPVS) AddVirtualServer(vs *utilipvs.VirtualServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.AddVirtualServer(vs)
}
func (f parityBenchIPVS) UpdateVirtualServer(vs *utilipvs.VirtualServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.UpdateVirtualServer(vs)
}
func (f parityBenchIPVS) DeleteVirtualServer(vs *utilipvs.VirtualServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.DeleteVirtualServer(vs)
}
func (f parityBenchIPVS) GetVirtualServer(vs *utilipvs.VirtualServer) (*utilipvs.VirtualServer, error) {
	f.c.ipvsRead.Add(1)
	return f.FakeIPVS.GetVirtualServer(vs)
}
func (f parityBenchIPVS) GetVirtualServers() ([]*utilipvs.VirtualServer, error) {
	f.c.ipvsList.Add(1)
	return f.FakeIPVS.GetVirtualServers()
}
func (f parityBenchIPVS) AddRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.AddRealServer(vs, rs)
}
func (f parityBenchIPVS) GetRealServers(vs *utilipvs.VirtualServer) ([]*utilipvs.RealServer, error) {
	f.c.ipvsRead.Add(1)
	return f.FakeIPVS.GetRealServers(vs)
}
func (f parityBenchIPVS) DeleteRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.DeleteRealServer(vs, rs)
}
func (f parityBenchIPVS) UpdateRealServer(vs *utilipvs.VirtualServer, rs *utilipvs.RealServer) error {
	f.c.ipvsWrite.Add(1)
	return f.FakeIPVS.UpdateRealServer(vs, rs)
}

type parityBenchIPSet struct {
	*ipsettest.FakeIPSet
	c *parityBenchCounts
}

func (f parityBenchIPSet) FlushSet(set string) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.FlushSet(set)
}
func (f parityBenchIPSet) DestroySet(set string) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.DestroySet(set)
}
func (f parityBenchIPSet) CreateSet(set *utilipset.IPSet, ignore bool) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.CreateSet(set, ignore)
}
func (f parityBenchIPSet) AddEntry(entry string, set *utilipset.IPSet, ignore bool) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.AddEntry(entry, set, ignore)
}
func (f parityBenchIPSet) DelEntry(entry, set string) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.DelEntry(entry, set)
}
func (f parityBenchIPSet) TestEntry(entry, set string) (bool, error) {
	f.c.ipset.Add(1)
	return f.FakeIPSet.TestEntry(entry, set)
}
func (f parityBenchIPSet) ListEntries(set string) ([]string, error) {
	f.c.ipset.Add(1)
	return f.FakeIPSet.ListEntries(set)
}
func (f parityBenchIPSet) ListSets() ([]string, error) {
	f.c.ipset.Add(1)
	return f.FakeIPSet.ListSets()
}

// Restore is one ipset(8) invocation, however many entries it carries.
func (f parityBenchIPSet) Restore(batch *utilipset.Batch, ignoreExist bool) error {
	f.c.ipset.Add(1)
	return f.FakeIPSet.Restore(batch, ignoreExist)
}

type parityBenchIPTables struct {
	*iptablestest.FakeIPTables
	c *parityBenchCounts
}

func (f parityBenchIPTables) EnsureChain(t utiliptables.Table, ch utiliptables.Chain) (bool, error) {
	f.c.iptOther.Add(1)
	return f.FakeIPTables.EnsureChain(t, ch)
}
func (f parityBenchIPTables) EnsureRule(p utiliptables.RulePosition, t utiliptables.Table, ch utiliptables.Chain, args ...string) (bool, error) {
	f.c.iptOther.Add(1)
	return f.FakeIPTables.EnsureRule(p, t, ch, args...)
}
func (f parityBenchIPTables) SaveInto(t utiliptables.Table, b *bytes.Buffer) error {
	f.c.iptOther.Add(1)
	return f.FakeIPTables.SaveInto(t, b)
}
func (f parityBenchIPTables) RestoreAll(data []byte, fl utiliptables.FlushFlag, rc utiliptables.RestoreCountersFlag) error {
	f.c.iptRestore.Add(1)
	f.c.restoreBytes.Add(int64(len(data)))
	return f.FakeIPTables.RestoreAll(data, fl, rc)
}
func (f parityBenchIPTables) Restore(t utiliptables.Table, data []byte, fl utiliptables.FlushFlag, rc utiliptables.RestoreCountersFlag) error {
	f.c.iptRestore.Add(1)
	f.c.restoreBytes.Add(int64(len(data)))
	return f.FakeIPTables.Restore(t, data, fl, rc)
}

type parityBenchNetlink struct {
	*ipvstesting.FakeNetlinkHandle
	c *parityBenchCounts
}

func (h parityBenchNetlink) EnsureAddressBind(a, d string) (bool, error) {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.EnsureAddressBind(a, d)
}
func (h parityBenchNetlink) UnbindAddress(a, d string) error {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.UnbindAddress(a, d)
}
func (h parityBenchNetlink) EnsureDummyDevice(d string) (bool, error) {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.EnsureDummyDevice(d)
}
func (h parityBenchNetlink) ListBindAddress(d string) ([]string, error) {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.ListBindAddress(d)
}
func (h parityBenchNetlink) GetLocalAddresses(d string) (sets.Set[string], error) {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.GetLocalAddresses(d)
}
func (h parityBenchNetlink) GetAllLocalAddressesExcept(d string) (sets.Set[string], error) {
	h.c.netlink.Add(1)
	return h.FakeNetlinkHandle.GetAllLocalAddressesExcept(d)
}

// Addresses of the benchmark cluster; the same as upstream's twin's.
func parityBenchSvcIP(i int) string { return fmt.Sprintf("172.30.%d.%d", i/250, i%250+1) }
func parityBenchPodIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+i/62500, (i/250)%250, i%250+1)
}

func parityBenchSetup(b *testing.B, n int) (*Proxier, *parityBenchCounts, []*discovery.EndpointSlice) {
	c := &parityBenchCounts{}
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.IPTables.MasqueradeBit = ptr.To[int32](14)
	cfg.SyncPeriod = metav1.Duration{Duration: 30 * time.Second}
	nl := ipvstesting.NewFakeNetlinkHandle(false)
	if err := nl.SetLocalAddresses("eth0", "192.168.0.2"); err != nil {
		b.Fatal(err)
	}
	ctx := klog.NewContext(b.Context(), klog.Background())
	p, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol,
		parityBenchIPTables{iptablestest.NewFake(), c}, parityBenchIPVS{ipvstest.NewFake(), c}, parityBenchIPSet{ipsettest.NewFake("v7.17"), c},
		sysctltest.NewFake(), proxyutil.NewDetectLocalByCIDR("10.0.0.0/8"), testHostname, net.ParseIP("192.168.0.2"), nil, nil, false, withDeps(deps{
			netlink:   parityBenchNetlink{nl, c},
			conntrack: conntrack.NewFake(),
			HostOptions: syncshell.HostOptions{
				ServiceHealthServer: healthcheck.NewFakeServiceHealthServer(),
				NetworkInterfacer:   proxyutiltest.NewFakeNetwork(),
			},
			kernelVersion:  func() (*version.Version, error) { return version.ParseGeneric("5.15") },
			clock:          testingclock.NewFakeClock(time.Unix(1_700_000_000, 0)),
			noGracefulLoop: true,
		}))
	if err != nil {
		b.Fatal(err)
	}
	var slices []*discovery.EndpointSlice
	for i := range n {
		name := fmt.Sprintf("svc%d", i)
		svc := st.NewService("ns", name, func(s *v1.Service) {
			s.Spec.ClusterIP = parityBenchSvcIP(i)
			s.Spec.Ports = []v1.ServicePort{{Name: "p80", Port: 80, Protocol: v1.ProtocolTCP, TargetPort: intstr.FromInt32(8080)}}
		})
		if i%10 == 0 {
			svc.Spec.Type = v1.ServiceTypeNodePort
			svc.Spec.Ports[0].NodePort = int32(30000 + i/10)
		}
		p.OnServiceAdd(svc)
		var eps []st.EP
		for j := range 10 {
			node := fmt.Sprintf("node%d", j%7)
			if j%7 == 1 {
				node = testHostname
			}
			eps = append(eps, st.EP{IP: parityBenchPodIP(i*10 + j), Node: node})
		}
		s := st.Slice("ns", name, name+"-1", discovery.AddressTypeIPv4, []discovery.EndpointPort{st.SlicePort("p80", 8080, v1.ProtocolTCP)}, eps...)
		p.OnEndpointSliceAdd(s)
		slices = append(slices, s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	if err := p.SyncNow(); err != nil {
		b.Fatal(err)
	}
	return p, c, slices
}

func parityBenchCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func parityBenchLoop(b *testing.B, c *parityBenchCounts, body func()) {
	c.reset()
	start := parityBenchCPU()
	for b.Loop() {
		body()
	}
	n := float64(b.N)
	b.ReportMetric(float64((parityBenchCPU()-start).Microseconds())/1000/n, "cpu-ms/op")
	b.ReportMetric(float64(c.ipvsWrite.Load())/n, "ipvs-writes/op")
	b.ReportMetric(float64(c.ipvsRead.Load())/n, "ipvs-gets/op")
	b.ReportMetric(float64(c.ipvsList.Load())/n, "ipvs-lists/op")
	b.ReportMetric(float64(c.ipset.Load())/n, "ipset-calls/op")
	b.ReportMetric(float64(c.iptRestore.Load())/n, "ipt-restores/op")
	b.ReportMetric(float64(c.iptOther.Load())/n, "ipt-other/op")
	b.ReportMetric(float64(c.restoreBytes.Load())/n, "restore-B/op")
	b.ReportMetric(float64(c.netlink.Load())/n, "netlink/op")
}
