package healthcheck

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	basemetrics "k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
	testingclock "k8s.io/utils/clock/testing"

	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

type fakeNodeManager struct{ node *v1.Node }

func (f *fakeNodeManager) Node() *v1.Node { return f.node }

var (
	t0      = time.Date(2026, 11, 26, 0, 0, 0, 0, time.UTC)
	timeout = 60 * time.Second
	ipv4    = v1.IPv4Protocol
	ipv6    = v1.IPv6Protocol
)

func readyNode() *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}
}

type op struct {
	queued, updated v1.IPFamily
	advance         time.Duration
}

func TestProxyHealth(t *testing.T) {
	tests := []struct {
		name        string
		ops         []op
		wantHealthy bool
		wantStatus  map[v1.IPFamily]bool
	}{
		{name: "fresh server", wantHealthy: true, wantStatus: map[v1.IPFamily]bool{}},
		{
			name:        "queued before first sync counts as starting up",
			ops:         []op{{queued: ipv4}, {advance: 10 * timeout}},
			wantHealthy: true, wantStatus: map[v1.IPFamily]bool{},
		},
		{
			name:        "synced and idle stays healthy",
			ops:         []op{{updated: ipv4}, {advance: 10 * timeout}},
			wantHealthy: true, wantStatus: map[v1.IPFamily]bool{ipv4: true},
		},
		{
			name:        "queued change not yet late",
			ops:         []op{{updated: ipv4}, {queued: ipv4}, {advance: timeout - time.Nanosecond}},
			wantHealthy: true, wantStatus: map[v1.IPFamily]bool{ipv4: true},
		},
		{
			name:        "queued change late",
			ops:         []op{{updated: ipv4}, {queued: ipv4}, {advance: timeout}},
			wantHealthy: false, wantStatus: map[v1.IPFamily]bool{ipv4: false},
		},
		{
			name:        "the oldest queued change counts",
			ops:         []op{{updated: ipv4}, {queued: ipv4}, {advance: timeout / 2}, {queued: ipv4}, {advance: timeout / 2}},
			wantHealthy: false, wantStatus: map[v1.IPFamily]bool{ipv4: false},
		},
		{
			name:        "a sync clears the queue",
			ops:         []op{{updated: ipv4}, {queued: ipv4}, {advance: 2 * timeout}, {updated: ipv4}, {advance: 2 * timeout}},
			wantHealthy: true, wantStatus: map[v1.IPFamily]bool{ipv4: true},
		},
		{
			name: "one stale family makes the proxy unhealthy",
			ops: []op{{updated: ipv4}, {updated: ipv6}, {queued: ipv6}, {queued: ipv4}, {advance: timeout / 2},
				{updated: ipv4}, {advance: timeout / 2}},
			wantHealthy: false, wantStatus: map[v1.IPFamily]bool{ipv4: true, ipv6: false},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(t0)
			hs := newProxyHealthServer(nil, nil, fc, "", timeout, &fakeNodeManager{node: readyNode()})
			var lastSync time.Time
			for _, o := range tc.ops {
				if o.queued != "" {
					hs.QueuedUpdate(o.queued)
				}
				if o.updated != "" {
					hs.Updated(o.updated)
					lastSync = fc.Now()
				}
				fc.Step(o.advance)
			}
			h := hs.Health()
			if h.Healthy != tc.wantHealthy {
				t.Errorf("Healthy = %v, want %v", h.Healthy, tc.wantHealthy)
			}
			got := map[v1.IPFamily]bool{}
			for f, s := range h.Status {
				got[f] = s.Healthy
			}
			if diff := cmp.Diff(tc.wantStatus, got); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
			if !h.LastUpdated.Equal(lastSync) {
				t.Errorf("LastUpdated = %v, want %v", h.LastUpdated, lastSync)
			}
			if !h.CurrentTime.Equal(fc.Now()) {
				t.Errorf("CurrentTime = %v, want %v", h.CurrentTime, fc.Now())
			}
			if h.NodeEligible != nil {
				t.Errorf("Health() must not set NodeEligible")
			}
		})
	}
}

func TestNodeEligible(t *testing.T) {
	now := metav1.NewTime(t0)
	tests := []struct {
		name string
		nm   nodeManager
		want bool
	}{
		{"nil node manager", nil, false},
		{"node not seen yet", &fakeNodeManager{}, false},
		{"ready node", &fakeNodeManager{node: readyNode()}, true},
		{"node being deleted", &fakeNodeManager{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}}, false},
		{"autoscaler taint", &fakeNodeManager{node: &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "other", Effect: v1.TaintEffectNoSchedule}, {Key: ToBeDeletedTaint, Effect: v1.TaintEffectNoSchedule}}}}}, false},
		{"unrelated taint", &fakeNodeManager{node: &v1.Node{Spec: v1.NodeSpec{Taints: []v1.Taint{
			{Key: "node.kubernetes.io/unschedulable", Effect: v1.TaintEffectNoSchedule}}}}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			hs := newProxyHealthServer(nil, nil, testingclock.NewFakeClock(t0), "", timeout, tc.nm)
			if got := hs.NodeEligible(); got != tc.want {
				t.Errorf("NodeEligible = %v, want %v", got, tc.want)
			}
		})
	}
}

func counterValue(t *testing.T, vec *basemetrics.CounterVec, code string) float64 {
	t.Helper()
	v, err := testutil.GetCounterMetricValue(vec.WithLabelValues(code))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestHealthHandlers(t *testing.T) {
	deleting := readyNode()
	deleting.DeletionTimestamp = &metav1.Time{Time: t0}
	tests := []struct {
		name      string
		node      *v1.Node
		stale     bool
		wantHealz int
		wantLivez int
	}{
		{"healthy, eligible", readyNode(), false, http.StatusOK, http.StatusOK},
		{"healthy, node deleting", deleting, false, http.StatusServiceUnavailable, http.StatusOK},
		{"healthy, node unknown", nil, false, http.StatusServiceUnavailable, http.StatusOK},
		{"stale, eligible", readyNode(), true, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
		{"stale, node deleting", deleting, true, http.StatusServiceUnavailable, http.StatusServiceUnavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			fc := testingclock.NewFakeClock(t0)
			hs := newProxyHealthServer(nil, nil, fc, "", timeout, &fakeNodeManager{node: tc.node})
			hs.Updated(ipv4)
			syncTime := fc.Now()
			if tc.stale {
				hs.QueuedUpdate(ipv4)
			}
			fc.Step(2 * timeout)

			for _, ep := range []struct {
				path    string
				handler http.HandlerFunc
				want    int
				vec     *basemetrics.CounterVec
			}{
				{"/healthz", hs.serveHealthz, tc.wantHealz, metrics.ProxyHealthzTotal},
				{"/livez", hs.serveLivez, tc.wantLivez, metrics.ProxyLivezTotal},
			} {
				code := fmt.Sprint(ep.want)
				before := counterValue(t, ep.vec, code)
				rec := httptest.NewRecorder()
				ep.handler(rec, httptest.NewRequest(http.MethodGet, ep.path, nil))
				if rec.Code != ep.want {
					t.Errorf("%s: code %d, want %d", ep.path, rec.Code, ep.want)
				}
				if after := counterValue(t, ep.vec, code); after != before+1 {
					t.Errorf("%s: counter{code=%s} went %v -> %v", ep.path, code, before, after)
				}
				if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
					t.Errorf("%s: Content-Type %q", ep.path, ct)
				}
				if n := rec.Header().Get("X-Content-Type-Options"); n != "nosniff" {
					t.Errorf("%s: X-Content-Type-Options %q", ep.path, n)
				}
				var raw map[string]json.RawMessage
				if err := json.Unmarshal(rec.Body.Bytes(), &raw); err != nil {
					t.Fatalf("%s: body %q: %v", ep.path, rec.Body.String(), err)
				}
				_, hasEligible := raw["nodeEligible"]
				if hasEligible != (ep.path == "/healthz") {
					t.Errorf("%s: nodeEligible present = %v", ep.path, hasEligible)
				}
				var body ProxyHealth
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
					t.Fatal(err)
				}
				if body.Healthy == tc.stale {
					t.Errorf("%s: healthy = %v", ep.path, body.Healthy)
				}
				// A healthy answer reports "now" as lastUpdated for old clients.
				wantLast := syncTime
				if ep.want == http.StatusOK {
					wantLast = fc.Now()
				}
				if !body.LastUpdated.Equal(wantLast) {
					t.Errorf("%s: lastUpdated %v, want %v", ep.path, body.LastUpdated, wantLast)
				}
				if !body.CurrentTime.Equal(fc.Now()) {
					t.Errorf("%s: currentTime %v", ep.path, body.CurrentTime)
				}
				if s, ok := body.Status[ipv4]; !ok || s.Healthy == tc.stale || !s.LastUpdated.Equal(syncTime) {
					t.Errorf("%s: status %+v", ep.path, body.Status)
				}
			}
		})
	}
}

func TestProxyHealthJSON(t *testing.T) {
	yes := true
	h := ProxyHealth{
		LastUpdated:  t0,
		CurrentTime:  t0.Add(time.Second),
		NodeEligible: &yes,
		Healthy:      true,
		Status:       map[v1.IPFamily]ProxierHealth{ipv4: {LastUpdated: t0, Healthy: true}},
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"lastUpdated":"2026-11-26T00:00:00Z","currentTime":"2026-11-26T00:00:01Z","nodeEligible":true,"healthy":true,"status":{"IPv4":{"lastUpdated":"2026-11-26T00:00:00Z","healthy":true}}}`
	if string(b) != want {
		t.Errorf("JSON\n got %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(ProxyHealth{Healthy: true, Status: map[v1.IPFamily]ProxierHealth{}})
	if want := `{"lastUpdated":"0001-01-01T00:00:00Z","currentTime":"0001-01-01T00:00:00Z","healthy":true}`; string(b) != want {
		t.Errorf("empty JSON\n got %s\nwant %s", b, want)
	}
}

type failingListener struct{ err error }

func (f failingListener) Listen(context.Context, string, ...string) (net.Listener, error) {
	return nil, f.err
}

func TestRunListenError(t *testing.T) {
	boom := errors.New("address in use")
	hs := newProxyHealthServer(failingListener{boom}, stdHTTPServers{}, testingclock.NewFakeClock(t0), "1.2.3.4:10256", timeout, nil)
	if err := hs.Run(context.Background()); !errors.Is(err, boom) {
		t.Errorf("Run = %v, want wrapped %v", err, boom)
	}
}

// freeLoopbackAddr returns a loopback address with a port that was free a
// moment ago.
func freeLoopbackAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Skipf("no IPv4 loopback: %v", err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func waitForGet(t *testing.T, url string) *http.Response {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			return resp
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: %v", url, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRunRealListener(t *testing.T) {
	addr := freeLoopbackAddr(t)
	nm := &fakeNodeManager{node: readyNode()}
	hs := NewProxyHealthServer(addr, timeout, nm)
	hs.Updated(ipv4)

	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- hs.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-errc
	})

	for _, tc := range []struct {
		path string
		want int
	}{
		{"/healthz", http.StatusOK},
		{"/livez", http.StatusOK},
		{"/other", http.StatusNotFound},
	} {
		resp := waitForGet(t, "http://"+addr+tc.path)
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("GET %s: %d, want %d", tc.path, resp.StatusCode, tc.want)
		}
	}

	cancel()
	select {
	case err := <-errc:
		errc <- err // for the cleanup
		if err != nil {
			t.Errorf("Run after cancel = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after the context was cancelled")
	}
}

func BenchmarkHealth(b *testing.B) {
	fc := testingclock.NewFakeClock(t0)
	hs := newProxyHealthServer(nil, nil, fc, "", timeout, &fakeNodeManager{node: readyNode()})
	hs.Updated(ipv4)
	hs.Updated(ipv6)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			hs.QueuedUpdate(ipv4)
			_ = hs.Health()
		}
	})
}
