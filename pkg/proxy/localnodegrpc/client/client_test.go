package client_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

const node = "node-a"

func fill(src *source.Static, n int) {
	src.SetNode(st.Node(node, "z1"))
	for i := range n {
		src.SetService(st.Service("ns", fmt.Sprintf("svc-%d", i), []string{fmt.Sprintf("10.96.0.%d", i+1)}))
		src.SetEndpointSlice(epSlice(i, 0))
	}
}

// epSlice is service i's slice in generation gen: four endpoints on two nodes, the
// first one's address moving with gen, the last one's readiness flipping.
func epSlice(i, gen int) *discovery.EndpointSlice {
	var mut []func(*discovery.Endpoint)
	if gen%2 == 1 {
		mut = append(mut, st.NotReady())
	}
	return st.EndpointSlice("ns", fmt.Sprintf("svc-%d", i), fmt.Sprintf("svc-%d-a", i), "http", 8080,
		st.Endpoint(fmt.Sprintf("10.1.%d.%d", i, 100+gen%100), node),
		st.Endpoint(fmt.Sprintf("10.1.%d.2", i), "node-b"),
		st.Endpoint(fmt.Sprintf("10.1.%d.3", i), node),
		st.Endpoint(fmt.Sprintf("10.1.%d.4", i), "node-b", mut...))
}

// serve runs a server over src on addr until the returned stop is called.
func serve(t *testing.T, src source.Source, addr string) (*server.Server, func()) {
	t.Helper()
	// Small events, so a full state spans many of them and a client that applied
	// them before the synced one would hand on a partial picture.
	srv, err := server.New(server.Options{MaxEventBytes: 2000, Proxy: proxyrun.Options{NodeName: node, MinSyncInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx, src) })
	wg.Go(func() {
		if err := srv.Serve(ctx, server.ServeOptions{Address: addr}); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return srv, stop
}

// want computes, in process, what node-a must program now.
func want(t *testing.T, src source.Source) *localnode.State {
	t.Helper()
	var got *localnode.State
	p, err := proxyrun.New(recorder(func(s *localnode.State) error { got = s; return nil }), proxyrun.Options{NodeName: node})
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

type recorder func(*localnode.State) error

func (r recorder) Sync(_ context.Context, s *localnode.State) error { return r(s) }

// checker is a backend that fails the test on a partial picture (fewer services than
// the cluster always has) and keeps the last State.
type checker struct {
	t        *testing.T
	services int
	mu       sync.Mutex
	last     *localnode.State
	syncs    int
}

func (c *checker) Sync(_ context.Context, s *localnode.State) error {
	if err := s.Validate(); err != nil {
		c.t.Errorf("invalid State: %v", err)
	}
	if len(s.Services) != c.services {
		c.t.Errorf("partial picture: %d services, the cluster always has %d", len(s.Services), c.services)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last, c.syncs = s, c.syncs+1
	return nil
}

func (c *checker) get() (*localnode.State, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last, c.syncs
}

func waitEqual(t *testing.T, what string, c *checker, src source.Source) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		w := want(t, src)
		got, _ := c.get()
		if got.Equal(w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: backend did not converge to a fresh full sync's state", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRestartUnderChurn kills and restarts the server, then the clients, while endpoints
// churn: both client kinds (node-local States, and the global view through proxyrun)
// never hand their backend a partial picture and converge to what a fresh in-process
// sync computes.
func TestRestartUnderChurn(t *testing.T) {
	const services = 30
	src := source.NewStatic()
	fill(src, services)
	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	_, stop1 := serve(t, src, addr)

	opts := client.Options{Address: addr, MinBackoff: 10 * time.Millisecond, MaxBackoff: 50 * time.Millisecond}
	startClients := func() (*checker, *checker, func()) {
		local := &checker{t: t, services: services}
		viaSource := &checker{t: t, services: services}
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := client.RunBackend(ctx, opts, local, 10*time.Millisecond); err != nil {
				t.Errorf("RunBackend: %v", err)
			}
		})
		wg.Go(func() {
			if err := proxyrun.Run(ctx, client.NewSource(opts), viaSource, proxyrun.Options{NodeName: node, MinSyncInterval: time.Millisecond}); err != nil {
				t.Errorf("proxyrun over the client source: %v", err)
			}
		})
		return local, viaSource, func() { cancel(); wg.Wait() }
	}
	local, viaSource, stopClients := startClients()
	defer func() { stopClients() }()

	var gen atomic.Int64
	churnCtx, stopChurn := context.WithCancel(context.Background())
	var churn sync.WaitGroup
	churn.Go(func() {
		for churnCtx.Err() == nil {
			g := int(gen.Add(1))
			src.SetEndpointSlice(epSlice(g%services, g))
			time.Sleep(200 * time.Microsecond)
		}
	})
	settle := func(what string) {
		stopChurn()
		churn.Wait()
		waitEqual(t, what+" (node-local)", local, src)
		waitEqual(t, what+" (global view via proxyrun)", viaSource, src)
		churnCtx, stopChurn = context.WithCancel(context.Background())
		churn.Go(func() {
			for churnCtx.Err() == nil {
				g := int(gen.Add(1))
				src.SetEndpointSlice(epSlice(g%services, g))
				time.Sleep(200 * time.Microsecond)
			}
		})
	}
	// Each phase waits for the backend to see changes arrive under churn, not for a
	// fixed time: on a loaded machine 100 ms held as few as two syncs (the initial state
	// and one batch), which failed a check that counted them afterwards.
	waitSyncs(t, "first connection", local, 3)
	settle("first connection")

	// The server dies and a new instance takes its socket.
	stop1()
	time.Sleep(50 * time.Millisecond)
	_, stop2 := serve(t, src, addr)
	_, before := local.get()
	waitSyncs(t, "after a server restart", local, before+2)
	settle("after a server restart")

	// The clients restart.
	stopClients()
	local, viaSource, stopClients = startClients()
	waitSyncs(t, "after a client restart", local, 3)
	settle("after a client restart")
	stopChurn()
	churn.Wait()
	stop2()
}

// waitSyncs waits until c has been synced at least n times, failing after a deadline
// generous enough for a loaded 2-core machine under -race.
func waitSyncs(t *testing.T, what string, c *checker, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, got := c.get()
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: backend synced %d times under churn in 30s, want at least %d", what, got, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestApplyRejectsBadOps: a batch with an undecodable op fails as a whole, naming the op
// and the field, and leaves the held state as it was.
func TestApplyRejectsBadOps(t *testing.T) {
	good := &localnodev1.Service{Family: localnodev1.Family_IPV4, Name: &localnodev1.PortName{Namespace: "ns", Name: "a", Protocol: localnodev1.Protocol_TCP}, ClusterIp: "10.0.0.1", Port: 80}
	nl, _, err := client.NewNodeLocal().Apply(&client.Batch{Reset: true, Ops: []*localnodev1.Op{{Op: &localnodev1.Op_SetService{SetService: good}}}})
	if err != nil {
		t.Fatal(err)
	}
	bad := &localnodev1.Service{Family: localnodev1.Family_IPV4, Name: &localnodev1.PortName{Namespace: "ns", Name: "b", Protocol: localnodev1.Protocol_TCP}, ClusterIp: "fd00::1", Port: 80}
	tests := []struct {
		name string
		ops  []*localnodev1.Op
		want string
	}{
		{"bad address", []*localnodev1.Op{{Op: &localnodev1.Op_DeleteService{DeleteService: &localnodev1.ServiceKey{Family: localnodev1.Family_IPV4, Name: good.Name}}}, {Op: &localnodev1.Op_SetService{SetService: bad}}}, `ops[1]: service ns/b/TCP: cluster_ip: "fd00::1" is not an IPv4 address`},
		{"empty op", []*localnodev1.Op{{}}, "ops[0]: empty op"},
		{"bad key", []*localnodev1.Op{{Op: &localnodev1.Op_DeleteService{DeleteService: &localnodev1.ServiceKey{}}}}, "ops[0]: delete_service: family"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, _, err := nl.Apply(&client.Batch{Ops: tc.ops}); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want %q", err, tc.want)
			}
			if got := nl.State(localnode.IPv4); len(got.Services) != 1 || got.Services[0].Name.Name != "a" {
				t.Errorf("held state changed: %+v", got.Services)
			}
		})
	}
}

// flaky fails its first n Syncs.
type flaky struct {
	mu    sync.Mutex
	fails int
	calls int
	last  *localnode.State
}

func (f *flaky) Sync(_ context.Context, s *localnode.State) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	if f.fails > 0 {
		f.fails--
		return fmt.Errorf("injected failure")
	}
	f.last = s
	return nil
}

// TestRunBackendRetries: a failed Sync is retried with the same State without waiting
// for a change on the server.
func TestRunBackendRetries(t *testing.T) {
	src := source.NewStatic()
	fill(src, 3)
	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	serve(t, src, addr)
	b := &flaky{fails: 2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- client.RunBackend(ctx, client.Options{Address: addr}, b, 10*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		b.mu.Lock()
		last, calls := b.last, b.calls
		b.mu.Unlock()
		if last != nil {
			if calls != 3 || len(last.Services) != 3 {
				t.Errorf("synced after %d calls with %d services, want 3 and 3", calls, len(last.Services))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no successful sync after %d calls", calls)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
