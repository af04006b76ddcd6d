//go:build linux

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
)

// TestProxyOnLoopback drives the backend with hand-built States, the way a backend author
// would unit-test theirs, using loopback addresses so it needs no privileges.
func TestProxyOnLoopback(t *testing.T) {
	a := tcpServer(t, "127.0.0.1:0", "a")
	b := tcpServer(t, "127.0.0.1:0", "b")
	ua := udpServer(t, "127.0.0.1:0", "a")
	ub := udpServer(t, "127.0.0.1:0", "b")
	// A random 127/8 address keeps parallel runs on one machine apart.
	vip := netip.AddrFrom4([4]byte{127, 77, byte(rand.IntN(250) + 1), byte(rand.IntN(250) + 1)})
	web := netip.AddrPortFrom(vip, 18080)
	dns := netip.AddrPortFrom(vip, 18053)
	sticky := netip.AddrPortFrom(vip, 18081)

	ep := func(ap netip.AddrPort) localnode.Endpoint {
		return localnode.Endpoint{IP: ap.Addr(), Port: ap.Port(), Ready: true, Serving: true, ForCluster: true, ForLocal: true}
	}
	svc := func(name string, proto localnode.Protocol, at netip.AddrPort, eps ...localnode.Endpoint) localnode.Service {
		return localnode.Service{
			ServicePort: localnode.ServicePort{
				Name:      localnode.PortName{Namespace: "ns", Name: name, Protocol: proto},
				ClusterIP: at.Addr(), Port: at.Port(),
			},
			Endpoints: eps, HasAnyEndpoints: len(eps) > 0,
		}
	}
	state := func(svcs ...localnode.Service) *localnode.State {
		s := &localnode.State{Family: localnode.IPv4, Services: svcs}
		s.Normalize()
		if err := s.Validate(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	withAffinity := func(s localnode.Service) localnode.Service {
		s.SessionAffinity, s.AffinityTimeout = localnode.AffinityClientIP, time.Hour
		return s
	}

	tcp := func(at netip.AddrPort) func() (string, error) { return func() (string, error) { return tcpGet(at) } }
	udp := func(at netip.AddrPort) func() (string, error) { return func() (string, error) { return udpGet(at) } }
	tests := []struct {
		name  string
		state *localnode.State
		// want maps each address probed 4 times to the answers expected.
		want map[netip.AddrPort]map[string]int
		get  map[netip.AddrPort]func() (string, error)
	}{
		{
			name: "round-robin over two endpoints, TCP and UDP; affinity sticks to one",
			state: state(svc("web", localnode.TCP, web, ep(a), ep(b)), svc("dns", localnode.UDP, dns, ep(ua), ep(ub)),
				withAffinity(svc("sticky", localnode.TCP, sticky, ep(a), ep(b)))),
			want: map[netip.AddrPort]map[string]int{web: {"a": 2, "b": 2}, dns: {"a": 2, "b": 2}},
			get:  map[netip.AddrPort]func() (string, error){web: tcp(web), dns: udp(dns)},
		},
		{
			name:  "an endpoint leaves",
			state: state(svc("web", localnode.TCP, web, ep(b)), svc("dns", localnode.UDP, dns, ep(ua))),
			want:  map[netip.AddrPort]map[string]int{web: {"b": 4}, dns: {"a": 4}},
			get:   map[netip.AddrPort]func() (string, error){web: tcp(web), dns: udp(dns)},
		},
		{
			name:  "an endpoint that refuses is skipped",
			state: state(svc("web", localnode.TCP, web, ep(b), ep(netip.AddrPortFrom(vip, 1)))),
			want:  map[netip.AddrPort]map[string]int{web: {"b": 4}},
			get:   map[netip.AddrPort]func() (string, error){web: tcp(web)},
		},
		{
			name:  "no endpoints: connections fail at once",
			state: state(svc("web", localnode.TCP, web)),
			want:  map[netip.AddrPort]map[string]int{web: {"error": 4}},
			get:   map[netip.AddrPort]func() (string, error){web: tcp(web)},
		},
		{
			name:  "service deleted: nothing listens",
			state: state(),
			want:  map[netip.AddrPort]map[string]int{web: {"error": 4}},
			get:   map[netip.AddrPort]func() (string, error){web: tcp(web)},
		},
	}
	p := New(Options{DialTimeout: time.Second})
	t.Cleanup(func() { p.Close() })
	for _, tc := range tests {
		if err := p.Sync(context.Background(), tc.state); err != nil {
			t.Fatalf("%s: Sync: %v", tc.name, err)
		}
		for at, want := range tc.want {
			if diff := cmp.Diff(want, ids(4, tc.get[at])); diff != "" {
				t.Errorf("%s: answers from %s (-want +got):\n%s", tc.name, at, diff)
			}
		}
		if tc.state.Lookup(localnode.PortName{Namespace: "ns", Name: "sticky", Protocol: localnode.TCP}) != nil {
			if got := ids(6, tcp(sticky)); len(got) != 1 || got["error"] != 0 {
				t.Errorf("%s: ClientIP affinity spread one client over %v", tc.name, got)
			}
		}
	}
	if _, err := tcpGet(sticky); err == nil {
		t.Error("the sticky service still answers after its deletion")
	}
}

// TestDesiredListeners checks which addresses get listeners and which endpoints each uses.
func TestDesiredListeners(t *testing.T) {
	ip := netip.MustParseAddr
	local := localnode.Endpoint{IP: ip("10.1.0.1"), Port: 8080, ForCluster: true, ForLocal: true, Local: true}
	remote := localnode.Endpoint{IP: ip("10.1.0.2"), Port: 8080, ForCluster: true}
	st := &localnode.State{Family: localnode.IPv4, Services: []localnode.Service{
		{
			ServicePort: localnode.ServicePort{
				Name: localnode.PortName{Namespace: "ns", Name: "lb", Protocol: localnode.TCP}, ClusterIP: ip("10.0.0.1"), Port: 80,
				NodePort: 30080, ExternalIPs: []netip.Addr{ip("192.0.2.1")}, LoadBalancerVIPs: []netip.Addr{ip("192.0.2.2")},
				InternalPolicy: localnode.PolicyCluster, ExternalPolicy: localnode.PolicyLocal,
			},
			Endpoints: []localnode.Endpoint{local, remote}, HasAnyEndpoints: true,
		},
		{ServicePort: localnode.ServicePort{Name: localnode.PortName{Namespace: "ns", Name: "sctp", Protocol: localnode.SCTP}, ClusterIP: ip("10.0.0.2"), Port: 80}},
		{ServicePort: localnode.ServicePort{Name: localnode.PortName{Namespace: "ns", Name: "twin", Protocol: localnode.TCP}, ClusterIP: ip("10.0.0.1"), Port: 80}},
	}}
	got := map[string]string{}
	for k, tg := range desired(testLogger(t), st) {
		got[k.String()] = fmt.Sprint(tg.service, " ", tg.eps)
	}
	want := map[string]string{
		"TCP 10.0.0.1:80":  "ns/lb/TCP [10.1.0.1:8080 10.1.0.2:8080]",
		"TCP 192.0.2.1:80": "ns/lb/TCP [10.1.0.1:8080]",
		"TCP 192.0.2.2:80": "ns/lb/TCP [10.1.0.1:8080]",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("listeners (-want +got):\n%s", diff)
	}
}
