//go:build linux

package iptables

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/conntrack"
	"k8s.io/kube-proxy/pkg/proxy/syncshell/proxieropts"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	"k8s.io/kube-proxy/pkg/proxy/util/nfacct"
	utiliptables "k8s.io/net-utils/iptables"
	sysctltest "k8s.io/net-utils/sysctl/testing"
)

// discardIPTables accepts every call and remembers only the size of the
// last restore, so benchmarks measure rule generation alone.
type discardIPTables struct {
	lastRestore int
	keep        bool
	data        []byte // the last restore input, if keep
	chains      []byte // what SaveInto(nat) reports
}

func (d *discardIPTables) EnsureChain(utiliptables.Table, utiliptables.Chain) (bool, error) {
	return true, nil
}
func (d *discardIPTables) FlushChain(utiliptables.Table, utiliptables.Chain) error  { return nil }
func (d *discardIPTables) DeleteChain(utiliptables.Table, utiliptables.Chain) error { return nil }
func (d *discardIPTables) ChainExists(utiliptables.Table, utiliptables.Chain) (bool, error) {
	return true, nil
}
func (d *discardIPTables) EnsureRule(utiliptables.RulePosition, utiliptables.Table, utiliptables.Chain, ...string) (bool, error) {
	return true, nil
}
func (d *discardIPTables) DeleteRule(utiliptables.Table, utiliptables.Chain, ...string) error {
	return nil
}
func (d *discardIPTables) IsIPv6() bool                    { return false }
func (d *discardIPTables) Protocol() utiliptables.Protocol { return utiliptables.ProtocolIPv4 }
func (d *discardIPTables) SaveInto(t utiliptables.Table, b *bytes.Buffer) error {
	if t == utiliptables.TableNAT {
		b.Write(d.chains)
	}
	return nil
}
func (d *discardIPTables) Restore(_ utiliptables.Table, data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	d.lastRestore = len(data)
	return nil
}
func (d *discardIPTables) RestoreAll(data []byte, _ utiliptables.FlushFlag, _ utiliptables.RestoreCountersFlag) error {
	d.lastRestore = len(data)
	if d.keep {
		d.data = append(d.data[:0], data...)
	}
	return nil
}
func (d *discardIPTables) Monitor(utiliptables.Chain, []utiliptables.Table, func(), time.Duration, <-chan struct{}) {
}
func (d *discardIPTables) Present() error { return nil }

// benchProxier loads n services with eps endpoints each into a proxier over
// ipt and runs the first (full) sync.
func benchProxier(b testing.TB, ipt utiliptables.Interface, n, eps int) (*Proxier, []*discovery.EndpointSlice) {
	// nfacct "available", so the rules are exactly what upstream writes on
	// a kernel with nfnetlink_acct.
	return benchProxierNFAcct(b, ipt, n, eps, &fakeNFAcct{})
}

// benchProxierNFAcct is benchProxier with a given nfacct client (nil: none).
func benchProxierNFAcct(b testing.TB, ipt utiliptables.Interface, n, eps int, nfa nfacct.Interface) (*Proxier, []*discovery.EndpointSlice) {
	b.Helper()
	f := families[0]
	ctx := klog.NewContext(b.Context(), klog.Background().V(10)) // quiet: V(10) is never enabled
	cfg := newTestConfig(envConfig{})
	p, err := NewProxierWithOptions(ctx, cfg, v1.IPv4Protocol, ipt, sysctltest.NewFake(),
		proxyutil.NewDetectLocalByCIDR(f.clusterCIDR), testNodeName, nil, nil, nil, false,
		proxieropts.WithConntrack(conntrack.NewFake()), WithNFAcct(nfa), proxieropts.WithServiceHealthServer(&recordingHealthServer{}),
		proxieropts.WithNetworkInterfacer(testNetwork(f)), WithoutMonitor())
	if err != nil {
		b.Fatal(err)
	}
	p.setLogger(klog.Background().V(10))
	svcs, slcs := manyServicesNodePort(f, n, eps)
	for _, s := range svcs {
		p.OnServiceAdd(s)
	}
	for _, s := range slcs {
		p.OnEndpointSliceAdd(s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
	if p.NeedsFullSync() {
		b.Fatal("initial sync failed")
	}
	return p, slcs
}

// manyServicesNodePort is manyServices with every tenth service a NodePort,
// closer to a real cluster than pure ClusterIPs.
func manyServicesNodePort(f fam, n, eps int) ([]*v1.Service, []*discovery.EndpointSlice) {
	svcs, slcs := manyServices(f, n, eps)
	for i, s := range svcs {
		if i%10 == 0 {
			s.Spec.Type = v1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = int32(30000 + i%2000)
		}
	}
	return svcs, slcs
}

// toggleEndpoint replaces the first endpoint of slices[0] with one of two
// alternating addresses: a one-endpoint change per call.
func toggleEndpoint(p *Proxier, slcs []*discovery.EndpointSlice, i int) {
	f := families[0]
	updateSlice(p, slcs, 0, func(s *discovery.EndpointSlice) { s.Endpoints[0].Addresses = []string{f.podIndex(900000 + i%2)} })
}

// cpuTime is the process's user+system CPU time: unlike wall time it is
// not inflated by other processes competing for the machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loopCPU runs body b.N times (via b.Loop) and reports CPU ms per op.
func loopCPU(b *testing.B, body func()) {
	start := cpuTime()
	for b.Loop() {
		body()
	}
	b.ReportMetric(float64((cpuTime()-start).Microseconds())/1000/float64(b.N), "cpu-ms/op")
}

var benchSizes = []struct {
	name string
	n    int
}{{"1k", 1000}, {"10k", 10000}}

// BenchmarkSyncGenerate measures rule generation alone (no iptables-restore)
// for full syncs and one-endpoint-change partial syncs, with 10 endpoints per
// service. restore-bytes is the size of the iptables-restore input.
func BenchmarkSyncGenerate(b *testing.B) {
	for _, size := range benchSizes {
		b.Run(size.name+"/full", func(b *testing.B) {
			ipt := &discardIPTables{}
			p, _ := benchProxier(b, ipt, size.n, 10)
			b.ReportAllocs()
			loopCPU(b, func() {
				p.RequestFullSync()
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(ipt.lastRestore), "restore-bytes")
		})
		b.Run(size.name+"/one-endpoint", func(b *testing.B) {
			ipt := &discardIPTables{}
			p, slcs := benchProxier(b, ipt, size.n, 10)
			b.ReportAllocs()
			i := 0
			loopCPU(b, func() {
				toggleEndpoint(p, slcs, i)
				i++
				if err := p.SyncNow(); err != nil {
					b.Fatal(err)
				}
			})
			b.ReportMetric(float64(ipt.lastRestore), "restore-bytes")
		})
	}
}

// measuringIPTables wraps a real Interface and accumulates time spent in
// iptables-restore, so the proxier's own CPU can be separated from it.
type measuringIPTables struct {
	utiliptables.Interface
	restoreTime time.Duration
	lastRestore int
	restores    int
}

func (m *measuringIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	start := time.Now()
	err := m.Interface.RestoreAll(data, flush, counters)
	m.restoreTime += time.Since(start)
	m.restores++
	m.lastRestore = len(data)
	return err
}

// BenchmarkSyncKernel runs the same syncs against real iptables in a private
// network namespace (root only), for the nft and legacy backends, and a no-op
// sync, which must not run iptables-restore. 10k
// services take minutes (iptables-nft-restore of the first full sync alone
// takes over 6 minutes on a 2-core machine); set KUBE_PROXY_BENCH_10K=1 to
// include them, and KUBE_PROXY_BENCH_IPTABLES=legacy (or nft) to run one
// backend only.
func BenchmarkSyncKernel(b *testing.B) {
	for _, variant := range []string{"nft", "legacy"} {
		if only := os.Getenv("KUBE_PROXY_BENCH_IPTABLES"); only != "" && only != variant {
			continue
		}
		for _, size := range benchSizes {
			if size.n > 1000 && os.Getenv("KUBE_PROXY_BENCH_10K") == "" {
				continue
			}
			b.Run(fmt.Sprintf("%s/%s", variant, size.name), func(b *testing.B) {
				kernelNetns(b, variant)
				real := utiliptables.New(utiliptables.ProtocolIPv4)
				if err := real.Present(); err != nil {
					b.Skipf("%s iptables not usable: %v", variant, err)
				}
				ipt := &measuringIPTables{Interface: real}
				start := time.Now()
				// No nfacct: its counters would have to be created in the
				// test's namespace, which the netlink client cannot target.
				p, slcs := benchProxierNFAcct(b, ipt, size.n, 10, nil)
				b.Logf("%s %s: first full sync %v (iptables-restore %v, %d bytes)", variant, size.name, time.Since(start), ipt.restoreTime, ipt.lastRestore)

				b.Run("full", func(b *testing.B) {
					ipt.restoreTime = 0
					for b.Loop() {
						p.RequestFullSync()
						if err := p.SyncNow(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(ipt.restoreTime.Milliseconds())/float64(b.N), "restore-ms/op")
					b.ReportMetric(float64(ipt.lastRestore), "restore-bytes")
				})
				b.Run("one-endpoint", func(b *testing.B) {
					ipt.restoreTime = 0
					i := 0
					for b.Loop() {
						toggleEndpoint(p, slcs, i)
						i++
						if err := p.SyncNow(); err != nil {
							b.Fatal(err)
						}
					}
					b.ReportMetric(float64(ipt.restoreTime.Microseconds())/1000/float64(b.N), "restore-ms/op")
					b.ReportMetric(float64(ipt.lastRestore), "restore-bytes")
				})
				// What the periodic resync costs: no restore at all, on
				// either backend (upstream restores every table each time).
				b.Run("no-op", func(b *testing.B) {
					restores := ipt.restores
					for b.Loop() {
						if err := p.SyncNow(); err != nil {
							b.Fatal(err)
						}
					}
					if ipt.restores != restores {
						b.Fatalf("%d no-op syncs ran iptables-restore %d times", b.N, ipt.restores-restores)
					}
				})
			})
		}
	}
}
