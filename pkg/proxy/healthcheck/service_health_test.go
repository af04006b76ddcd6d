package healthcheck

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lithammer/dedent"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	netutils "k8s.io/utils/net"

	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
	proxyutiltest "k8s.io/kube-proxy/pkg/proxy/util/testing"
)

// fakeNetListener is a net.Listener that never accepts.
type fakeNetListener struct {
	addr   string
	closed chan struct{}
	once   sync.Once
}

func (l *fakeNetListener) Accept() (net.Conn, error) {
	<-l.closed
	return nil, net.ErrClosed
}
func (l *fakeNetListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *fakeNetListener) Addr() net.Addr { return fakeAddr(l.addr) }

type fakeAddr string

func (a fakeAddr) Network() string { return "tcp" }
func (a fakeAddr) String() string  { return string(a) }

// fakeSockets records listens and can refuse some addresses.
type fakeSockets struct {
	mu      sync.Mutex
	fail    map[string]bool // "network/addr" that fail with EADDRINUSE
	listens []string        // "network/addr" successfully opened
	servers []*fakeHTTPServer
}

func (f *fakeSockets) Listen(_ context.Context, network string, addrs ...string) (net.Listener, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := network + "/" + strings.Join(addrs, ",")
	if f.fail[key] {
		return nil, &net.OpError{Op: "listen", Net: network, Err: syscall.EADDRINUSE}
	}
	f.listens = append(f.listens, key)
	return &fakeNetListener{addr: addrs[0], closed: make(chan struct{})}, nil
}

func (f *fakeSockets) New(h http.Handler) httpServer {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &fakeHTTPServer{handler: h, done: make(chan struct{})}
	f.servers = append(f.servers, s)
	return s
}

func (f *fakeSockets) openServers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, s := range f.servers {
		if !s.isClosed() {
			n++
		}
	}
	return n
}

type fakeHTTPServer struct {
	handler http.Handler
	mu      sync.Mutex
	closed  bool
	done    chan struct{}
}

func (s *fakeHTTPServer) Serve(l net.Listener) error {
	<-s.done
	l.Close()
	return http.ErrServerClosed
}

func (s *fakeHTTPServer) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.done)
	}
	return nil
}

func (s *fakeHTTPServer) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

type recordedEvent struct {
	Regarding string
	Type      string
	Reason    string
	Action    string
	Note      string
}

type fakeRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

func (r *fakeRecorder) Eventf(regarding, _ runtime.Object, eventtype, reason, action, note string, args ...interface{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref := regarding.(*v1.ObjectReference)
	r.events = append(r.events, recordedEvent{
		Regarding: fmt.Sprintf("%s/%s %s/%s", ref.APIVersion, ref.Kind, ref.Namespace, ref.Name),
		Type:      eventtype, Reason: reason, Action: action, Note: fmt.Sprintf(note, args...),
	})
}

type staticHealth struct{ healthy bool }

func (s staticHealth) Health() ProxyHealth { return ProxyHealth{Healthy: s.healthy} }

func nsn(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

func hostNetwork() *proxyutiltest.FakeNetwork {
	nw := proxyutiltest.NewFakeNetwork()
	add := func(name string, cidrs ...string) {
		var addrs []net.Addr
		for _, c := range cidrs {
			ip, n, _ := netutils.ParseCIDRSloppy(c)
			addrs = append(addrs, &net.IPNet{IP: ip, Mask: n.Mask})
		}
		nw.AddInterfaceAddr(&net.Interface{Name: name}, addrs)
	}
	add("eth0", "198.18.0.10/24", "fd00::10/64")
	add("eth1", "198.19.0.10/24")
	return nw
}

func TestSyncServices(t *testing.T) {
	type sync struct {
		services  map[types.NamespacedName]uint16
		wantOpen  map[types.NamespacedName]uint16
		wantNew   []string // listens performed by this sync, sorted
		wantLive  int      // open HTTP servers after the sync
		wantEvent []recordedEvent
	}
	tests := []struct {
		name   string
		family v1.IPFamily
		cidrs  []string
		fail   []string
		syncs  []sync
	}{
		{
			name: "ipv4 wildcard", family: v1.IPv4Protocol,
			syncs: []sync{{
				services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
				wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
				wantNew:  []string{"tcp4/0.0.0.0:30001", "tcp4/0.0.0.0:30002"},
				wantLive: 2,
			}},
		},
		{
			name: "ipv6 wildcard", family: v1.IPv6Protocol,
			syncs: []sync{{
				services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantNew:  []string{"tcp6/[::]:30001"},
				wantLive: 1,
			}},
		},
		{
			name: "unknown family listens on tcp", family: "",
			syncs: []sync{{
				services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantNew:  []string{"tcp/0.0.0.0:30001"},
				wantLive: 1,
			}},
		},
		{
			name: "node port addresses select node IPs", family: v1.IPv4Protocol, cidrs: []string{"198.18.0.0/15"},
			syncs: []sync{{
				services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantNew:  []string{"tcp4/198.18.0.10:30001", "tcp4/198.19.0.10:30001"},
				wantLive: 2,
			}},
		},
		{
			name: "add, keep, change port, remove", family: v1.IPv4Protocol,
			syncs: []sync{
				{
					services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
					wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
					wantNew:  []string{"tcp4/0.0.0.0:30001", "tcp4/0.0.0.0:30002"},
					wantLive: 2,
				},
				{
					services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30003},
					wantOpen: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30003},
					wantNew:  []string{"tcp4/0.0.0.0:30003"},
					wantLive: 2,
				},
				{
					services: map[types.NamespacedName]uint16{nsn("b", "y"): 30003},
					wantOpen: map[types.NamespacedName]uint16{nsn("b", "y"): 30003},
					wantLive: 1,
				},
				{
					services: nil,
					wantOpen: map[types.NamespacedName]uint16{},
					wantLive: 0,
				},
			},
		},
		{
			name: "listen failure emits event and is retried", family: v1.IPv4Protocol,
			fail: []string{"tcp4/0.0.0.0:30001"},
			syncs: []sync{
				{
					services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
					wantOpen: map[types.NamespacedName]uint16{nsn("b", "y"): 30002},
					wantNew:  []string{"tcp4/0.0.0.0:30002"},
					wantLive: 1,
					wantEvent: []recordedEvent{{
						Regarding: "v1/Service a/x", Type: "Warning", Reason: "FailedToStartServiceHealthcheck", Action: "Listen",
						Note: `node node-a failed to start healthcheck "a/x" on port 30001: listen tcp4: address already in use`,
					}},
				},
				{
					services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001, nsn("b", "y"): 30002},
					wantOpen: map[types.NamespacedName]uint16{nsn("b", "y"): 30002},
					wantLive: 1,
					wantEvent: []recordedEvent{{
						Regarding: "v1/Service a/x", Type: "Warning", Reason: "FailedToStartServiceHealthcheck", Action: "Listen",
						Note: `node node-a failed to start healthcheck "a/x" on port 30001: listen tcp4: address already in use`,
					}},
				},
			},
		},
		{
			name: "partial failure closes what was opened", family: v1.IPv4Protocol, cidrs: []string{"198.18.0.0/15"},
			fail: []string{"tcp4/198.19.0.10:30001"},
			syncs: []sync{{
				services: map[types.NamespacedName]uint16{nsn("a", "x"): 30001},
				wantOpen: map[types.NamespacedName]uint16{},
				wantNew:  []string{"tcp4/198.18.0.10:30001"},
				wantLive: 0,
				wantEvent: []recordedEvent{{
					Regarding: "v1/Service a/x", Type: "Warning", Reason: "FailedToStartServiceHealthcheck", Action: "Listen",
					Note: `node node-a failed to start healthcheck "a/x" on port 30001: listen tcp4: address already in use`,
				}},
			}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeSockets{fail: map[string]bool{}}
			for _, f := range tc.fail {
				fs.fail[f] = true
			}
			rec := &fakeRecorder{}
			npa := proxyutil.NewNodePortAddresses(tc.family, tc.cidrs)
			if tc.family == "" {
				npa = proxyutil.NewNodePortAddresses(v1.IPv4Protocol, nil)
			}
			hcs := newServiceHealthServer("node-a", rec, fs, fs, hostNetwork(), npa, staticHealth{true}, tc.family).(*serviceHealthServer)
			t.Cleanup(func() { _ = hcs.SyncServices(nil) })
			for i, s := range tc.syncs {
				before := len(fs.listens)
				rec.events = nil
				if err := hcs.SyncServices(s.services); err != nil {
					t.Fatalf("sync %d: %v", i, err)
				}
				open := map[types.NamespacedName]uint16{}
				for n, inst := range hcs.services {
					open[n] = inst.port
				}
				if diff := cmp.Diff(s.wantOpen, open); diff != "" {
					t.Errorf("sync %d open services (-want +got):\n%s", i, diff)
				}
				newListens := slices.Clone(fs.listens[before:])
				slices.Sort(newListens)
				if diff := cmp.Diff(s.wantNew, newListens, cmp.Comparer(func(a, b []string) bool {
					return len(a) == len(b) && (len(a) == 0 || slices.Equal(a, b))
				})); diff != "" {
					t.Errorf("sync %d listens (-want +got):\n%s", i, diff)
				}
				if got := fs.openServers(); got != s.wantLive {
					t.Errorf("sync %d: %d open servers, want %d", i, got, s.wantLive)
				}
				if diff := cmp.Diff(s.wantEvent, rec.events); diff != "" {
					t.Errorf("sync %d events (-want +got):\n%s", i, diff)
				}
			}
		})
	}
}

// upstreamBody reproduces upstream's dedent-based body, to prove ours is
// byte-identical.
func upstreamBody(ns, name string, count int, healthy bool) string {
	return strings.Trim(dedent.Dedent(fmt.Sprintf(`
		{
			"service": {
				"namespace": %q,
				"name": %q
			},
			"localEndpoints": %d,
			"serviceProxyHealthy": %v
		}
		`, ns, name, count, healthy)), "\n")
}

func TestServiceHandler(t *testing.T) {
	svc := nsn("default", "web")
	tests := []struct {
		name         string
		registered   bool
		endpoints    map[types.NamespacedName]int
		proxyHealthy bool
		wantCode     int
		wantWeight   string
		wantCount    int
	}{
		{"endpoints and healthy proxy", true, map[types.NamespacedName]int{svc: 3}, true, http.StatusOK, "3", 3},
		{"no endpoints", true, map[types.NamespacedName]int{svc: 0}, true, http.StatusServiceUnavailable, "0", 0},
		{"service missing from endpoints", true, map[types.NamespacedName]int{nsn("other", "svc"): 2}, true, http.StatusServiceUnavailable, "0", 0},
		{"endpoints but proxy unhealthy", true, map[types.NamespacedName]int{svc: 2}, false, http.StatusServiceUnavailable, "2", 2},
		{"service closed", false, nil, true, http.StatusServiceUnavailable, "", -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fs := &fakeSockets{}
			hcs := newServiceHealthServer("node-a", nil, fs, fs, hostNetwork(), proxyutil.NewNodePortAddresses(v1.IPv4Protocol, nil),
				staticHealth{tc.proxyHealthy}, v1.IPv4Protocol).(*serviceHealthServer)
			t.Cleanup(func() { _ = hcs.SyncServices(nil) })
			if tc.registered {
				_ = hcs.SyncServices(map[types.NamespacedName]uint16{svc: 30000})
			}
			_ = hcs.SyncEndpoints(tc.endpoints)

			rec := httptest.NewRecorder()
			hcHandler{nsn: svc, server: hcs}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/anything", nil))
			if rec.Code != tc.wantCode {
				t.Errorf("code %d, want %d", rec.Code, tc.wantCode)
			}
			if tc.wantCount < 0 {
				return
			}
			for h, want := range map[string]string{
				"Content-Type":                     "application/json",
				"X-Content-Type-Options":           "nosniff",
				"X-Load-Balancing-Endpoint-Weight": tc.wantWeight,
			} {
				if got := rec.Header().Get(h); got != want {
					t.Errorf("header %s = %q, want %q", h, got, want)
				}
			}
			want := upstreamBody(svc.Namespace, svc.Name, tc.wantCount, tc.proxyHealthy)
			if got := rec.Body.String(); got != want {
				t.Errorf("body\n got %q\nwant %q", got, want)
			}
		})
	}
}

// A proxier built without a proxy health server (allowed by every
// constructor) passes a nil *ProxyHealthServer; a probe must still answer
// from the endpoint count instead of panicking.
func TestServiceHandlerWithoutProxyHealthServer(t *testing.T) {
	svc := nsn("default", "web")
	for name, hc := range map[string]proxyHealthChecker{
		"nil interface":          nil,
		"nil *ProxyHealthServer": (*ProxyHealthServer)(nil),
	} {
		t.Run(name, func(t *testing.T) {
			fs := &fakeSockets{}
			hcs := newServiceHealthServer("node-a", nil, fs, fs, hostNetwork(), proxyutil.NewNodePortAddresses(v1.IPv4Protocol, nil),
				hc, v1.IPv4Protocol).(*serviceHealthServer)
			t.Cleanup(func() { _ = hcs.SyncServices(nil) })
			_ = hcs.SyncServices(map[types.NamespacedName]uint16{svc: 30000})
			_ = hcs.SyncEndpoints(map[types.NamespacedName]int{svc: 2})
			rec := httptest.NewRecorder()
			hcHandler{nsn: svc, server: hcs}.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
			if rec.Code != http.StatusOK {
				t.Errorf("code %d, want %d", rec.Code, http.StatusOK)
			}
			if want := upstreamBody(svc.Namespace, svc.Name, 2, true); rec.Body.String() != want {
				t.Errorf("body\n got %q\nwant %q", rec.Body.String(), want)
			}
		})
	}
}

func TestSyncEndpointsResetsMissing(t *testing.T) {
	fs := &fakeSockets{}
	hcs := newServiceHealthServer("n", nil, fs, fs, hostNetwork(), proxyutil.NewNodePortAddresses(v1.IPv4Protocol, nil),
		staticHealth{true}, v1.IPv4Protocol).(*serviceHealthServer)
	t.Cleanup(func() { _ = hcs.SyncServices(nil) })
	a, b := nsn("ns", "a"), nsn("ns", "b")
	_ = hcs.SyncServices(map[types.NamespacedName]uint16{a: 30001, b: 30002})
	_ = hcs.SyncEndpoints(map[types.NamespacedName]int{a: 1, b: 2, nsn("ns", "unserved"): 5})
	_ = hcs.SyncEndpoints(map[types.NamespacedName]int{b: 4})
	got := map[types.NamespacedName]int{}
	for n, inst := range hcs.services {
		got[n] = inst.endpoints
	}
	if diff := cmp.Diff(map[types.NamespacedName]int{a: 0, b: 4}, got); diff != "" {
		t.Errorf("endpoints (-want +got):\n%s", diff)
	}
}

func TestFakeServiceHealthServer(t *testing.T) {
	f := NewFakeServiceHealthServer()
	if err := f.SyncServices(map[types.NamespacedName]uint16{nsn("a", "b"): 1}); err != nil {
		t.Error(err)
	}
	if err := f.SyncEndpoints(map[types.NamespacedName]int{nsn("a", "b"): 1}); err != nil {
		t.Error(err)
	}
}

func freePort(t *testing.T) uint16 {
	t.Helper()
	_, p, _ := net.SplitHostPort(freeLoopbackAddr(t))
	var port uint16
	fmt.Sscan(p, &port)
	return port
}

func TestServiceHealthRealLoopback(t *testing.T) {
	port := freePort(t)
	svc := nsn("default", "web")
	hcs := NewServiceHealthServer("node-a", nil, proxyutil.NewNodePortAddresses(v1.IPv4Protocol, []string{"127.0.0.0/8"}),
		staticHealth{true}, v1.IPv4Protocol)
	t.Cleanup(func() { _ = hcs.SyncServices(nil) })
	if err := hcs.SyncServices(map[types.NamespacedName]uint16{svc: port}); err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/", port)
	get := func() (int, string, string) {
		resp := waitForGet(t, url)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("X-Load-Balancing-Endpoint-Weight"), string(b)
	}
	if code, w, _ := get(); code != http.StatusServiceUnavailable || w != "0" {
		t.Errorf("no endpoints: %d weight %q", code, w)
	}
	_ = hcs.SyncEndpoints(map[types.NamespacedName]int{svc: 2})
	code, w, body := get()
	if code != http.StatusOK || w != "2" || body != upstreamBody("default", "web", 2, true) {
		t.Errorf("two endpoints: %d weight %q body %q", code, w, body)
	}

	_ = hcs.SyncServices(nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err != nil {
			break
		}
		resp.Body.Close()
		if time.Now().After(deadline) {
			t.Fatal("port still served after the service was removed")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
