package server

import (
	"context"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

func stateOf(t testing.TB, nl *client.NodeLocal, b *client.Batch, f localnode.Family) (*client.NodeLocal, *localnode.State) {
	t.Helper()
	next, _, err := nl.Apply(b)
	if err != nil {
		t.Fatal(err)
	}
	return next, next.State(f)
}

// TestWatchFullStateThenChanges: a new watcher gets the full state (what an in-process
// proxyrun computes), then one small batch per change.
func TestWatchFullStateThenChanges(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 20, 4)
	r := start(t, src, t.TempDir(), Options{})
	conn := dial(t, r.addr)
	ch, _ := collect(t, conn, &localnodev1.WatchRequest{NodeLocal: true})

	b := next(t, ch)
	if !b.Reset || b.Instance != r.srv.InstanceID() || b.Revision == 0 {
		t.Fatalf("first batch: reset=%v instance=%q revision=%d", b.Reset, b.Instance, b.Revision)
	}
	nl, got := stateOf(t, client.NewNodeLocal(), b, localnode.IPv4)
	if want := inProcessState(t, src, localnode.IPv4); !got.Equal(want) {
		t.Fatalf("full state differs from proxyrun's: got %d services, want %d", len(got.Services), len(want.Services))
	}

	src.SetEndpointSlice(slice(3, 4, 1))
	b = next(t, ch)
	if b.Reset || len(b.Ops) != 1 || b.Ops[0].GetSetService().GetName().GetName() != "svc-3" {
		t.Fatalf("after one endpoint change: reset=%v ops=%v", b.Reset, b.Ops)
	}
	_, got = stateOf(t, nl, b, localnode.IPv4)
	if want := inProcessState(t, src, localnode.IPv4); !got.Equal(want) {
		t.Fatal("state after a change differs from proxyrun's")
	}

	src.DeleteService("ns", "svc-5")
	b = next(t, ch)
	if len(b.Ops) != 1 || b.Ops[0].GetDeleteService().GetName().GetName() != "svc-5" {
		t.Fatalf("after a delete: ops=%v", b.Ops)
	}
}

// TestResume covers the three answers to a reconnecting watcher: changes only, the full
// state for another instance, and the full state when its deletions were compacted.
func TestResume(t *testing.T) {
	tests := []struct {
		name      string
		instance  func(r *running) string
		deletes   int
		wantReset bool
	}{
		{"same instance, known revision: changes only", func(r *running) string { return r.srv.InstanceID() }, 1, false},
		{"another instance: full state", func(*running) string { return "someone-else" }, 1, true},
		{"revision older than compacted tombstones: full state", func(r *running) string { return r.srv.InstanceID() }, 8, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := source.NewStatic()
			cluster(src, 20, 2)
			r := start(t, src, t.TempDir(), Options{MaxTombstones: 4})
			conn := dial(t, r.addr)
			ch, cancel := collect(t, conn, &localnodev1.WatchRequest{NodeLocal: true, Global: true})
			first := next(t, ch)
			cancel()
			rev := first.Revision

			src.SetEndpointSlice(slice(1, 2, 1))
			for i := range tc.deletes {
				src.DeleteEndpointSlice("ns", slice(10+i, 2, 0).Name)
				src.DeleteService("ns", svc(10+i).Name)
			}
			waitRev(t, r.srv, rev)
			time.Sleep(50 * time.Millisecond) // let the brain settle the deletions too
			ch, _ = collect(t, conn, &localnodev1.WatchRequest{NodeLocal: true, Global: true, InstanceId: tc.instance(r), Revision: rev})
			b := next(t, ch)
			if b.Reset != tc.wantReset {
				t.Fatalf("reset = %v, want %v (%d ops)", b.Reset, tc.wantReset, len(b.Ops))
			}
			if !tc.wantReset && len(b.Ops) >= len(first.Ops) {
				t.Errorf("resume sent %d ops, as many as the full state (%d)", len(b.Ops), len(first.Ops))
			}
			// Either way the client ends up with the server's state.
			nl, _, err := client.NewNodeLocal().Apply(first)
			if err != nil {
				t.Fatal(err)
			}
			nl, _, err = nl.Apply(b)
			if err != nil {
				t.Fatal(err)
			}
			for b.Revision < r.srv.Revision() {
				b = next(t, ch)
				if nl, _, err = nl.Apply(b); err != nil {
					t.Fatal(err)
				}
			}
			want, _ := r.srv.State(localnode.IPv4)
			if got := nl.State(localnode.IPv4); !got.Equal(want) {
				t.Errorf("resumed state has %d services, server %d", len(got.Services), len(want.Services))
			}
		})
	}
}

func waitRev(t testing.TB, s *Server, after uint64) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for s.Revision() <= after {
		if time.Now().After(deadline) {
			t.Fatal("revision does not move")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestSlowWatcherCoalesced: a watcher that does not read while thousands of changes go by
// is then sent the latest value of each changed key, in few events, and the server does
// not queue for it meanwhile.
func TestSlowWatcherCoalesced(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 50, 2)
	r := start(t, src, t.TempDir(), Options{})
	conn := dial(t, r.addr)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, err := localnodev1.NewLocalNodeClient(conn).Watch(ctx, &localnodev1.WatchRequest{NodeLocal: true})
	if err != nil {
		t.Fatal(err)
	}
	const changes = 2000
	for g := 1; g <= changes; g++ {
		src.SetEndpointSlice(slice(g%50, 2, g))
	}
	// The server's goroutines do not grow with the changes: a watcher is a revision.
	waitRev(t, r.srv, 0)
	events := 0
	nl := client.NewNodeLocal()
	var cur client.Batch
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		events++
		if ev.GetReset_() {
			cur = client.Batch{Reset: true}
		}
		cur.Ops = append(cur.Ops, ev.GetOps()...)
		if !ev.GetSynced() {
			continue
		}
		if nl, _, err = nl.Apply(&cur); err != nil {
			t.Fatal(err)
		}
		cur = client.Batch{}
		want, _ := r.srv.State(localnode.IPv4)
		if ev.GetRevision() == r.srv.Revision() && nl.State(localnode.IPv4).Equal(want) {
			break
		}
	}
	if events > changes/10 {
		t.Errorf("%d events for %d changes: not coalesced", events, changes)
	}
	t.Logf("%d changes reached a slow watcher in %d events", changes, events)
}

// TestHostileClients: garbage on the socket, thousands of connects and watchers that
// never read leave the server serving, with its watch count back to zero.
func TestHostileClients(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 10, 2)
	dir := t.TempDir()
	r := start(t, src, dir, Options{MaxWatches: 64})
	path := strings.TrimPrefix(r.addr, "unix://")
	goroutines := runtime.NumGoroutine()

	// Garbage frames: a bogus HTTP/2 preface, then random bytes.
	for _, junk := range []string{"GET / HTTP/1.1\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x04\x08\x00\x00\x00\x00\x00\xff\xff\xff\xff", strings.Repeat("\xff", 70000)} {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = c.Write([]byte(junk))
		c.Close()
	}
	// A thousand connects that go away at once.
	for range 1000 {
		c, err := net.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		c.Close()
	}
	// Watchers that never read, beyond the watch limit.
	var conns []func()
	for range 80 {
		conn, err := client.Dial(r.addr, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		conns = append(conns, func() { cancel(); conn.Close() })
		s, err := localnodev1.NewLocalNodeClient(conn).Watch(ctx, &localnodev1.WatchRequest{NodeLocal: true, Global: true})
		if err == nil {
			_, err = s.Header()
		}
		_ = err // refused beyond MaxWatches, or stuck: either is fine
	}
	for g := 1; g <= 200; g++ {
		src.SetEndpointSlice(slice(g%10, 2, g))
	}
	// A well-behaved client still gets the current state.
	ch, _ := collect(t, dial(t, r.addr), &localnodev1.WatchRequest{NodeLocal: true})
	for _, c := range conns {
		c()
	}
	// It may be refused while the stuck watchers hold every slot: retry.
	var b *client.Batch
	deadline := time.Now().Add(30 * time.Second)
	for b == nil && time.Now().Before(deadline) {
		select {
		case got, ok := <-ch:
			if ok {
				b = got
			} else {
				ch, _ = collect(t, dial(t, r.addr), &localnodev1.WatchRequest{NodeLocal: true})
			}
		case <-time.After(100 * time.Millisecond):
		}
	}
	if b == nil || !b.Reset {
		t.Fatalf("a good client got no full state after hostile ones: %+v", b)
	}
	deadline = time.Now().Add(30 * time.Second)
	for r.srv.watches.Load() > 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d watches still open after their clients left", r.srv.watches.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	// Connections wind down asynchronously: wait for the goroutines to go.
	deadline = time.Now().Add(30 * time.Second)
	for n := runtime.NumGoroutine(); n > goroutines+50; n = runtime.NumGoroutine() {
		if time.Now().After(deadline) {
			t.Fatalf("goroutines grew from %d to %d", goroutines, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestWatchBadRequest: an unknown family is refused, naming the field.
func TestWatchBadRequest(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 1, 1)
	r := start(t, src, t.TempDir(), Options{})
	_, _, err := client.WatchOnce(context.Background(), dial(t, r.addr), &localnodev1.WatchRequest{Families: []localnodev1.Family{9}}, func(*client.Batch) error { return nil })
	if err == nil || !strings.Contains(err.Error(), "families[0]: unknown IP family 9") {
		t.Errorf("err = %v", err)
	}
}
