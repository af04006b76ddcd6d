package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"strconv"
	"testing"
	"time"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// TestNeverReadingWatchersBoundedMemory: watchers that never read, while thousands of
// changes go by, cost the server a bounded amount each (the batch it is blocked sending,
// within gRPC's flow-control window), not a queue of every change.
func TestNeverReadingWatchersBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode")
	}
	const services, changes = 1000, 500
	const stuck = 10
	src := source.NewStatic()
	cluster(src, services, 10)
	r := start(t, src, t.TempDir(), Options{})
	heap := func() uint64 {
		// Twice: pooled buffers survive one collection in sync.Pool's victim cache.
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	gen := 0
	churn := func() {
		for range changes {
			gen++
			src.SetEndpointSlice(slice(gen%services, 10, gen))
		}
	}
	base := heap()
	// The watchers live in another process (this test binary, re-run), so the heap
	// measured here is the server's alone.
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), stuckEnv+"="+r.addr, stuckCountEnv+"="+strconv.Itoa(stuck))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = cmd.Wait() })
	deadline := time.Now().Add(30 * time.Second)
	for r.srv.watches.Load() < int64(stuck) {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d stuck watchers connected", r.srv.watches.Load(), stuck)
		}
		time.Sleep(10 * time.Millisecond)
	}
	churn()
	first := int64(heap()) - int64(base)
	for range 3 {
		churn()
	}
	grown := int64(heap()) - int64(base)
	if p := os.Getenv("STUCK_HEAPPROF"); p != "" {
		f, _ := os.Create(p)
		_ = pprof.WriteHeapProfile(f)
		f.Close()
	}
	// What a never-reading watcher costs is what gRPC buffers for its stream (encoded
	// events up to its flow-control windows) plus the names of the keys of the batch it
	// is stuck in: bounded, and the same after four times the changes. A queue of every
	// change (~1.6 KB of ops per change and watcher) would add ~2.5 MB per watcher.
	const perWatcher = 4 << 20
	if grown > int64(stuck)*perWatcher {
		t.Errorf("heap grew by %d MB with %d never-reading watchers: more than %d MB each", grown>>20, stuck, perWatcher>>20)
	}
	if grown-first > 16<<20 {
		t.Errorf("heap kept growing with the changes: %d MB after %d, %d MB after %d", first>>20, changes, grown>>20, 4*changes)
	}
	t.Logf("heap grew by %.1f MB after %d changes, %.1f MB after %d, with %d never-reading watchers",
		float64(first)/(1<<20), changes, float64(grown)/(1<<20), 4*changes, stuck)
	// The server still serves a reading client.
	ch, _ := collect(t, dial(t, r.addr), &localnodev1.WatchRequest{NodeLocal: true})
	if b := next(t, ch); !b.Reset || len(b.Ops) != services {
		t.Errorf("a reading client got reset=%v with %d ops", b.Reset, len(b.Ops))
	}
}

const (
	stuckEnv      = "LOCALNODE_STUCK_WATCHERS_ADDR"
	stuckCountEnv = "LOCALNODE_STUCK_WATCHERS"
)

// TestMain lets TestNeverReadingWatchersBoundedMemory re-run this binary as a process of
// watchers that never read, until its stdin closes.
func TestMain(m *testing.M) {
	if addr := os.Getenv(stuckEnv); addr != "" {
		n, _ := strconv.Atoi(os.Getenv(stuckCountEnv))
		for range n {
			conn, err := client.Dial(addr, nil)
			if err == nil {
				_, err = localnodev1.NewLocalNodeClient(conn).Watch(context.Background(), &localnodev1.WatchRequest{NodeLocal: true, Global: true})
			}
			if err != nil {
				fmt.Fprintln(os.Stderr, "stuck watcher:", err)
				os.Exit(1)
			}
		}
		_, _ = os.Stdin.Read(make([]byte, 1))
		os.Exit(0)
	}
	os.Exit(m.Run())
}
