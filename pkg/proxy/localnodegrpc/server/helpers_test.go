package server

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

const testNode = "node-a"

// cluster fills src with n services of one port, each with eps endpoints on alternating
// nodes.
func cluster(src *source.Static, n, eps int) {
	src.SetNode(st.Node(testNode, "z1"))
	for i := range n {
		src.SetService(svc(i))
		src.SetEndpointSlice(slice(i, eps, 0))
	}
}

func svc(i int) *v1.Service {
	return st.Service("ns", fmt.Sprintf("svc-%d", i), []string{fmt.Sprintf("10.%d.%d.%d", 96+i/65536, (i/256)%256, i%256)})
}

// slice returns service i's slice with eps endpoints, the first of them at port+gen so a
// new generation changes exactly one endpoint.
func slice(i, eps, gen int) *discovery.EndpointSlice {
	var list []discovery.Endpoint
	for e := range eps {
		node := []string{testNode, "node-b"}[e%2]
		list = append(list, st.Endpoint(fmt.Sprintf("10.%d.%d.%d", 128+i/65536, (i/256)%256, e+1), node))
	}
	s := st.EndpointSlice("ns", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc-%d-1", i), "http", 8080, list...)
	if gen > 0 && eps > 0 {
		// Move the first endpoint: one endpoint changes.
		s.Endpoints[0].Addresses = []string{fmt.Sprintf("10.%d.%d.%d", 160+i/65536, (i/256)%256, gen%250+1)}
	}
	return s
}

type running struct {
	srv    *Server
	addr   string
	cancel context.CancelFunc
	done   chan struct{}
}

// start runs a Server over src, serving on a unix socket in dir, until the test ends or
// stop is called.
func start(t testing.TB, src source.Source, dir string, opts Options) *running {
	t.Helper()
	return startServing(t, src, dir, opts, ServeOptions{})
}

// startServing is start with ServeOptions.
func startServing(t testing.TB, src source.Source, dir string, opts Options, sopts ServeOptions) *running {
	t.Helper()
	if opts.Proxy.NodeName == "" {
		opts.Proxy.NodeName = testNode
	}
	if opts.Proxy.MinSyncInterval == 0 {
		opts.Proxy.MinSyncInterval = time.Millisecond
	}
	srv, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{srv: srv, addr: "unix://" + filepath.Join(dir, "localnode.sock"), cancel: cancel, done: make(chan struct{})}
	l, err := Listen(r.addr)
	if err != nil {
		t.Fatal(err)
	}
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		if err := srv.Run(ctx, src); err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	go func() {
		defer close(r.done)
		if err := srv.ServeListener(ctx, l, sopts); err != nil {
			t.Errorf("Serve: %v", err)
		}
		<-runDone
	}()
	t.Cleanup(r.stop)
	select {
	case <-srv.Ready():
	case <-time.After(30 * time.Second):
		t.Fatal("server not ready")
	}
	return r
}

func (r *running) stop() {
	r.cancel()
	<-r.done
}

func dial(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	conn, err := client.Dial(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// collect runs one watch in the background and passes its batches on.
func collect(t testing.TB, conn *grpc.ClientConn, req *localnodev1.WatchRequest) (<-chan *client.Batch, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	ch := make(chan *client.Batch, 1000)
	go func() {
		_, _, _ = client.WatchOnce(ctx, conn, req, func(b *client.Batch) error {
			select {
			case ch <- b:
			case <-ctx.Done():
			}
			return nil
		})
		close(ch)
	}()
	t.Cleanup(cancel)
	return ch, cancel
}

func next(t testing.TB, ch <-chan *client.Batch) *client.Batch {
	t.Helper()
	select {
	case b, ok := <-ch:
		if !ok {
			t.Fatal("watch ended")
		}
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no batch")
	}
	return nil
}

// inProcessState runs a plain proxyrun over src and returns the State of family it
// computes: what the server must serve.
func inProcessState(t testing.TB, src source.Source, f localnode.Family) *localnode.State {
	t.Helper()
	var got *localnode.State
	p, err := proxyrun.New(fullStateFunc(func(s *localnode.State) {
		if s.Family == f {
			got = s
		}
	}), proxyrun.Options{NodeName: testNode, Families: []localnode.Family{f}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = src.Run(ctx, p) }()
	if err := p.WaitForInitial(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	return got
}

type fullStateFunc func(*localnode.State)

func (f fullStateFunc) Sync(_ context.Context, s *localnode.State) error { f(s); return nil }

func protoSize(ev *localnodev1.WatchEvent) int { return proto.Size(ev) }
