//go:build linux

package nftables

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/knftables"
)

// discardNFT renders every transaction (as the real interface must) and
// throws it away: it measures rule generation and diffing without the
// knftables fake's own cost of copying the whole table on each Run.
type discardNFT struct {
	*knftables.Fake
	bytes int
}

func (d *discardNFT) Run(_ context.Context, tx *knftables.Transaction) error {
	d.bytes += len(tx.String())
	return nil
}

func (d *discardNFT) List(context.Context, string) ([]string, error) { return nil, nil }
func (d *discardNFT) ListElements(context.Context, string, string) ([]*knftables.Element, error) {
	return nil, nil
}

// benchServices returns n services with eps endpoints each: ClusterIP and
// NodePort, every tenth with externalTrafficPolicy Local, every fiftieth with
// session affinity.
func benchServices(n, eps int) []tsvc {
	out := make([]tsvc, n)
	for i := range n {
		s := tsvc{
			ns: "ns" + strconv.Itoa(i%100), name: "svc" + strconv.Itoa(i), portName: "http",
			clusterIP: fmt.Sprintf("172.30.%d.%d", i/250, i%250+1), port: 80,
			nodePort: 30000 + i%30000, extLocal: i%10 == 0,
		}
		if i%50 == 0 {
			s.affinitySeconds = 10800
		}
		for j := range eps {
			k := i*eps + j
			s.eps = append(s.eps, tep{ip: fmt.Sprintf("10.%d.%d.%d", k/65536, (k/256)%256, k%256), port: 8080, local: j == 0})
		}
		out[i] = s
	}
	return out
}

var benchSizes = func() []int {
	if os.Getenv("KUBE_PROXY_BENCH_LARGE") != "" {
		return []int{1000, 10000, 25000}
	}
	return []int{1000, 10000}
}()

// benchModes: "gen" = generation + rendering only; "nft" = real nft in a
// private netns (root only; 10k only with KUBE_PROXY_BENCH_LARGE=1).
func benchModes(b *testing.B, n int, fn func(b *testing.B, mk func(tf testFamily) (*syncer, func()))) {
	b.Run(fmt.Sprintf("gen/%d", n), func(b *testing.B) {
		fn(b, func(tf testFamily) (*syncer, func()) {
			s, _ := newTestSyncer(b, tf, nil)
			s.nft = &discardNFT{Fake: knftables.NewFake(familyOf(tf.family), kubeProxyTable)}
			return s, func() {}
		})
	})
	b.Run(fmt.Sprintf("nft/%d", n), func(b *testing.B) {
		if n > 1000 && os.Getenv("KUBE_PROXY_BENCH_LARGE") == "" {
			b.Skip("set KUBE_PROXY_BENCH_LARGE=1 to run the real-nft benchmark at this size")
		}
		inNetns(b, func() {
			fn(b, func(tf testFamily) (*syncer, func()) {
				s, nft := realSyncer(b, tf, nil)
				return s, func() {
					tx := nft.NewTransaction()
					tx.Delete(&knftables.Table{})
					_ = nft.Run(context.Background(), tx)
				}
			})
		})
	})
}

// childCPU is the CPU time used so far by exited children (the nft runs).
func childCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportChildCPU reports the nft CPU per operation since start: wall time on
// this shared machine is dominated by other load, CPU time is not.
func reportChildCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64(childCPU()-start)/float64(time.Millisecond)/float64(b.N), "nft-cpu-ms/op")
}

func reportRSS(b *testing.B) {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MiB")
	}
}

func BenchmarkFullSync(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		svcs := benchServices(n, 10)
		benchModes(b, n, func(b *testing.B, mk func(testFamily) (*syncer, func())) {
			b.ReportAllocs()
			cpu0 := childCPU()
			for b.Loop() {
				b.StopTimer()
				s, cleanup := mk(tf)
				ms := models(tf.ip, svcs...)
				b.StartTimer()
				if _, err := s.sync(context.Background(), syncInput{full: true, services: ms}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cleanup()
				b.StartTimer()
			}
			reportChildCPU(b, cpu0)
			reportRSS(b)
		})
	}
}

// BenchmarkFullSyncUpstreamShape is the same cold start with upstream's rule
// shapes (a numgen map per service) in one transaction, as a baseline measured
// in the same run on the same machine.
func BenchmarkFullSyncUpstreamShape(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		svcs := benchServices(n, 10)
		benchModes(b, n, func(b *testing.B, mk func(testFamily) (*syncer, func())) {
			b.ReportAllocs()
			cpu0 := childCPU()
			for b.Loop() {
				b.StopTimer()
				s, cleanup := mk(tf)
				s.gen.ruleBalanceMax = 0
				s.gen.inlineMaps = true
				s.maxOps = 0
				ms := models(tf.ip, svcs...)
				b.StartTimer()
				if _, err := s.sync(context.Background(), syncInput{full: true, services: ms}); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				cleanup()
				b.StartTimer()
			}
			reportChildCPU(b, cpu0)
		})
	}
}

func BenchmarkEndpointChange(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		svcs := benchServices(n, 10)
		benchModes(b, n, func(b *testing.B, mk func(testFamily) (*syncer, func())) {
			s, cleanup := mk(tf)
			defer cleanup()
			ctx := context.Background()
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := childCPU()
			defer func() { reportChildCPU(b, cpu0) }()
			i := 0
			for b.Loop() {
				sv := svcs[(i*7919)%n]
				sv.eps = append([]tep(nil), sv.eps...)
				sv.eps[1].port = 9000 + i%1000 // a changed endpoint
				i++
				if _, err := s.sync(ctx, syncInput{services: models(tf.ip, sv)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkServiceAdd(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		svcs := benchServices(n, 10)
		extra := benchServices(n+20000, 10)[n:]
		benchModes(b, n, func(b *testing.B, mk func(testFamily) (*syncer, func())) {
			s, cleanup := mk(tf)
			defer cleanup()
			ctx := context.Background()
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu0 := childCPU()
			defer func() { reportChildCPU(b, cpu0) }()
			i := 0
			for b.Loop() {
				sv := extra[i%len(extra)]
				sv.name += "-" + strconv.Itoa(i/len(extra))
				i++
				if _, err := s.sync(ctx, syncInput{services: models(tf.ip, sv)}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkNoOpSync(b *testing.B) {
	tf := families[0]
	for _, n := range benchSizes {
		svcs := benchServices(n, 10)
		benchModes(b, n, func(b *testing.B, mk func(testFamily) (*syncer, func())) {
			s, cleanup := mk(tf)
			defer cleanup()
			ctx := context.Background()
			if _, err := s.sync(ctx, syncInput{full: true, services: models(tf.ip, svcs...)}); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res, err := s.sync(ctx, syncInput{}); err != nil || res.ops != 0 {
					b.Fatalf("no-op sync did work: %+v %v", res, err)
				}
			}
		})
	}
}
