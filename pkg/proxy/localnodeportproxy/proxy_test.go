package localnodeportproxy

import (
	"bufio"
	"context"
	"net"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"
	testingclock "k8s.io/utils/clock/testing"

	"k8s.io/kube-proxy/pkg/proxy"
)

// backend is a TCP server that answers every connection with its name.
func backend(t *testing.T, name string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = c.Close() }()
				_, _ = c.Write([]byte(name + "\n"))
				// Echo until the client closes, to exercise both directions.
				r := bufio.NewReader(c)
				line, err := r.ReadString('\n')
				if err == nil {
					_, _ = c.Write([]byte(line))
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// deadAddr returns an address nobody listens on.
func deadAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

func freePort(t *testing.T) int {
	_, p, _ := net.SplitHostPort(deadAddr(t))
	n, _ := strconv.Atoi(p)
	return n
}

// ask connects to the NodePort, reads the backend's name and checks echo.
func ask(t *testing.T, port int) (string, error) {
	t.Helper()
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), 2*time.Second)
	if err != nil {
		return "", err
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	name, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	if _, err := c.Write([]byte("ping\n")); err != nil {
		return "", err
	}
	if echo, err := r.ReadString('\n'); err != nil || echo != "ping\n" {
		t.Errorf("echo through proxy: %q %v", echo, err)
	}
	return name[:len(name)-1], nil
}

var spn = proxy.ServicePortName{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "svc"}, Port: "p", Protocol: v1.ProtocolTCP}

func newTestProxy(t *testing.T) (*LocalNodePortProxy, *testingclock.FakePassiveClock) {
	_, ctx := ktesting.NewTestContext(t)
	ctx, cancel := context.WithCancel(ctx)
	clk := testingclock.NewFakePassiveClock(time.Now())
	p := newProxy(ctx, v1.IPv4Protocol, clk)
	t.Cleanup(func() { p.Shutdown(); cancel() })
	return p, clk
}

func TestForwarding(t *testing.T) {
	a, b := backend(t, "a"), backend(t, "b")
	port := freePort(t)
	p, _ := newTestProxy(t)

	tests := []struct {
		name    string
		specs   []NodePortSpec
		want    map[string]bool // acceptable answers; nil = connection must fail
		minSeen int
	}{
		{"two endpoints", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{a, b}}}, map[string]bool{"a": true, "b": true}, 2},
		{"endpoints updated in place", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{b}}}, map[string]bool{"b": true}, 1},
		{"dead endpoint is skipped", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{deadAddr(t), a}}}, map[string]bool{"a": true}, 1},
		{"no endpoints closes the listener", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port}}, nil, 0},
		{"UDP is not served", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolUDP, NodePort: port, Endpoints: []string{a}}}, nil, 0},
		{"out-of-range port is ignored", []NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: 70000, Endpoints: []string{a}}}, nil, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p.SyncNodePorts(tc.specs)
			seen := map[string]bool{}
			for range 30 {
				got, err := ask(t, port)
				if tc.want == nil {
					if err == nil {
						t.Fatalf("connection succeeded (answer %q), want failure", got)
					}
					return
				}
				if err != nil {
					t.Fatalf("connection failed: %v", err)
				}
				if !tc.want[got] {
					t.Fatalf("answer %q not in %v", got, tc.want)
				}
				seen[got] = true
			}
			if len(seen) < tc.minSeen {
				t.Errorf("only %v answered in 30 connections, want %d distinct", seen, tc.minSeen)
			}
		})
	}
}

func TestSessionAffinity(t *testing.T) {
	a, b := backend(t, "a"), backend(t, "b")
	port := freePort(t)
	p, clk := newTestProxy(t)
	spec := NodePortSpec{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{a, b},
		SessionAffinityType: v1.ServiceAffinityClientIP, StickyMaxAgeSeconds: 60}
	p.SyncNodePorts([]NodePortSpec{spec})

	first, err := ask(t, port)
	if err != nil {
		t.Fatal(err)
	}
	for range 20 {
		clk.SetTime(clk.Now().Add(30 * time.Second)) // each use renews the pin
		if got, err := ask(t, port); err != nil || got != first {
			t.Fatalf("affinity broken: got %q (%v), pinned %q", got, err, first)
		}
	}
	// Removing the pinned endpoint moves the pin.
	other := map[string]string{"a": b, "b": a}[first]
	spec.Endpoints = []string{other}
	p.SyncNodePorts([]NodePortSpec{spec})
	got, err := ask(t, port)
	if err != nil || got == first {
		t.Fatalf("after removing %q: got %q %v", first, got, err)
	}
}

func TestShutdownClosesListeners(t *testing.T) {
	a := backend(t, "a")
	port := freePort(t)
	p, _ := newTestProxy(t)
	p.SyncNodePorts([]NodePortSpec{{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{a}}})
	if _, err := ask(t, port); err != nil {
		t.Fatal(err)
	}
	p.Shutdown()
	if _, err := ask(t, port); err == nil {
		t.Fatal("listener still accepting after Shutdown")
	}
}

func TestPortInUseIsReportedNotFatal(t *testing.T) {
	a := backend(t, "a")
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = busy.Close() }()
	_, ps, _ := net.SplitHostPort(busy.Addr().String())
	port, _ := strconv.Atoi(ps)
	good := freePort(t)
	p, _ := newTestProxy(t)
	p.SyncNodePorts([]NodePortSpec{
		{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: port, Endpoints: []string{a}},
		{ServicePortName: spn, Protocol: v1.ProtocolTCP, NodePort: good, Endpoints: []string{a}},
	})
	if got, err := ask(t, good); err != nil || got != "a" {
		t.Fatalf("the other NodePort must still work: %q %v", got, err)
	}
}
