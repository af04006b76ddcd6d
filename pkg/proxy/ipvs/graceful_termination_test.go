//go:build linux

package ipvs

import (
	"context"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ipvstest "k8s.io/net-utils/ipvs/testing"

	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// setConns sets the connection counts the fake reports for a real server.
func setConns(t *testing.T, env *fakeEnv, vip string, port uint16, proto, rs string, active int) {
	t.Helper()
	key := ipvstest.ServiceKey{IP: vip, Port: port, Protocol: proto}
	for _, d := range env.ipvs.Destinations[key] {
		if d.String() == rs {
			d.ActiveConn = active
			return
		}
	}
	t.Fatalf("no real server %s on %v", rs, key)
}

func weights(t *testing.T, env *fakeEnv, vip string, port uint16, proto string) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, d := range env.ipvs.Destinations[ipvstest.ServiceKey{IP: vip, Port: port, Protocol: proto}] {
		out[d.String()] = d.Weight
	}
	return out
}

func TestGracefulTermination(t *testing.T) {
	for _, f := range fams {
		t.Run(string(f.family), func(t *testing.T) {
			p, env := newFakeProxier(t, f.family, []string{f.node}, fakeProxierOptions{})
			svc := st.NewService("ns", "web", func(s *v1.Service) {
				s.Spec.ClusterIP = f.svc(1)
				s.Spec.Ports = []v1.ServicePort{st.ServicePort("http", 80, v1.ProtocolTCP, 0), st.ServicePort("dns", 53, v1.ProtocolUDP, 0)}
			})
			ports := []discovery.EndpointPort{st.SlicePort("http", 8080, v1.ProtocolTCP), st.SlicePort("dns", 5353, v1.ProtocolUDP)}
			two := st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family), ports, st.EP{IP: f.rpod(1)}, st.EP{IP: f.rpod(2)})
			one := st.Slice("ns", "web", "web-1", st.AddressTypeOf(f.family), ports, st.EP{IP: f.rpod(1)})
			p.OnServiceAdd(svc)
			p.OnEndpointSliceAdd(two)
			syncAll(t, p)

			rs1, rs2 := f.hp(f.rpod(1), 8080), f.hp(f.rpod(2), 8080)
			udp2 := f.hp(f.rpod(2), 5353)
			setConns(t, env, f.svc(1), 80, "TCP", rs2, 3)
			setConns(t, env, f.svc(1), 53, "UDP", udp2, 3)
			p.OnEndpointSliceUpdate(two, one)
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got, want := weights(t, env, f.svc(1), 80, "TCP"), map[string]int{rs1: 1, rs2: 0}; !mapsEqual(got, want) {
				t.Fatalf("TCP real servers after removal: %v, want %v (draining at weight 0)", got, want)
			}
			if got, want := weights(t, env, f.svc(1), 53, "UDP"), map[string]int{f.hp(f.rpod(1), 5353): 1}; !mapsEqual(got, want) {
				t.Fatalf("UDP real servers after removal: %v, want %v (deleted at once)", got, want)
			}

			// Still connected: a check keeps it.
			p.gtm.tryDeleteRs()
			if _, ok := weights(t, env, f.svc(1), 80, "TCP")[rs2]; !ok {
				t.Fatalf("draining real server deleted while it has connections")
			}

			// The endpoint comes back: it is taken out of the list and serves again.
			p.OnEndpointSliceUpdate(one, two)
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got, want := weights(t, env, f.svc(1), 80, "TCP"), map[string]int{rs1: 1, rs2: 1}; !mapsEqual(got, want) {
				t.Fatalf("after the endpoint came back: %v, want %v", got, want)
			}
			if n := p.gtm.len(); n != 0 {
				t.Fatalf("termination list has %d entries after the endpoint came back", n)
			}

			// Removed again, then drained: the next tick deletes it.
			setConns(t, env, f.svc(1), 80, "TCP", rs2, 1)
			p.OnEndpointSliceUpdate(two, one)
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			setConns(t, env, f.svc(1), 80, "TCP", rs2, 0)
			// Only now does the manager's loop run, so nothing above races
			// with it; it acts on ticks of the fake clock only.
			stop := make(chan struct{})
			done := make(chan struct{})
			go func() { p.gtm.run(stop); close(done) }()
			t.Cleanup(func() { close(stop); <-done })
			tick(t, env)
			if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
				func(context.Context) (bool, error) { return p.gtm.len() == 0, nil }); err != nil {
				t.Fatalf("drained real server not deleted after a tick")
			}
			if got, want := weights(t, env, f.svc(1), 80, "TCP"), map[string]int{rs1: 1}; !mapsEqual(got, want) {
				t.Fatalf("after draining: %v, want %v", got, want)
			}
			// A partial sync notices the manager deleted it, and adds it when it is wanted again.
			p.OnEndpointSliceUpdate(one, two)
			if err := p.SyncNow(); err != nil {
				t.Fatal(err)
			}
			if got, want := weights(t, env, f.svc(1), 80, "TCP"), map[string]int{rs1: 1, rs2: 1}; !mapsEqual(got, want) {
				t.Fatalf("re-added after draining: %v, want %v", got, want)
			}
		})
	}
}

// tick fires the manager's ticker once and waits for the check it starts.
func tick(t *testing.T, env *fakeEnv) {
	t.Helper()
	if err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return env.clock.HasWaiters(), nil }); err != nil {
		t.Fatal("graceful termination loop never waited on its ticker")
	}
	env.clock.Step(rsCheckDeleteInterval)
}

func mapsEqual(a, b map[string]int) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
