package winkernel

import (
	"fmt"
	"testing"

	"k8s.io/klog/v2"
)

// benchEnv is n Services x eps remote endpoints, synced once.
func benchEnv(b *testing.B, n, eps int) (*env, []any) {
	b.Helper()
	f := families[0]
	e := newEnv(b, f, envOptions{})
	objs := make([]any, 0, 2*n)
	for i := range n {
		objs = append(objs, svcN(f, i), sliceN(f, i, eps, false))
	}
	return e, objs
}

func benchSizes() []int { return []int{1000, 10000} }

// BenchmarkFullSync programs n Services x 10 endpoints into an empty HNS:
// n load balancers and 10n remote endpoints.
func BenchmarkFullSync(b *testing.B) {
	quiet(b)
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			calls := 0
			for b.Loop() {
				b.StopTimer()
				e, objs := benchEnv(b, n, 10)
				e.add(objs...)
				e.p.OnServiceSynced()
				b.StartTimer()
				e.p.OnEndpointSlicesSynced() // the first, full sync
				b.StopTimer()
				if e.p.Syncs() != 1 {
					b.Fatal("sync failed")
				}
				calls += e.hns.TotalCalls()
				b.StartTimer()
			}
			b.ReportMetric(float64(calls)/float64(b.N), "hcncalls/op")
		})
	}
}

// BenchmarkFullResync is the periodic (or after-error) full sync of a
// converged node: HNS is listed and everything adopted, nothing written.
func BenchmarkFullResync(b *testing.B) {
	quiet(b)
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e, objs := benchEnv(b, n, 10)
			e.start(objs...)
			e.hns.ResetCalls()
			for b.Loop() {
				e.p.RequestFullSync()
				e.sync()
			}
			b.ReportMetric(float64(e.hns.TotalCalls())/float64(b.N), "hcncalls/op")
		})
	}
}

// BenchmarkRestart is a new proxier's first sync over what an earlier one
// programmed: everything is listed and adopted, nothing written.
func BenchmarkRestart(b *testing.B) {
	quiet(b)
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e, objs := benchEnv(b, n, 10)
			e.start(objs...)
			e.hns.ResetCalls()
			for b.Loop() {
				b.StopTimer()
				e.p = e.newProxier()
				e.add(objs...)
				e.p.OnServiceSynced()
				b.StartTimer()
				e.p.OnEndpointSlicesSynced()
			}
			b.ReportMetric(float64(e.hns.TotalCalls())/float64(b.N), "hcncalls/op")
		})
	}
}

// BenchmarkOneEndpointChange replaces one endpoint of one Service among n
// (x 10 endpoints): one endpoint listing, one create, one load balancer
// update, one delete, whatever n is.
func BenchmarkOneEndpointChange(b *testing.B) {
	quiet(b)
	f := families[0]
	for _, n := range benchSizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			e, objs := benchEnv(b, n, 10)
			e.start(objs...)
			e.hns.ResetCalls()
			a, c := sliceN(f, n/2, 10, false), sliceN(f, n/2, 10, true)
			for b.Loop() {
				e.p.OnEndpointSliceUpdate(a, c)
				e.sync()
				a, c = c, a
			}
			b.ReportMetric(float64(e.hns.TotalCalls())/float64(b.N), "hcncalls/op")
		})
	}
}

// BenchmarkNoOpSync is a sync with nothing to do: no HNS call.
func BenchmarkNoOpSync(b *testing.B) {
	quiet(b)
	e, objs := benchEnv(b, 10000, 10)
	e.start(objs...)
	e.hns.ResetCalls()
	for b.Loop() {
		e.sync()
	}
	b.ReportMetric(float64(e.hns.TotalCalls())/float64(b.N), "hcncalls/op")
}

// quiet keeps klog's global logger (used by the brain) off the benchmark.
func quiet(b *testing.B) {
	b.Helper()
	klog.LogToStderr(false)
	b.Cleanup(func() { klog.LogToStderr(true) })
}
