package syncshell

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/component-base/metrics/testutil"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy"
	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

const node = "node-a"

// recorder is a Backend that records what it was asked to do.
type recorder struct {
	mu      sync.Mutex
	updates []recorded
	fail    error
	out     Outcome
	missing bool
	checks  int
	invalid map[string]bool // service port names ValidServicePort refuses
}

type recorded struct {
	full            bool
	servicesChanged bool
	changed         []string
	removed         []string
	cidrs           []string
	cidrsChanged    bool
	policies        map[string]*proxy.TrafficPolicy
}

func (r *recorder) Sync(_ context.Context, u *Update) (Outcome, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	rec := recorded{full: u.Full, servicesChanged: u.ServicesChanged, cidrs: u.ServiceCIDRs, cidrsChanged: u.ServiceCIDRsChanged,
		policies: map[string]*proxy.TrafficPolicy{}}
	for name := range u.ChangedServices() {
		rec.changed = append(rec.changed, name.String())
	}
	slices.Sort(rec.changed)
	for _, n := range u.RemovedPorts {
		rec.removed = append(rec.removed, n.String())
	}
	for name := range u.Services {
		if tp := u.Policy(name); tp != nil {
			rec.policies[name.String()] = tp
		}
	}
	r.updates = append(r.updates, rec)
	return r.out, r.fail
}

func (r *recorder) RulesMissing(context.Context) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checks++
	return r.missing
}

func (r *recorder) ValidServicePort(name proxy.ServicePortName, _ proxy.ServicePort) bool {
	return !r.invalid[name.String()]
}

func (r *recorder) ValidEndpoint(proxy.ServicePortName, proxy.Endpoint) bool { return true }

func (r *recorder) last(t *testing.T) recorded {
	t.Helper()
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.updates) == 0 {
		t.Fatal("backend never called")
	}
	return r.updates[len(r.updates)-1]
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.updates)
}

// healthCounter implements HealthRecorder and healthcheck.ServiceHealthServer.
type healthCounter struct {
	mu                sync.Mutex
	queued, updated   int
	services          map[types.NamespacedName]uint16
	endpoints         map[types.NamespacedName]int
	endpointSyncCalls int
}

func (h *healthCounter) QueuedUpdate(v1.IPFamily) { h.mu.Lock(); h.queued++; h.mu.Unlock() }
func (h *healthCounter) Updated(v1.IPFamily)      { h.mu.Lock(); h.updated++; h.mu.Unlock() }
func (h *healthCounter) SyncServices(s map[types.NamespacedName]uint16) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.services = s
	return nil
}
func (h *healthCounter) SyncEndpoints(e map[types.NamespacedName]int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.endpoints = e
	h.endpointSyncCalls++
	return nil
}

func service(name, ip string, mut func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: v1.ServiceSpec{
			Type: v1.ServiceTypeClusterIP, ClusterIP: ip, ClusterIPs: []string{ip},
			Ports: []v1.ServicePort{{Name: "p", Port: 80, Protocol: v1.ProtocolTCP}},
		},
	}
	if mut != nil {
		mut(s)
	}
	return s
}

type endpoint struct {
	ip, node string
	ready    bool
}

func slice(svc string, eps ...endpoint) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: svc + "-1", Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("p"), Port: ptr.To[int32](8080), Protocol: ptr.To(v1.ProtocolTCP)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses:  []string{e.ip},
			NodeName:   ptr.To(e.node),
			Conditions: discovery.EndpointConditions{Ready: ptr.To(e.ready), Serving: ptr.To(e.ready), Terminating: ptr.To(false)},
		})
	}
	return s
}

func newShell(t *testing.T, b Backend, mut func(*Options)) *Shell {
	t.Helper()
	opts := Options{Family: v1.IPv4Protocol, NodeName: node, MinInterval: time.Millisecond, RetryInterval: time.Hour, MaxInterval: time.Hour}
	if mut != nil {
		mut(&opts)
	}
	s, err := New(context.Background(), opts, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func initialize(s *Shell) {
	s.OnServiceSynced()
	s.OnEndpointSlicesSynced()
}

func syncNow(t *testing.T, s *Shell) {
	t.Helper()
	if err := s.SyncNow(); err != nil {
		t.Fatal(err)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    Backend
		opts Options
		want string
	}{
		{"nil backend", nil, Options{Family: v1.IPv4Protocol}, "nil backend"},
		{"bad family", &recorder{}, Options{Family: "IPv5"}, `invalid IP family "IPv5"`},
		{"min above max", &recorder{}, Options{Family: v1.IPv4Protocol, MinInterval: time.Hour, MaxInterval: time.Second}, "min (1h0m0s) <= max (1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(context.Background(), tc.opts, tc.b)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

// Nothing is synced before both informers have listed; then the first sync is
// full, and later ones carry only the Services that changed.
func TestFullThenPartial(t *testing.T) {
	b := &recorder{}
	s := newShell(t, b, func(o *Options) { o.SyncWhenInitialized = true })
	s.OnServiceAdd(service("a", "10.0.0.1", nil))
	s.OnServiceAdd(service("b", "10.0.0.2", nil))
	syncNow(t, s)
	s.OnServiceSynced()
	if b.calls() != 0 {
		t.Fatalf("backend called %d times before both informers listed", b.calls())
	}
	s.OnEndpointSlicesSynced() // SyncWhenInitialized: syncs at once
	if got := b.last(t); !got.full || len(got.policies) != 2 {
		t.Fatalf("first sync = %+v, want full with 2 policies", got)
	}

	s.OnEndpointSliceAdd(slice("a", endpoint{"10.1.0.1", node, true}))
	syncNow(t, s)
	got := b.last(t)
	if got.full || got.servicesChanged || !slices.Equal(got.changed, []string{"ns/a"}) {
		t.Fatalf("endpoint change = %+v, want partial for ns/a only", got)
	}

	s.OnServiceDelete(service("b", "10.0.0.2", nil))
	syncNow(t, s)
	got = b.last(t)
	if got.full || !got.servicesChanged || !slices.Equal(got.removed, []string{"ns/b:p"}) {
		t.Fatalf("service delete = %+v, want partial with ns/b:p removed", got)
	}

	// A sync with nothing pending still reaches the backend (it may have
	// periodic work) but with nothing changed.
	syncNow(t, s)
	if got := b.last(t); got.full || len(got.changed) != 0 {
		t.Fatalf("idle sync = %+v", got)
	}
}

// A failed sync consumed the trackers' changes, so the next one is full.
func TestFailureMakesNextSyncFull(t *testing.T) {
	b := &recorder{}
	s := newShell(t, b, nil)
	initialize(s)
	syncNow(t, s)
	s.OnServiceAdd(service("a", "10.0.0.1", nil))
	b.fail = errors.New("kernel said no")
	if err := s.SyncNow(); err == nil || !strings.Contains(err.Error(), "kernel said no") {
		t.Fatalf("SyncNow error = %v", err)
	}
	if !s.NeedsFullSync() {
		t.Fatal("NeedsFullSync false after a failure")
	}
	b.fail = nil
	syncNow(t, s)
	if got := b.last(t); !got.full {
		t.Fatalf("sync after failure = %+v, want full", got)
	}
	syncNow(t, s)
	if got := b.last(t); got.full {
		t.Fatal("failure kept forcing full syncs after a success")
	}
}

func TestPeriodicFullSync(t *testing.T) {
	for _, tc := range []struct {
		name       string
		interval   time.Duration
		noPeriodic bool
		wantFull   bool
	}{
		{"interval passed", time.Hour, false, true},
		{"no interval configured", 0, false, false},
		{"backend opted out (large iptables cluster)", time.Hour, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &recorder{out: Outcome{NoPeriodicFullSync: tc.noPeriodic}}
			s := newShell(t, b, func(o *Options) { o.FullSyncInterval = tc.interval })
			now := time.Now()
			s.now = func() time.Time { return now }
			initialize(s)
			syncNow(t, s)
			now = now.Add(30 * time.Minute)
			syncNow(t, s)
			if b.last(t).full {
				t.Fatal("full sync before the interval passed")
			}
			now = now.Add(31 * time.Minute)
			syncNow(t, s)
			if got := b.last(t).full; got != tc.wantFull {
				t.Fatalf("full = %v after the interval, want %v", got, tc.wantFull)
			}
		})
	}
}

// The backend's rules check runs at most once per CheckInterval, not within
// half an interval of the last write, and a "missing" turns the sync full.
func TestRulesCheck(t *testing.T) {
	b := &recorder{out: Outcome{Programmed: true}}
	s := newShell(t, b, func(o *Options) { o.CheckInterval = time.Minute })
	now := time.Now()
	s.now = func() time.Time { return now }
	initialize(s)
	syncNow(t, s)

	syncNow(t, s)
	if b.checks != 0 {
		t.Fatalf("checked %d times without being due", b.checks)
	}
	s.checkDue.Store(true)
	now = now.Add(10 * time.Second)
	syncNow(t, s)
	if b.checks != 0 {
		t.Fatal("checked within half an interval of a kernel write")
	}
	b.out.Programmed = false
	s.checkDue.Store(true)
	now = now.Add(time.Minute)
	b.missing = true
	syncNow(t, s)
	if b.checks != 1 || !b.last(t).full {
		t.Fatalf("checks=%d full=%v, want 1 check turning the sync full", b.checks, b.last(t).full)
	}

	b.missing = false
	s.RequestRulesCheck()
	syncNow(t, s)
	if b.checks != 2 || b.last(t).full {
		t.Fatalf("RequestRulesCheck: checks=%d full=%v, want a check and a partial sync", b.checks, b.last(t).full)
	}
}

// Topology labels change which endpoints every Service uses: a real change
// makes the next sync full, a repeat of the same labels does not.
func TestTopologyChange(t *testing.T) {
	b := &recorder{}
	s := newShell(t, b, nil)
	initialize(s)
	s.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})
	syncNow(t, s)
	s.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})
	syncNow(t, s)
	if b.last(t).full {
		t.Fatal("same labels forced a full sync")
	}
	s.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z2"})
	syncNow(t, s)
	if !b.last(t).full {
		t.Fatal("new zone did not force a full sync")
	}
}

// The traffic policy handed to the backend and the no-local-endpoints totals
// come from one resolution, kept up to date as Services change.
func TestPoliciesAndNoLocalMetric(t *testing.T) {
	metrics.RegisterMetrics(kubeproxyconfig.ProxyModeIPTables)
	b := &recorder{invalid: map[string]bool{"ns/bad:p": true}}
	s := newShell(t, b, nil)
	local := func(svc *v1.Service) {
		svc.Spec.InternalTrafficPolicy = ptr.To(v1.ServiceInternalTrafficPolicyLocal)
	}
	s.OnServiceAdd(service("remote-only", "10.0.0.1", local))
	s.OnEndpointSliceAdd(slice("remote-only", endpoint{"10.1.0.1", "node-b", true}))
	s.OnServiceAdd(service("none", "10.0.0.2", nil))
	s.OnServiceAdd(service("ok", "10.0.0.3", local))
	s.OnEndpointSliceAdd(slice("ok", endpoint{"10.1.0.3", node, true}))
	s.OnServiceAdd(service("bad", "10.0.0.4", nil))
	initialize(s)
	syncNow(t, s)

	got := b.last(t).policies
	want := map[string]proxy.NoEndpointsAction{"ns/remote-only:p": proxy.Drop, "ns/none:p": proxy.Reject, "ns/ok:p": proxy.Forward}
	if len(got) != len(want) {
		t.Fatalf("policies for %d ports, want %d (invalid port left out): %v", len(got), len(want), got)
	}
	for name, action := range want {
		if got[name] == nil || got[name].Internal != action {
			t.Errorf("%s: policy %+v, want internal %v", name, got[name], action)
		}
	}
	noLocal := func() float64 {
		v, err := testutil.GetGaugeMetricValue(metrics.SyncProxyRulesNoLocalEndpointsTotal.WithLabelValues("internal", "IPv4"))
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := noLocal(); v != 1 {
		t.Fatalf("no-local internal = %v, want 1", v)
	}
	// A local endpoint appears: the count drops without a full sync.
	s.OnEndpointSliceUpdate(nil, slice("remote-only", endpoint{"10.1.0.1", "node-b", true}, endpoint{"10.1.0.9", node, true}))
	syncNow(t, s)
	if v := noLocal(); v != 0 || b.last(t).full {
		t.Fatalf("no-local internal = %v (full=%v), want 0 after a partial sync", v, b.last(t).full)
	}
	// Deleting the Service forgets its contribution.
	s.OnEndpointSliceUpdate(nil, slice("remote-only", endpoint{"10.1.0.1", "node-b", true}))
	syncNow(t, s)
	s.OnServiceDelete(service("remote-only", "10.0.0.1", local))
	syncNow(t, s)
	if v := noLocal(); v != 0 {
		t.Fatalf("no-local internal = %v after deleting the Service, want 0", v)
	}
}

// Health check servers are told about Services with a health check node
// port only, and recounted only when one of those changed.
func TestServiceHealth(t *testing.T) {
	b := &recorder{}
	h := &healthCounter{}
	s := newShell(t, b, func(o *Options) { o.ServiceHealth = h; o.Health = h })
	lb := func(svc *v1.Service) {
		svc.Spec.Type = v1.ServiceTypeLoadBalancer
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		svc.Spec.HealthCheckNodePort = 30000
		svc.Spec.Ports[0].NodePort = 31000
	}
	s.OnServiceAdd(service("lb", "10.0.0.1", lb))
	s.OnEndpointSliceAdd(slice("lb", endpoint{"10.1.0.1", node, true}, endpoint{"10.1.0.2", node, false}))
	s.OnServiceAdd(service("plain", "10.0.0.2", nil))
	s.OnEndpointSliceAdd(slice("plain", endpoint{"10.1.0.3", node, true}))
	initialize(s)
	syncNow(t, s)
	lbName := types.NamespacedName{Namespace: "ns", Name: "lb"}
	if h.services[lbName] != 30000 || len(h.services) != 1 {
		t.Fatalf("services = %v", h.services)
	}
	if fmt.Sprint(h.endpoints) != fmt.Sprint(map[types.NamespacedName]int{lbName: 1}) {
		t.Fatalf("endpoints = %v, want only ns/lb with 1 ready local endpoint", h.endpoints)
	}
	calls := h.endpointSyncCalls
	s.OnEndpointSliceUpdate(nil, slice("plain", endpoint{"10.1.0.4", node, true}))
	syncNow(t, s)
	if h.endpointSyncCalls != calls {
		t.Fatal("an endpoint change of a Service without health check recounted")
	}
	s.OnEndpointSliceUpdate(nil, slice("lb", endpoint{"10.1.0.1", node, true}, endpoint{"10.1.0.2", node, true}))
	syncNow(t, s)
	if h.endpoints[lbName] != 2 {
		t.Fatalf("endpoints = %v after the second lb endpoint became ready", h.endpoints)
	}
	if h.updated == 0 || h.queued == 0 {
		t.Fatalf("health recorder saw %d queued, %d updated", h.queued, h.updated)
	}
}

func TestServiceCIDRs(t *testing.T) {
	b := &recorder{}
	s := newShell(t, b, nil)
	initialize(s)
	s.OnServiceCIDRsChanged([]string{"10.96.0.0/16", "fd00::/108", "garbage", "::ffff:10.0.0.0/104", "10.0.0.0/24"})
	syncNow(t, s)
	got := b.last(t)
	if !got.cidrsChanged || !slices.Equal(got.cidrs, []string{"10.0.0.0/24", "10.96.0.0/16"}) {
		t.Fatalf("cidrs = %v (changed %v), want this family's, sorted", got.cidrs, got.cidrsChanged)
	}
	s.OnServiceCIDRsChanged([]string{"10.0.0.0/24", "10.96.0.0/16"})
	syncNow(t, s)
	if b.last(t).cidrsChanged {
		t.Fatal("same CIDRs reported as changed")
	}
}

// SyncAgainAfter asks for one more sync later, without a change.
func TestSyncAgainAfter(t *testing.T) {
	b := &recorder{out: Outcome{SyncAgainAfter: 10 * time.Millisecond}}
	s := newShell(t, b, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	initialize(s)
	deadline := time.Now().Add(10 * time.Second)
	for b.calls() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d syncs; SyncAgainAfter did not bring more", b.calls())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// OnSync hears of every sync that ran, with its outcome.
func TestOnSync(t *testing.T) {
	b := &recorder{}
	var got []SyncResult
	s := newShell(t, b, func(o *Options) { o.OnSync = func(r SyncResult) { got = append(got, r) } })
	syncNow(t, s) // not initialized: not a sync
	initialize(s)
	syncNow(t, s)
	b.fail = errors.New("boom")
	_ = s.SyncNow()
	if len(got) != 2 || !got[0].Full || got[0].Err != nil || got[1].Err == nil || got[1].Family != v1.IPv4Protocol {
		t.Fatalf("OnSync saw %+v, want a successful full sync then a failed one", got)
	}
}

// foreignPort and foreignEndpoint are third-party implementations of the public
// interfaces (as Calico has), whose values the shell must check before any backend
// sees them.
type foreignPort struct {
	*proxy.BaseServicePortInfo
	clusterIP string
	port      int
}

func (f *foreignPort) ClusterIP() net.IP { return net.ParseIP(f.clusterIP) }
func (f *foreignPort) Port() int         { return f.port }

type foreignEndpoint struct {
	*proxy.BaseEndpointInfo
	ip   string
	port int
}

func (e *foreignEndpoint) IP() string     { return e.ip }
func (e *foreignEndpoint) Port() int      { return e.port }
func (e *foreignEndpoint) String() string { return net.JoinHostPort(e.ip, fmt.Sprint(e.port)) }

// TestShellLeavesOutWhatNoBackendCanProgram: a backend with no Validator of its own
// (proxyrun's, nftables') still never sees a service port or endpoint of the other
// family or with a port out of range, from whatever implementation made it.
func TestShellLeavesOutWhatNoBackendCanProgram(t *testing.T) {
	type noValidator struct{ Backend }
	b := &recorder{}
	s := newShell(t, noValidator{b}, func(o *Options) {
		o.MakeServicePort = func(_ *v1.ServicePort, svc *v1.Service, base *proxy.BaseServicePortInfo) proxy.ServicePort {
			switch svc.Name {
			case "other-family":
				return &foreignPort{base, "fd00::1", 80}
			case "bad-port":
				return &foreignPort{base, "10.0.0.3", 70000}
			}
			return base
		}
		o.MakeEndpoint = func(base *proxy.BaseEndpointInfo, _ *proxy.ServicePortName) proxy.Endpoint {
			switch base.IP() {
			case "10.1.0.2":
				return &foreignEndpoint{base, "fd00::2", 8080}
			case "10.1.0.3":
				return &foreignEndpoint{base, "not-an-ip", 8080}
			case "10.1.0.4":
				return &foreignEndpoint{base, "10.1.0.4", 0}
			}
			return base
		}
	})
	s.OnServiceAdd(service("good", "10.0.0.1", nil))
	s.OnServiceAdd(service("other-family", "10.0.0.2", nil))
	s.OnServiceAdd(service("bad-port", "10.0.0.3", nil))
	s.OnEndpointSliceAdd(slice("good", endpoint{"10.1.0.1", node, true}, endpoint{"10.1.0.2", node, true},
		endpoint{"10.1.0.3", node, true}, endpoint{"10.1.0.4", node, true}))
	initialize(s)
	syncNow(t, s)
	got := b.last(t)
	if len(got.policies) != 1 || got.policies["ns/good:p"] == nil {
		t.Fatalf("policies for %v, want only ns/good:p", slices.Sorted(maps.Keys(got.policies)))
	}
	var eps []string
	for _, ep := range got.policies["ns/good:p"].ClusterEndpoints {
		eps = append(eps, ep.String())
	}
	if want := []string{"10.1.0.1:8080"}; !slices.Equal(eps, want) {
		t.Errorf("cluster endpoints %v, want %v", eps, want)
	}
}

var _ interface {
	config.ServiceHandler
	config.EndpointSliceHandler
	config.NodeTopologyHandler
	proxy.Provider
} = &Shell{}

func TestHandlers(t *testing.T) {
	web := service("web", "172.30.0.10", nil)
	web2 := web.DeepCopy()
	web2.Spec.Ports[0].Port = 8080
	eps := slice("web", endpoint{ip: "10.0.0.1", node: node, ready: true})
	eps2 := slice("web", endpoint{ip: "10.0.0.2", node: node, ready: true})

	for _, tc := range []struct {
		name string
		// syncAtOnce sets Options.SyncWhenInitialized.
		syncAtOnce bool
		events     func(s *Shell)
		// wantQueued counts Sync requests (each reports QueuedUpdate),
		// wantSynced the backend syncs; both are totals after events.
		wantQueued, wantSynced int
		wantInitialized        bool
		// changes the trackers hold for the next sync
		wantPendingServices, wantPendingEndpoints int
	}{
		{
			name: "changes before the informers listed are recorded, not synced",
			events: func(s *Shell) {
				s.OnServiceAdd(web)
				s.OnEndpointSliceAdd(eps)
			},
			wantPendingServices: 1, wantPendingEndpoints: 1,
		},
		{
			name:       "one informer listed is not enough",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnServiceAdd(web)
			},
			wantPendingServices: 1,
		},
		{
			name:       "both listed: first sync at once, later changes queued",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnEndpointSlicesSynced()
				s.OnServiceSynced()
				s.OnServiceAdd(web)
				s.OnServiceUpdate(web, web2)
				s.OnEndpointSliceAdd(eps)
				s.OnEndpointSliceUpdate(eps, eps2)
			},
			wantSynced: 1, wantQueued: 4, wantInitialized: true,
			wantPendingServices: 1, wantPendingEndpoints: 1,
		},
		{
			name: "both listed without SyncWhenInitialized: the first sync is queued",
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
			},
			wantQueued: 1, wantInitialized: true,
		},
		{
			name:       "deleting a Service that was synced queues a sync",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceAdd(web)
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnServiceDelete(web)
			},
			wantSynced: 1, wantQueued: 1, wantInitialized: true, wantPendingServices: 1,
		},
		{
			name:       "deleting a slice that was synced queues a sync",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnEndpointSliceAdd(eps)
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnEndpointSliceDelete(eps)
			},
			wantSynced: 1, wantQueued: 1, wantInitialized: true, wantPendingEndpoints: 1,
		},
		{
			name:       "an update that changes nothing queues nothing",
			syncAtOnce: true,
			events: func(s *Shell) {
				s.OnServiceSynced()
				s.OnEndpointSlicesSynced()
				s.OnServiceUpdate(web, web.DeepCopy())
			},
			wantSynced: 1, wantInitialized: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &recorder{}
			h := &healthCounter{}
			s := newShell(t, b, func(o *Options) {
				o.SyncWhenInitialized = tc.syncAtOnce
				o.Health = h
			})
			tc.events(s)
			if h.queued != tc.wantQueued || b.calls() != tc.wantSynced {
				t.Errorf("%d syncs queued and %d run; want %d and %d", h.queued, b.calls(), tc.wantQueued, tc.wantSynced)
			}
			if s.Initialized() != tc.wantInitialized {
				t.Errorf("Initialized() = %v, want %v", s.Initialized(), tc.wantInitialized)
			}
			// Whatever happened before the informers listed must still be
			// there for the first sync.
			if got := (proxy.ServicePortMap{}).Update(s.serviceChanges).UpdatedServices.Len(); got != tc.wantPendingServices {
				t.Errorf("%d pending service changes, want %d", got, tc.wantPendingServices)
			}
			if got := (proxy.EndpointsMap{}).Update(s.endpointsChanges).UpdatedServices.Len(); got != tc.wantPendingEndpoints {
				t.Errorf("%d pending endpoint changes, want %d", got, tc.wantPendingEndpoints)
			}
		})
	}
}

func TestTopologyChangeIsQueuedAndMakesTheNextSyncFull(t *testing.T) {
	b := &recorder{}
	h := &healthCounter{}
	s := newShell(t, b, func(o *Options) { o.Health = h })
	initialize(s)
	syncNow(t, s)
	queued := h.queued
	s.OnTopologyChange(map[string]string{v1.LabelTopologyZone: "z1"})
	if h.queued != queued+1 {
		t.Errorf("topology change queued %d syncs, want 1", h.queued-queued)
	}
	if !s.NeedsFullSync() {
		t.Error("the sync after a topology change is not full")
	}
	s.mu.Lock()
	zone := s.topology[v1.LabelTopologyZone]
	s.mu.Unlock()
	if zone != "z1" {
		t.Errorf("topology labels not stored: zone %q", zone)
	}
}
