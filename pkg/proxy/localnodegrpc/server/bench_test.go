package server

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// benchServer serves n services of 10 endpoints each (half of them on this node).
func benchServer(b *testing.B, n int) (*running, *source.Static) {
	b.Helper()
	src := source.NewStatic()
	cluster(src, n, 10)
	r := start(b, src, b.TempDir(), Options{})
	return r, src
}

// BenchmarkFullStateNewClient: what a new watcher costs: one op is a connect and the
// whole node-local state (10 endpoints per service), decoded into the client's model.
func BenchmarkFullStateNewClient(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			r, _ := benchServer(b, n)
			conn := dial(b, r.addr)
			before := r.srv.SentBytes()
			b.ResetTimer()
			for b.Loop() {
				stop := fmt.Errorf("stop")
				_, _, err := client.WatchOnce(context.Background(), conn, &localnodev1.WatchRequest{NodeLocal: true}, func(bt *client.Batch) error {
					nl, _, err := client.NewNodeLocal().Apply(bt)
					if err != nil {
						return err
					}
					if got := len(nl.State("IPv4").Services); got != n {
						return fmt.Errorf("%d services, want %d", got, n)
					}
					return stop
				})
				if err != stop {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(r.srv.SentBytes()-before)/float64(b.N), "wire-bytes/op")
		})
	}
}

// BenchmarkOneEndpointChange: one op is one endpoint moving in the source, through the
// brain and the wire, until the watcher's callback has the batch: ns/op is that latency
// (the brain's MinSyncInterval is 1ms here; kube-proxy's default is 1s).
func BenchmarkOneEndpointChange(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) {
			r, src := benchServer(b, n)
			ch, _ := collect(b, dial(b, r.addr), &localnodev1.WatchRequest{NodeLocal: true})
			next(b, ch) // the full state
			before := r.srv.SentBytes()
			var maxEvent int
			gen := 0
			b.ResetTimer()
			for b.Loop() {
				gen++
				src.SetEndpointSlice(slice(gen%n, 10, gen))
				bt := next(b, ch)
				if len(bt.Ops) != 1 {
					b.Fatalf("%d ops for one endpoint change", len(bt.Ops))
				}
				ev := &localnodev1.WatchEvent{InstanceId: bt.Instance, Revision: bt.Revision, Ops: bt.Ops, Synced: true}
				maxEvent = max(maxEvent, protoSize(ev))
			}
			b.ReportMetric(float64(r.srv.SentBytes()-before)/float64(b.N), "wire-bytes/op")
			b.ReportMetric(float64(maxEvent), "max-message-bytes")
		})
	}
}

// BenchmarkServerMemory (run with -benchtime=1x: each op connects the watchers anew): the
// server's heap with 1, 10 and 100 watchers of the 10k-service
// state, after 100 endpoint changes. heap-bytes/watcher is the growth over the heap
// without watchers, divided by their number: it should stay far below one copy of the
// state (the store is shared; a watcher is a revision and the batch being sent).
func BenchmarkServerMemory(b *testing.B) {
	const n = 10000
	r, src := benchServer(b, n)
	heap := func() uint64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	gen := 0
	for _, watchers := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			for b.Loop() {
				base := heap()
				var cancels []context.CancelFunc
				var chans []<-chan *client.Batch
				for range watchers {
					conn, err := client.Dial(r.addr, nil)
					if err != nil {
						b.Fatal(err)
					}
					ch, cancel := collect(b, conn, &localnodev1.WatchRequest{NodeLocal: true})
					next(b, ch)
					chans = append(chans, ch)
					cancels = append(cancels, func() { cancel(); conn.Close() })
				}
				for range 100 {
					gen++
					src.SetEndpointSlice(slice(gen%n, 10, gen))
				}
				rev := r.srv.Revision()
				for _, ch := range chans {
					for bt := next(b, ch); bt.Revision < rev; bt = next(b, ch) {
					}
				}
				// The clients' own copies are in this process too: they are counted, so
				// the figure is an upper bound of the server's share.
				b.ReportMetric(float64(heap()-base)/float64(watchers), "heap-bytes/watcher")
				for _, c := range cancels {
					c()
				}
				time.Sleep(50 * time.Millisecond)
			}
		})
	}
	live, dead := r.srv.store.size()
	b.Logf("store: %d live objects, %d tombstones", live, dead)
}
