package server

import (
	"context"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"k8s.io/component-base/metrics/testutil"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// readyConn dials addr and waits until the gRPC connection is up (handshake and HTTP/2
// settings done), without starting any RPC.
func readyConn(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	conn := dial(t, addr)
	conn.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for s := conn.GetState(); s != connectivity.Ready; s = conn.GetState() {
		if !conn.WaitForStateChange(ctx, s) {
			t.Fatalf("connection not ready: %v", s)
		}
	}
	return conn
}

// firstState reads the first batch of a new client's watch within timeout.
func firstState(addr string, timeout time.Duration) (int, error) {
	conn, err := client.Dial(addr, nil)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	got := 0
	_, _, err = client.WatchOnce(ctx, conn, &localnodev1.WatchRequest{NodeLocal: true}, func(b *client.Batch) error {
		got = len(b.Ops)
		return errDone
	})
	if err == errDone {
		err = nil
	}
	return got, err
}

// TestIdleConnectionsDoNotCrowdOut: MaxConns connections that never start an RPC (raw
// ones that never speak, or gRPC connections that are up but idle) do not keep a real
// client out: the oldest idle one makes room, long before the idle timeout.
func TestIdleConnectionsDoNotCrowdOut(t *testing.T) {
	RegisterMetrics()
	const maxConns = 8
	tests := []struct {
		name string
		open func(t *testing.T, addr string)
	}{
		{"raw connections that never speak", func(t *testing.T, addr string) {
			c, err := net.Dial("unix", strings.TrimPrefix(addr, "unix://"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
		}},
		{"gRPC connections with no RPC", func(t *testing.T, addr string) { readyConn(t, addr) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			src := source.NewStatic()
			cluster(src, 3, 2)
			// An idle timeout far beyond the test: only eviction can make room.
			r := startServing(t, src, t.TempDir(), Options{}, ServeOptions{MaxConns: maxConns, IdleTimeout: time.Hour})
			before, _ := testutil.GetCounterMetricValue(connectionsEvicted.WithLabelValues("limit"))
			for range maxConns + 2 {
				tc.open(t, r.addr)
			}
			got, err := firstState(r.addr, 10*time.Second)
			if err != nil || got != 3 {
				t.Fatalf("a real client behind %d idle connections: %d ops, err = %v", maxConns+2, got, err)
			}
			if after, _ := testutil.GetCounterMetricValue(connectionsEvicted.WithLabelValues("limit")); after <= before {
				t.Errorf("evicted{reason=limit} went from %v to %v", before, after)
			}
		})
	}
}

// TestWatchingConnectionsAreNeverEvicted: when every slot holds a watch, a new
// connection is refused (and counted) rather than one of the watchers evicted.
func TestWatchingConnectionsAreNeverEvicted(t *testing.T) {
	RegisterMetrics()
	const maxConns = 4
	src := source.NewStatic()
	cluster(src, 3, 2)
	r := startServing(t, src, t.TempDir(), Options{}, ServeOptions{MaxConns: maxConns, IdleTimeout: time.Hour})
	var watchers []<-chan *client.Batch
	for range maxConns {
		ch, _ := collect(t, dial(t, r.addr), &localnodev1.WatchRequest{NodeLocal: true})
		next(t, ch)
		watchers = append(watchers, ch)
	}
	before, _ := testutil.GetCounterMetricValue(connectionsRefused.WithLabelValues("limit"))
	if got, err := firstState(r.addr, 2*time.Second); err == nil {
		t.Errorf("a client beyond %d watching connections read %d ops", maxConns, got)
	}
	if after, _ := testutil.GetCounterMetricValue(connectionsRefused.WithLabelValues("limit")); after <= before {
		t.Errorf("refused{reason=limit} went from %v to %v", before, after)
	}
	src.SetEndpointSlice(slice(1, 2, 1))
	for i, ch := range watchers {
		if b := next(t, ch); b.Reset || len(b.Ops) != 1 {
			t.Errorf("watcher %d after a change: reset=%v, %d ops", i, b.Reset, len(b.Ops))
		}
	}
}

// TestIdleConnectionClosed: a connection that starts no RPC is closed after the idle
// timeout; one that is watching is not.
func TestIdleConnectionClosed(t *testing.T) {
	RegisterMetrics()
	src := source.NewStatic()
	cluster(src, 3, 2)
	const idle = 300 * time.Millisecond
	r := startServing(t, src, t.TempDir(), Options{}, ServeOptions{IdleTimeout: idle})
	before, _ := testutil.GetCounterMetricValue(connectionsEvicted.WithLabelValues("idle"))

	watching := dial(t, r.addr)
	ch, _ := collect(t, watching, &localnodev1.WatchRequest{NodeLocal: true})
	next(t, ch)

	raw, err := net.Dial("unix", strings.TrimPrefix(r.addr, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { raw.Close() })
	idleConn := readyConn(t, r.addr)

	// Well past the timeout, yet under gRPC's 10 s handshake timeout, which closed a
	// raw connection before. The server's HTTP/2 settings come first: read to the end.
	_ = raw.SetReadDeadline(time.Now().Add(idle + 3*time.Second))
	if _, err := io.Copy(io.Discard, raw); isTimeout(err) {
		t.Errorf("a raw connection that never spoke is still open after the idle timeout: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), idle+3*time.Second)
	defer cancel()
	for idleConn.GetState() == connectivity.Ready {
		if !idleConn.WaitForStateChange(ctx, connectivity.Ready) {
			t.Fatal("an idle gRPC connection is still up after the idle timeout")
		}
	}
	if after, _ := testutil.GetCounterMetricValue(connectionsEvicted.WithLabelValues("idle")); after <= before {
		t.Errorf("evicted{reason=idle} went from %v to %v", before, after)
	}
	if watching.GetState() != connectivity.Ready {
		t.Errorf("the watching connection is %v", watching.GetState())
	}
	src.SetEndpointSlice(slice(1, 2, 1))
	if b := next(t, ch); len(b.Ops) != 1 {
		t.Errorf("the watcher after a change: %d ops", len(b.Ops))
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

// TestInsecureTCPOnlyOnLoopback: plain TCP (InsecureTCP) is served on a loopback
// address only; any other address would expose the cluster's objects to whoever can
// reach the node. Before, InsecureTCP allowed any address.
func TestInsecureTCPOnlyOnLoopback(t *testing.T) {
	srv, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		address string
		wantErr bool
	}{
		{"tcp://0.0.0.0:0", true},
		{"tcp://[::]:0", true},
		{"tcp://:0", true},
		{"tcp://127.0.0.1:0", false},
		{"tcp://localhost:0", false},
	}
	for _, tc := range tests {
		t.Run(tc.address, func(t *testing.T) {
			// Cancelled up front: an accepted address serves and returns at once.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			err := srv.Serve(ctx, ServeOptions{Address: tc.address, InsecureTCP: true})
			if tc.wantErr != (err != nil) {
				t.Errorf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), "loopback") {
				t.Errorf("err = %v, want it to say loopback", err)
			}
		})
	}
}
