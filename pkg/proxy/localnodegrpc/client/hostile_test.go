package client_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"
	"k8s.io/klog/v2/ktesting"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
)

// fakeServer is a LocalNode server whose Watch is whatever the test makes it: the
// hostile servers of issue 36.
type fakeServer struct {
	localnodev1.UnimplementedLocalNodeServer
	watch func(*localnodev1.WatchRequest, localnodev1.LocalNode_WatchServer) error
	calls atomic.Int64
}

func (f *fakeServer) Watch(req *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
	f.calls.Add(1)
	return f.watch(req, stream)
}

// startFake serves watch on a fresh unix socket (or addr when not empty) until the test
// ends, and returns the socket's address.
func startFake(t *testing.T, addr string, watch func(*localnodev1.WatchRequest, localnodev1.LocalNode_WatchServer) error) (string, *fakeServer) {
	t.Helper()
	if addr == "" {
		addr = "unix://" + filepath.Join(t.TempDir(), "fake.sock")
	}
	lis, err := net.Listen("unix", strings.TrimPrefix(addr, "unix://"))
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{watch: watch}
	s := grpc.NewServer()
	localnodev1.RegisterLocalNodeServer(s, f)
	go func() { _ = s.Serve(lis) }()
	t.Cleanup(s.Stop)
	return addr, f
}

// endless sends events events of ops without ever completing the batch, then ends the
// stream. A client without bounds would keep growing for as long as the server sends:
// the cap keeps a regression from exhausting the test machine's memory, and ending the
// stream turns it into a wrong error ("server closed the stream") at once. The tests set
// no deadline of their own: a bounded client fails the stream after a fixed amount of
// work, however slow the machine, so a clock could only add false failures (this one
// hit a 30s deadline under -race with the load average at 23 on 2 cores).
func endless(ops []*localnodev1.Op, events int) func(*localnodev1.WatchRequest, localnodev1.LocalNode_WatchServer) error {
	return func(_ *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
		ev := &localnodev1.WatchEvent{InstanceId: "hostile", Reset_: true, Ops: ops}
		for range events {
			if err := stream.Send(ev); err != nil {
				return err
			}
			ev = &localnodev1.WatchEvent{InstanceId: "hostile", Ops: ops}
		}
		return nil
	}
}

func setNodeLocal(ns, name, ip string) *localnodev1.Op {
	return &localnodev1.Op{Op: &localnodev1.Op_SetService{SetService: &localnodev1.Service{
		Family: localnodev1.Family_IPV4, Name: &localnodev1.PortName{Namespace: ns, Name: name, Protocol: localnodev1.Protocol_TCP},
		ClusterIp: ip, Port: 80,
	}}}
}

// TestWatchOnceBoundsUnsyncedBatch: a server that keeps sending changes without ever
// marking the state complete fails the stream with a LimitError naming the limit,
// instead of growing the client until the test's deadline (issue 36: 1 GB to 3.2 GB RSS
// in 20 s).
func TestWatchOnceBoundsUnsyncedBatch(t *testing.T) {
	small := []*localnodev1.Op{setNodeLocal("ns", "a", "10.0.0.1")}
	big := []*localnodev1.Op{{Op: &localnodev1.Op_SetGlobalService{SetGlobalService: &localnodev1.GlobalService{
		Namespace: "ns", Name: "big", Labels: map[string]string{"pad": strings.Repeat("x", 100<<10)},
	}}}}
	tests := []struct {
		name      string
		ops       []*localnodev1.Op
		events    int
		limits    client.Limits
		wantLimit string
		wantMsg   string
	}{
		{"objects", small, 5000, client.Limits{MaxPendingObjects: 1000}, "MaxPendingObjects", `objects of a batch of instance "hostile" the server has not completed: 1001 is more than the limit MaxPendingObjects=1000`},
		{"bytes", big, 50, client.Limits{MaxPendingBytes: 1 << 20}, "MaxPendingBytes", "is more than the limit MaxPendingBytes=1048576"},
		{"one message", big, 50, client.Limits{MaxRecvMsgBytes: 50 << 10}, "", "ResourceExhausted"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			addr, _ := startFake(t, "", endless(tc.ops, tc.events))
			conn, err := client.Dial(addr, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			applied := 0
			_, _, err = client.WatchOnceWithLimits(t.Context(), conn, &localnodev1.WatchRequest{Global: true}, tc.limits, func(*client.Batch) error { applied++; return nil })
			if err == nil || !strings.Contains(err.Error(), tc.wantMsg) {
				t.Fatalf("err = %v, want one containing %q", err, tc.wantMsg)
			}
			var le *client.LimitError
			if got := errors.As(err, &le); got != (tc.wantLimit != "") || (got && le.Limit != tc.wantLimit) {
				t.Errorf("err = %#v, want a LimitError of %q", err, tc.wantLimit)
			}
			if applied != 0 {
				t.Errorf("%d incomplete batches applied", applied)
			}
		})
	}
}

// TestWatchOnceDefaultBound: without options, as `kube-proxy state --socket` used it,
// WatchOnce is bounded too (here by the default object count, in events of 10,000 empty
// ops: 2 bytes each on the wire).
func TestWatchOnceDefaultBound(t *testing.T) {
	ops := make([]*localnodev1.Op, 10000)
	for i := range ops {
		ops[i] = &localnodev1.Op{}
	}
	addr, _ := startFake(t, "", endless(ops, client.DefaultMaxPendingObjects/len(ops)+10))
	conn, err := client.Dial(addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _, err = client.WatchOnce(t.Context(), conn, &localnodev1.WatchRequest{Global: true}, func(*client.Batch) error { return nil })
	var le *client.LimitError
	if !errors.As(err, &le) || le.Limit != "MaxPendingObjects" || le.Max != client.DefaultMaxPendingObjects {
		t.Fatalf("err = %v, want the default MaxPendingObjects exceeded", err)
	}
}

// globalRecorder is a source.Handler (and NodeHandler) that keeps what it was given.
type globalRecorder struct {
	mu       sync.Mutex
	services map[string]*v1.Service
	slices   map[string]*discovery.EndpointSlice
	node     *v1.Node
	synced   bool
	maxSeen  int
}

func newGlobalRecorder() *globalRecorder {
	return &globalRecorder{services: map[string]*v1.Service{}, slices: map[string]*discovery.EndpointSlice{}}
}

func (r *globalRecorder) lock() func() {
	r.mu.Lock()
	return r.mu.Unlock
}
func (r *globalRecorder) OnServiceAdd(s *v1.Service) {
	defer r.lock()()
	r.services[s.Namespace+"/"+s.Name] = s
	r.maxSeen = max(r.maxSeen, len(r.services))
}
func (r *globalRecorder) OnServiceUpdate(_, s *v1.Service) { r.OnServiceAdd(s) }
func (r *globalRecorder) OnServiceDelete(s *v1.Service) {
	defer r.lock()()
	delete(r.services, s.Namespace+"/"+s.Name)
}
func (r *globalRecorder) OnServiceSynced() {}
func (r *globalRecorder) OnEndpointSliceAdd(s *discovery.EndpointSlice) {
	defer r.lock()()
	r.slices[s.Namespace+"/"+s.Name] = s
}
func (r *globalRecorder) OnEndpointSliceUpdate(_, s *discovery.EndpointSlice) {
	r.OnEndpointSliceAdd(s)
}
func (r *globalRecorder) OnEndpointSliceDelete(s *discovery.EndpointSlice) {
	defer r.lock()()
	delete(r.slices, s.Namespace+"/"+s.Name)
}
func (r *globalRecorder) OnEndpointSlicesSynced()            {}
func (r *globalRecorder) OnTopologyChange(map[string]string) {}
func (r *globalRecorder) OnNodeChange(n *v1.Node) {
	defer r.lock()()
	r.node = n
}
func (r *globalRecorder) OnNodeDelete(*v1.Node) {
	defer r.lock()()
	r.node = nil
}
func (r *globalRecorder) OnNodeSynced() {
	defer r.lock()()
	r.synced = true
}

func setGlobal(ns, name string) *localnodev1.Op {
	return &localnodev1.Op{Op: &localnodev1.Op_SetGlobalService{SetGlobalService: &localnodev1.GlobalService{
		Namespace: ns, Name: name, ClusterIps: []string{"10.96.0.1"},
		Ports: []*localnodev1.GlobalServicePort{{Protocol: localnodev1.Protocol_TCP, Port: 80}},
	}}}
}

// TestSourceBoundsHeldState: a server whose every batch is complete but adds objects
// forever is cut off once the held view exceeds MaxPendingObjects; the client reconnects
// for a full state, and the handler never holds more than the limit.
func TestSourceBoundsHeldState(t *testing.T) {
	const limit = 100
	var next atomic.Int64
	addr, fake := startFake(t, "", func(_ *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
		reset := true
		// 200 batches: a client without the bound would hold 6,000 services, then wait.
		for rev := uint64(1); rev <= 200; rev++ {
			ev := &localnodev1.WatchEvent{InstanceId: "growing", Reset_: reset, Revision: rev, Synced: true}
			for range 30 {
				ev.Ops = append(ev.Ops, setGlobal("ns", fmt.Sprintf("svc-%d", next.Add(1))))
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
			reset = false
			time.Sleep(time.Millisecond)
		}
		<-stream.Context().Done()
		return nil
	})
	h := newGlobalRecorder()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- client.NewSource(client.Options{Address: addr, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Limits: client.Limits{MaxPendingObjects: limit}}).Run(ctx, h)
	}()
	defer func() {
		cancel()
		<-done
	}()
	deadline := time.Now().Add(20 * time.Second)
	for fake.calls.Load() < 3 {
		if time.Now().After(deadline) {
			defer h.lock()()
			t.Fatalf("the client never gave up on a server that grows its state forever: %d Watch calls, %d services held", fake.calls.Load(), len(h.services))
		}
		time.Sleep(5 * time.Millisecond)
	}
	defer h.lock()()
	// After the reconnect the new full state's objects are added before the old ones
	// are deleted, as an informer does after a relist: one batch more than the limit.
	if h.maxSeen > limit+30 {
		t.Errorf("the handler held %d services, more than the limit %d and one batch", h.maxSeen, limit)
	}
}

// TestReconnectLogging: while the server is down, the first failure is logged at error
// level and then only every tenth (the others at V(2)); once a server is there, the
// success is logged once, with the address (issue 36: every failure was logged at info
// level and the success never).
func TestReconnectLogging(t *testing.T) {
	logger := ktesting.NewLogger(ktesting.NopTL{}, ktesting.NewConfig(ktesting.Verbosity(2), ktesting.BufferLogs(true)))
	entries := func(msg string) (errs, infos []ktesting.LogEntry) {
		for _, e := range logger.GetSink().(ktesting.Underlier).GetBuffer().Data() {
			if !strings.HasPrefix(e.Message, msg) {
				continue
			}
			if e.Type == ktesting.LogError {
				errs = append(errs, e)
			} else {
				infos = append(infos, e)
			}
		}
		return errs, infos
	}
	addr := "unix://" + filepath.Join(t.TempDir(), "down.sock")
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), logger))
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = client.NewSource(client.Options{Address: addr, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond}).Run(ctx, newGlobalRecorder())
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for {
		errs, infos := entries("Node-local state stream")
		if n := len(errs) + len(infos); n >= 25 {
			// Failures 1, 11, 21 (and 31 if the loop got there meanwhile).
			if len(errs) < 3 || len(errs) > (n+9)/10+1 {
				t.Errorf("%d of %d failures logged at error level, want the first and every tenth", len(errs), n)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("only %d failures logged at error level and %d at info in 20s", len(errs), len(infos))
		}
		time.Sleep(5 * time.Millisecond)
	}
	if errs, infos := entries("Connected"); len(errs)+len(infos) > 0 {
		t.Errorf("success logged while the server is down")
	}
	startFake(t, addr, serveOnce([]*localnodev1.Op{globalSvc("good")}))
	for {
		_, infos := entries("Connected to node-local state server")
		if len(infos) > 0 {
			if kv := fmt.Sprint(infos[0].WithKVList, infos[0].ParameterKVList); !strings.Contains(kv, addr) {
				t.Errorf("success logged without the address: %s", kv)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the connection that succeeded after failures was not logged")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond)
	if _, infos := entries("Connected to node-local state server"); len(infos) != 1 {
		t.Errorf("success logged %d times for one connection", len(infos))
	}
}

// TestRunBackendBoundsHeldState is TestSourceBoundsHeldState for the node-local client:
// the backend is never handed more services than the limit.
func TestRunBackendBoundsHeldState(t *testing.T) {
	const limit = 100
	var next atomic.Int64
	addr, fake := startFake(t, "", func(_ *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
		for rev := uint64(1); rev <= 200; rev++ {
			ev := &localnodev1.WatchEvent{InstanceId: "growing", Reset_: rev == 1, Revision: rev, Synced: true}
			for range 30 {
				n := next.Add(1)
				ev.Ops = append(ev.Ops, setNodeLocal("ns", fmt.Sprintf("svc-%d", n), fmt.Sprintf("10.96.%d.%d", n/250%250, n%250+1)))
			}
			if err := stream.Send(ev); err != nil {
				return err
			}
			time.Sleep(time.Millisecond)
		}
		<-stream.Context().Done()
		return nil
	})
	var most atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		_ = client.RunBackend(ctx, client.Options{Address: addr, MinBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
			Limits: client.Limits{MaxPendingObjects: limit}}, recorder(func(s *localnode.State) error {
			if n := int64(len(s.Services)); n > most.Load() {
				most.Store(n)
			}
			return nil
		}), time.Second)
	})
	defer func() {
		cancel()
		wg.Wait()
	}()
	deadline := time.Now().Add(20 * time.Second)
	for fake.calls.Load() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("the client never gave up on a server that grows its state forever: %d Watch calls, backend handed %d services", fake.calls.Load(), most.Load())
		}
		time.Sleep(5 * time.Millisecond)
	}
	if most.Load() > limit {
		t.Errorf("the backend was handed %d services, more than the limit %d", most.Load(), limit)
	}
}
