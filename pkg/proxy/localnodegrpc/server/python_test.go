package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// pythonClient is the example client, examples/python-client/watch.py.
var pythonClient = filepath.Join("..", "..", "..", "..", "examples", "python-client", "watch.py")

// pythonSetup returns the interpreter and a directory with the messages protoc generates
// from localnode.proto, as examples/python-client/README.md says to make them, or skips.
func pythonSetup(t *testing.T) (python, gen string) {
	t.Helper()
	python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("needs %s (Debian's python3)", python)
	}
	protoc, err := exec.LookPath("protoc")
	if err != nil {
		t.Skip("needs protoc (Debian's protobuf-compiler) to generate the Python messages")
	}
	if out, err := exec.Command(python, "-c", "import grpc, google.protobuf").CombinedOutput(); err != nil {
		t.Skipf("needs Debian's python3-grpcio and python3-protobuf: %v\n%s", err, out)
	}
	gen = t.TempDir()
	if out, err := exec.Command(protoc, "-I", "../api/v1", "--python_out="+gen, "localnode.proto").CombinedOutput(); err != nil {
		t.Fatalf("protoc --python_out: %v\n%s", err, out)
	}
	return python, gen
}

// dualStack fills src with the cluster of cluster(src, n, eps) plus one IPv6 service.
func dualStack(src *source.Static, n, eps int) {
	cluster(src, n, eps)
	src.SetService(st.Service("ns", "v6", []string{"fd00::a"}))
	src.SetEndpointSlice(st.EndpointSlice("ns", "v6", "v6-1", "http", 8080, st.Endpoint("fd00:1::1", testNode)))
}

// pythonLines is what watch.py prints for services: one line per service port of
// every family, sorted by family and name as the client sorts them.
func pythonLines(t *testing.T, srv *Server, only ...string) string {
	t.Helper()
	var b strings.Builder
	for _, f := range []localnode.Family{localnode.IPv4, localnode.IPv6} {
		state, err := srv.State(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, svc := range state.Services {
			if len(only) > 0 && !slices.Contains(only, svc.Name.Name) {
				continue
			}
			var eps []string
			for _, e := range svc.ClusterEndpoints() {
				eps = append(eps, e.String())
			}
			fam := "IPV4"
			if f == localnode.IPv6 {
				fam = "IPV6"
			}
			fmt.Fprintf(&b, "%s %s %s %s\n", fam, svc.Name, net.JoinHostPort(svc.ClusterIP.String(), fmt.Sprint(svc.Port)), strings.Join(eps, ","))
		}
	}
	return b.String()
}

// TestPythonClient reads the state from Python with Debian's python3-grpcio and
// python3-protobuf, the messages generated from localnode.proto by protoc: another
// language needs the .proto file and nothing else.
func TestPythonClient(t *testing.T) {
	python, gen := pythonSetup(t)
	src := source.NewStatic()
	dualStack(src, 3, 2)
	r := start(t, src, t.TempDir(), Options{Proxy: proxyrun.Options{Families: []localnode.Family{localnode.IPv4, localnode.IPv6}}})
	out, err := exec.Command(python, pythonClient, "--once", "--generated", gen, r.addr).CombinedOutput()
	if err != nil {
		t.Fatalf("python client: %v\n%s", err, out)
	}
	want := pythonLines(t, r.srv) + fmt.Sprintf("revision %d\n", r.srv.Revision())
	if !strings.Contains(want, "IPV6 ns/v6:http/TCP [fd00::a]:80 [fd00:1::1]:8080\n") {
		t.Fatalf("the expected output has no IPv6 line in brackets:\n%s", want)
	}
	if string(out) != want {
		t.Errorf("python client read:\n%s\nwant:\n%s", out, want)
	}
}

// relay forwards unix-socket connections to target; cut closes them all and refuses
// new ones until resume, so a test can break a client's stream and keep it away
// without stopping the server.
type relay struct {
	addr   string
	mu     sync.Mutex
	conns  []net.Conn
	paused bool
}

func newRelay(t *testing.T, target string) *relay {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{addr: "unix://" + path}
	t.Cleanup(func() { l.Close(); r.cut() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			r.mu.Lock()
			paused := r.paused
			r.mu.Unlock()
			if paused {
				c.Close()
				continue
			}
			s, err := net.Dial("unix", strings.TrimPrefix(target, "unix://"))
			if err != nil {
				c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, s)
			r.mu.Unlock()
			go func() { _, _ = io.Copy(s, c); s.Close() }()
			go func() { _, _ = io.Copy(c, s); c.Close() }()
		}
	}()
	return r
}

func (r *relay) cut() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = true
	for _, c := range r.conns {
		c.Close()
	}
	r.conns = nil
}

func (r *relay) resume() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused = false
}

// TestPythonClientResumes streams with the example client, breaks its connection,
// changes the state while it is away, and checks that it resumes from the revision it
// had: it prints only the change, not the whole state again.
func TestPythonClientResumes(t *testing.T) {
	python, gen := pythonSetup(t)
	src := source.NewStatic()
	dualStack(src, 3, 2)
	r := start(t, src, t.TempDir(), Options{Proxy: proxyrun.Options{Families: []localnode.Family{localnode.IPv4, localnode.IPv6}}})
	rl := newRelay(t, r.addr)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, python, pythonClient, "--generated", gen, rl.addr)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr lockedBuilder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	lines := bufio.NewScanner(stdout)
	// batch reads one synced batch: the lines up to and including "revision N".
	batch := func() string {
		var b strings.Builder
		for lines.Scan() {
			b.WriteString(lines.Text() + "\n")
			if strings.HasPrefix(lines.Text(), "revision ") {
				return b.String()
			}
		}
		t.Fatalf("client output ended after %q: %v\nstderr:\n%s", b.String(), lines.Err(), stderr.String())
		return ""
	}

	first := r.srv.Revision()
	if got, want := batch(), pythonLines(t, r.srv)+fmt.Sprintf("revision %d\n", first); got != want {
		t.Fatalf("first batch:\n%s\nwant:\n%s", got, want)
	}

	rl.cut()
	src.SetEndpointSlice(slice(1, 2, 1)) // svc-1's first endpoint moves
	waitFor(t, func() bool { return r.srv.Revision() > first })
	waitFor(t, func() bool { return strings.Contains(stderr.String(), "resuming") })
	rl.resume()
	got := batch()
	want := pythonLines(t, r.srv, "svc-1") + fmt.Sprintf("revision %d\n", r.srv.Revision())
	if got != want {
		t.Errorf("after reconnecting the client printed:\n%s\nwant only the change:\n%s\nstderr:\n%s", got, want, stderr.String())
	}
	if want := fmt.Sprintf("resuming from revision %d", first); !strings.Contains(stderr.String(), want) {
		t.Errorf("client's stderr does not say %q:\n%s", want, stderr.String())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
	}
}

type lockedBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lockedBuilder) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuilder) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
