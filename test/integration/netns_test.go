//go:build linux

package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// netNS is a network namespace made with `ip netns add`, removed in t.Cleanup.
type netNS struct {
	name   string
	handle netns.NsHandle
}

func randomName(prefix string) string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return prefix + hex.EncodeToString(b)
}

func newNetNS(t *testing.T, prefix string) *netNS {
	t.Helper()
	n := &netNS{name: randomName(prefix)}
	mustRun(t, "ip", "netns", "add", n.name)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n.name).Run() })
	h, err := netns.GetFromName(n.name)
	if err != nil {
		t.Fatalf("opening netns %s: %v", n.name, err)
	}
	n.handle = h
	t.Cleanup(func() { _ = h.Close() })
	mustRun(t, "ip", "-n", n.name, "link", "set", "lo", "up")
	return n
}

func mustRun(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// do runs fn on an OS thread switched into the namespace. Sockets fn creates stay in
// the namespace and can be used from any goroutine afterwards. If the thread cannot be
// switched back, it is left locked so that Go discards it instead of reusing it.
func (n *netNS) do(fn func() error) error {
	result := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			result <- fmt.Errorf("current netns: %w", err)
			return
		}
		defer orig.Close()
		if err := netns.Set(n.handle); err != nil {
			result <- fmt.Errorf("entering netns %s: %w", n.name, err)
			return
		}
		err = fn()
		if rerr := netns.Set(orig); rerr != nil {
			result <- errors.Join(err, fmt.Errorf("leaving netns %s: %w", n.name, rerr))
			return
		}
		runtime.UnlockOSThread()
		result <- err
	}()
	return <-result
}

func (n *netNS) listen(network, addr string) (net.Listener, error) {
	var l net.Listener
	err := n.do(func() (err error) {
		l, err = net.Listen(network, addr)
		return err
	})
	return l, err
}

func (n *netNS) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := n.do(func() (err error) {
		var d net.Dialer
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// get is an HTTP GET from inside the namespace; code 0 means no connection.
func (n *netNS) get(url string) (int, string, error) {
	client := &http.Client{
		Timeout:   3 * time.Second,
		Transport: &http.Transport{DialContext: n.dial, DisableKeepAlives: true},
	}
	resp, err := client.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), err
}

// exec runs a command inside the namespace and returns its combined output.
func (n *netNS) exec(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.name}, args...)...).CombinedOutput()
	return string(out), err
}

// relay forwards TCP connections accepted inside a namespace to an address in the host
// namespace (the API server on the host's loopback), so the proxy's namespace needs
// no interface to the host. It can be cut, which closes every open connection and
// refuses new ones, to make a network partition.
type relay struct {
	target string
	l      net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func startRelay(t *testing.T, ns *netNS, listenAddr, target string) *relay {
	t.Helper()
	l, err := ns.listen("tcp", listenAddr)
	if err != nil {
		t.Fatalf("relay listener in %s: %v", ns.name, err)
	}
	r := &relay{target: target, l: l, conns: map[net.Conn]struct{}{}}
	go r.serve()
	t.Cleanup(func() {
		_ = l.Close()
		r.setCut(true)
	})
	return r
}

func (r *relay) serve() {
	for {
		in, err := r.l.Accept()
		if err != nil {
			return
		}
		go r.forward(in)
	}
}

func (r *relay) track(c net.Conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cut {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

func (r *relay) untrack(c net.Conn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.conns, c)
}

func (r *relay) forward(in net.Conn) {
	defer in.Close()
	if !r.track(in) {
		return
	}
	defer r.untrack(in)
	out, err := net.DialTimeout("tcp", r.target, 5*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	if !r.track(out) {
		return
	}
	defer r.untrack(out)
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
	go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
	<-done
}

// setCut starts (true) or ends (false) a partition.
func (r *relay) setCut(cut bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cut = cut
	if cut {
		for c := range r.conns {
			_ = c.Close()
		}
		clear(r.conns)
	}
}

// runCmd runs a command and returns its combined output, for callers that handle failure.
func runCmd(name string, args ...string) (string, error) {
	out, err := exec.Command(name, args...).CombinedOutput()
	return string(out), err
}
