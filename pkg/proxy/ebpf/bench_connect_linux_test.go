//go:build linux

package ebpf

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// bench is the child's side of BenchmarkConnect: it times a TCP connect and the first
// reply line, alternating between the Service address and the endpoint's own address
// so both see the same machine load.
func bench(req request) result {
	var res result
	one := func(addr string) (float64, error) {
		start := time.Now()
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return 0, err
		}
		return float64(time.Since(start).Nanoseconds()) / 1e3, nil
	}
	for i := 0; i < req.Count; i++ {
		v, err := one(req.Addr)
		if err != nil {
			return result{Err: err.Error()}
		}
		d, err := one(req.Direct)
		if err != nil {
			return result{Err: err.Error()}
		}
		res.Via, res.Direct = append(res.Via, v), append(res.Direct, d)
	}
	return res
}

func percentile(v []float64, p float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

// BenchmarkConnect measures connection setup through a ClusterIP with the socket load
// balancer against a direct connection to the endpoint (the limit), with 1k and 50k
// Services in the maps. It reports p50 and p99 of each in microseconds and their ratio;
// ns/op is the wall time of one pair of connections. (nftables alone is not measured
// here: see the report.)
func BenchmarkConnect(b *testing.B) {
	for _, n := range []int{1000, 50000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e := newEnv(b)
			st := benchState(n)
			// The service under test: a ClusterIP outside the benchmark's 10.96/16 plan,
			// one endpoint (the direct address), so both paths reach the same server.
			target := svc("target", localnode.TCP, "10.97.0.1", 80, v4Backends[0])
			st.Services = append(st.Services, target)
			st.Normalize()
			if err := e.differ.Sync(b.Context(), st); err != nil {
				b.Fatal(err)
			}
			direct := netip.AddrPortFrom(netip.MustParseAddr(v4Backends[0]), backendPort).String()
			var via, dir []float64
			b.ResetTimer()
			res, err := e.try2(request{Op: "bench", Addr: "10.97.0.1:80", Direct: direct, Count: b.N})
			b.StopTimer()
			if err != nil || res.Err != "" {
				b.Fatalf("bench: %v %s", err, res.Err)
			}
			via, dir = res.Via, res.Direct
			b.ReportMetric(percentile(via, 0.5), "socketlb-p50-us")
			b.ReportMetric(percentile(via, 0.99), "socketlb-p99-us")
			b.ReportMetric(percentile(dir, 0.5), "direct-p50-us")
			b.ReportMetric(percentile(dir, 0.99), "direct-p99-us")
			b.ReportMetric(percentile(via, 0.5)/percentile(dir, 0.5), "p50-ratio")
		})
	}
}
