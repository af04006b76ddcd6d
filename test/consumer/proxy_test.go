package consumer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/config"
	"k8s.io/kube-proxy/pkg/proxy/util"
)

const node = "node-1"

// recorder is a Syncer that keeps the last snapshot, rendered for comparison.
type recorder struct {
	mu    sync.Mutex
	last  []string
	fails int // the next this many calls fail
	calls int
	// firstOK is the number of the first call that succeeded, 0 before.
	firstOK int
}

func (r *recorder) sync(snap map[proxy.ServicePortName]Service) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls++
	if r.fails > 0 {
		r.fails--
		return errors.New("data plane busy")
	}
	if r.firstOK == 0 {
		r.firstOK = r.calls
	}
	r.last = render(snap)
	return nil
}

func (r *recorder) snapshot() ([]string, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last, r.calls
}

// render prints one line per service port, in key order.
func render(snap map[proxy.ServicePortName]Service) []string {
	out := []string{}
	for name, s := range snap {
		var b strings.Builder
		fmt.Fprintf(&b, "%s owner=%s %s:%d/%s", name, s.Owner, s.ClusterIP, s.Port, s.Protocol)
		if s.NodePort != 0 {
			fmt.Fprintf(&b, " nodePort=%d", s.NodePort)
		}
		if len(s.LoadBalancerVIPs) > 0 {
			fmt.Fprintf(&b, " lb=%v", s.LoadBalancerVIPs)
		}
		if s.AffinitySeconds != 0 {
			fmt.Fprintf(&b, " affinity=%ds", s.AffinitySeconds)
		}
		if s.ExternalPolicyLocal {
			b.WriteString(" eTP=Local")
		}
		if s.HealthCheckNodePort != 0 {
			b.WriteString(" hc")
		}
		if len(s.SourceRanges) > 0 {
			fmt.Fprintf(&b, " ranges=%v", s.SourceRanges)
		}
		fmt.Fprintf(&b, " ext=%t cluster=%t local=%t [%s]", s.ExternallyAccessible, s.UsesClusterEndpoints, s.UsesLocalEndpoints, s.Describe)
		for _, be := range s.Backends {
			fmt.Fprintf(&b, " %s", be)
			if be.Local {
				b.WriteString(",local")
			}
			if be.Ready {
				b.WriteString(",ready")
			}
			if be.Terminating {
				b.WriteString(",terminating")
			}
		}
		out = append(out, b.String())
	}
	sort.Strings(out)
	return out
}

func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

func service(name string, mutate func(*v1.Service)) *v1.Service {
	s := &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name},
		Spec: v1.ServiceSpec{
			Type:       v1.ServiceTypeClusterIP,
			ClusterIP:  "198.19.0.10",
			ClusterIPs: []string{"198.19.0.10"},
			IPFamilies: []v1.IPFamily{v1.IPv4Protocol},
			Ports: []v1.ServicePort{{
				Name: "http", Protocol: v1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080),
			}},
		},
	}
	if mutate != nil {
		mutate(s)
	}
	return s
}

type ep struct {
	ip          string
	node        string
	ready       bool
	terminating bool
}

func slice(svcName string, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "shop", Name: svcName + "-abc",
			Labels: map[string]string{discovery.LabelServiceName: svcName},
		},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(v1.ProtocolTCP), Port: ptr.To[int32](8080)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{
			Addresses: []string{e.ip},
			NodeName:  ptr.To(e.node),
			Conditions: discovery.EndpointConditions{
				Ready: ptr.To(e.ready), Serving: ptr.To(e.ready || e.terminating), Terminating: ptr.To(e.terminating),
			},
		})
	}
	return s
}

// healthCheck asks the healthCheckNodePort; code 0 means nothing listens.
func healthCheck(port int32) (code, local int, err error) {
	resp, err := (&http.Client{Timeout: 2 * time.Second}).Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Op == "dial" {
			return 0, 0, nil
		}
		return 0, 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, 0, err
	}
	var got struct {
		LocalEndpoints int `json:"localEndpoints"`
	}
	if err := json.Unmarshal(body, &got); err != nil {
		return 0, 0, fmt.Errorf("healthCheckNodePort body %q: %w", body, err)
	}
	return resp.StatusCode, got.LocalEndpoints, nil
}

func waitFor(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %s", what, detail)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestProxyFromInformers wires the proxy to informers through the config
// package, as a consumer does, and walks it through a Service's life.
func TestProxyFromInformers(t *testing.T) {
	hcPort := freePort(t)
	web := service("web", func(s *v1.Service) {
		s.Spec.Type = v1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hcPort
		s.Status.LoadBalancer.Ingress = []v1.LoadBalancerIngress{{IP: "198.18.100.20"}}
		s.Spec.LoadBalancerSourceRanges = []string{"198.18.0.0/24"}
	})
	sticky := service("sticky", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "198.19.0.11", []string{"198.19.0.11"}
		s.Spec.SessionAffinity = v1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptr.To[int32](30)}}
	})
	foreign := service("foreign", func(s *v1.Service) {
		s.Spec.ClusterIP, s.Spec.ClusterIPs = "198.19.0.12", []string{"198.19.0.12"}
		s.Labels = map[string]string{apis.LabelServiceProxyName: "someone-else"}
	})
	local := ep{ip: "198.18.129.11", node: node, ready: true}
	remote := ep{ip: "198.18.130.11", node: "node-2", ready: true}
	leaving := ep{ip: "198.18.129.12", node: node, terminating: true}

	const (
		webLine = "shop/web:http owner=shop/web 198.19.0.10:80/TCP nodePort=30080 lb=[198.18.100.20] eTP=Local hc" +
			" ranges=[198.18.0.0/24] ext=true cluster=true local=true [198.19.0.10:80/TCP]"
		stickyLine = "shop/sticky:http owner=shop/sticky 198.19.0.11:80/TCP affinity=30s ext=false cluster=true local=false [198.19.0.11:80/TCP]"
	)
	ctx := t.Context()
	client := fake.NewClientset(web, sticky, foreign, slice("web", local, remote, leaving))

	rec := &recorder{}
	p, err := New(Options{
		Hostname: node, Family: v1.IPv4Protocol,
		NodePortAddresses: []string{"127.0.0.0/8", "fd00::/8"},
		HealthzAddr:       "127.0.0.1:0",
		MinSyncPeriod:     10 * time.Millisecond, RetryPeriod: 100 * time.Millisecond, MaxSyncPeriod: time.Hour,
	}, rec.sync)
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	factory := informers.NewSharedInformerFactory(client, 0)
	// Shutdown waits for the informers, which only stop once stop is closed.
	t.Cleanup(func() { close(stop); factory.Shutdown() })
	svcConfig := config.NewServiceConfig(ctx, factory.Core().V1().Services(), 0)
	svcConfig.RegisterEventHandler(p)
	epsConfig := config.NewEndpointSliceConfig(ctx, factory.Discovery().V1().EndpointSlices(), 0)
	epsConfig.RegisterEventHandler(p)
	factory.Start(stop)
	go svcConfig.Run(stop)
	go epsConfig.Run(stop)
	p.Start(stop)

	if got := p.NodePortAddresses(); got != "[127.0.0.0/8]" {
		t.Errorf("NodePortAddresses() = %s, want [127.0.0.0/8]", got)
	}
	if p.Healthz().NodeEligible() {
		t.Errorf("node eligible before the proxy has seen its Node")
	}
	p.OnNodeChange(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})
	if !p.Healthz().NodeEligible() {
		t.Errorf("node not eligible after OnNodeChange")
	}

	svcs := client.CoreV1().Services("shop")
	slices := client.DiscoveryV1().EndpointSlices("shop")
	for _, step := range []struct {
		name     string
		do       func() error
		want     []string
		hcCode   int // 0: the healthCheckNodePort is closed
		hcLocals int
	}{{
		name: "initial state; the Service of another proxy is ignored",
		do:   func() error { return nil },
		want: []string{
			stickyLine,
			webLine + " 198.18.129.11:8080,local,ready 198.18.129.12:8080,local,terminating 198.18.130.11:8080,ready",
		},
		hcCode: http.StatusOK, hcLocals: 1,
	}, {
		name: "the local ready endpoint goes away",
		do: func() error {
			_, err := slices.Update(ctx, slice("web", remote, leaving), metav1.UpdateOptions{})
			return err
		},
		want: []string{
			stickyLine,
			webLine + " 198.18.129.12:8080,local,terminating 198.18.130.11:8080,ready",
		},
		hcCode: http.StatusServiceUnavailable, hcLocals: 0,
	}, {
		name: "web is handed to another proxy",
		do: func() error {
			s := web.DeepCopy()
			s.Labels = map[string]string{apis.LabelServiceProxyName: "someone-else"}
			_, err := svcs.Update(ctx, s, metav1.UpdateOptions{})
			return err
		},
		want: []string{stickyLine},
	}, {
		name: "sticky is deleted",
		do:   func() error { return svcs.Delete(ctx, "sticky", metav1.DeleteOptions{}) },
		want: []string{},
	}} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		waitFor(t, step.name, func() (bool, string) {
			got, _ := rec.snapshot()
			if d := cmp.Diff(step.want, got); d != "" {
				return false, "snapshot (-want +got):\n" + d
			}
			code, locals, err := healthCheck(hcPort)
			if err != nil || code != step.hcCode || locals != step.hcLocals {
				return false, fmt.Sprintf("healthCheckNodePort: %d localEndpoints=%d err=%v, want %d localEndpoints=%d",
					code, locals, err, step.hcCode, step.hcLocals)
			}
			return true, ""
		})
		h := p.Healthz().Health()
		if !h.Healthy || h.Status[v1.IPv4Protocol].LastUpdated.IsZero() {
			t.Errorf("%s: health %+v, want healthy with an IPv4 sync recorded", step.name, h)
		}
	}
}

// TestSyncRetried drives the handlers directly: a failing data plane is retried
// by the runner until it takes the snapshot.
func TestSyncRetried(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
	}{{"first sync succeeds", 0}, {"two failures before success", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			rec := &recorder{fails: tc.fails}
			p, err := New(Options{
				Hostname: node, Family: v1.IPv4Protocol,
				MinSyncPeriod: 10 * time.Millisecond, RetryPeriod: 50 * time.Millisecond, MaxSyncPeriod: time.Hour,
			}, rec.sync)
			if err != nil {
				t.Fatal(err)
			}
			stop := make(chan struct{})
			defer close(stop)
			p.Start(stop)
			p.OnServiceAdd(service("web", nil))
			p.OnEndpointSliceAdd(slice("web", ep{ip: "198.18.130.11", node: "node-2", ready: true}))
			// Nothing is programmed before both initial lists are in.
			time.Sleep(50 * time.Millisecond)
			if _, calls := rec.snapshot(); calls != 0 {
				t.Fatalf("data plane called %d times before the handlers synced", calls)
			}
			p.OnServiceSynced()
			p.OnEndpointSlicesSynced()
			want := []string{"shop/web:http owner=shop/web 198.19.0.10:80/TCP ext=false cluster=true local=false [198.19.0.10:80/TCP] 198.18.130.11:8080,ready"}
			waitFor(t, "the snapshot", func() (bool, string) {
				got, calls := rec.snapshot()
				return cmp.Equal(want, got), fmt.Sprintf("after %d calls: %v", calls, got)
			})
			// Later syncs may follow (each handler call requests one), but
			// the first success must come right after the failures.
			rec.mu.Lock()
			firstOK := rec.firstOK
			rec.mu.Unlock()
			if firstOK != tc.fails+1 {
				t.Errorf("first successful data plane call was #%d, want #%d", firstOK, tc.fails+1)
			}
			if p.Syncs() < 1 {
				t.Errorf("Syncs() = %d, want at least 1", p.Syncs())
			}
		})
	}
}

// TestOwnEndpointsInMaps puts this proxy's Backend into kube-proxy's maps.
func TestOwnEndpointsInMaps(t *testing.T) {
	web := Key("shop", "web", "http", v1.ProtocolTCP)
	webUDP := proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: v1.ProtocolUDP}
	be := func(s string, local, ready bool) proxy.Endpoint {
		return Backend{Addr: netip.MustParseAddrPort(s), Local: local, Ready: ready, Serving: ready}
	}
	for _, tc := range []struct {
		name string
		m    proxy.EndpointsMap
		want map[types.NamespacedName]int
	}{{
		name: "empty",
		m:    proxy.EndpointsMap{},
		want: map[types.NamespacedName]int{},
	}, {
		name: "local ready counted, remote and not-ready not",
		m: proxy.EndpointsMap{web: {
			be("198.18.129.11:8080", true, true),
			be("198.18.129.12:8080", true, false),
			be("198.18.130.11:8080", false, true),
		}},
		want: map[types.NamespacedName]int{{Namespace: "shop", Name: "web"}: 1},
	}, {
		name: "ports of one Service count once per endpoint address",
		m: proxy.EndpointsMap{
			web:    {be("198.18.129.11:8080", true, true)},
			webUDP: {be("198.18.129.11:8080", true, true)},
		},
		want: map[types.NamespacedName]int{{Namespace: "shop", Name: "web"}: 1},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.m.LocalReadyEndpoints()
			if got == nil {
				got = map[types.NamespacedName]int{}
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("LocalReadyEndpoints (-want +got):\n%s", d)
			}
		})
	}
	if web != (proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "shop", Name: "web"}, Port: "http", Protocol: v1.ProtocolTCP}) {
		t.Errorf("Key built %v", web)
	}
}

func TestBackendOf(t *testing.T) {
	for _, tc := range []struct {
		name   string
		in     proxy.Endpoint
		want   string
		wantOK bool
	}{
		{"IPv4", Backend{Addr: netip.MustParseAddrPort("198.18.129.11:8080")}, "198.18.129.11:8080", true},
		{"IPv6", Backend{Addr: netip.MustParseAddrPort("[fd00:18:1::b]:8080")}, "[fd00:18:1::b]:8080", true},
		{"zero address", Backend{}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := backendOf(tc.in)
			if ok != tc.wantOK || (ok && got.String() != tc.want) {
				t.Errorf("backendOf(%v) = %v, %v; want %s, %v", tc.in, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestNodePortAddressesString(t *testing.T) {
	for _, tc := range []struct {
		family v1.IPFamily
		cidrs  []string
		want   string
	}{
		{v1.IPv4Protocol, []string{"198.18.0.0/15", "fd00::/8"}, "[198.18.0.0/15]"},
		{v1.IPv6Protocol, []string{"198.18.0.0/15", "fd00::/8"}, "[fd00::/8]"},
		{v1.IPv4Protocol, nil, "[0.0.0.0/0]"},
		{v1.IPv6Protocol, nil, "[::/0]"},
	} {
		if got := util.NewNodePortAddresses(tc.family, tc.cidrs).String(); got != tc.want {
			t.Errorf("NewNodePortAddresses(%s, %v).String() = %s, want %s", tc.family, tc.cidrs, got, tc.want)
		}
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	good := Options{Hostname: node, Family: v1.IPv4Protocol, MinSyncPeriod: time.Second, RetryPeriod: time.Second, MaxSyncPeriod: time.Hour}
	sync := func(map[proxy.ServicePortName]Service) error { return nil }
	for _, tc := range []struct {
		name   string
		mutate func(*Options)
		syncer Syncer
		want   string
	}{
		{"no syncer", func(*Options) {}, nil, "nil Syncer"},
		{"no family", func(o *Options) { o.Family = "" }, sync, "unsupported IP family"},
		{"max below min", func(o *Options) { o.MaxSyncPeriod = time.Millisecond }, sync, "bad sync periods"},
		{"no retry", func(o *Options) { o.RetryPeriod = 0 }, sync, "bad sync periods"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := good
			tc.mutate(&o)
			_, err := New(o, tc.syncer)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), node) {
				t.Errorf("New: %v, want an error naming %s and saying %q", err, node, tc.want)
			}
		})
	}
	if _, err := New(good, sync); err != nil {
		t.Errorf("New(good options): %v", err)
	}
}
