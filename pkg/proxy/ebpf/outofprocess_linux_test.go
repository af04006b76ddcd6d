//go:build linux

package ebpf

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	discovery "k8s.io/api/discovery/v1"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// The out-of-process architecture KPNG proposed: the brain serves the node-local state
// over gRPC (as kube-proxy --localnode-serve does) and the socket load balancer runs in
// a second process that only programs what it is sent (client.RunBackend, with the
// Differ turning the full states into the backend's incremental calls).

const backendEnv = "KUBE_PROXY_SOCKETLB_TEST_BACKEND" // "address|cgroup|pin path"

// backendAgent is the second process: it exits on SIGTERM, leaving the programs
// attached and the maps pinned (the parent cleans up).
func backendAgent(spec string) int {
	parts := strings.Split(spec, "|")
	if len(parts) != 3 {
		fmt.Fprintf(os.Stderr, "bad %s %q\n", backendEnv, spec)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	dp, err := Open(Config{CgroupPath: parts[1], PinPath: parts[2]})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer dp.Close()
	b := NewBackend(dp.Maps(), nil, dp.Adopted)
	err = client.RunBackend(ctx, client.Options{Address: parts[0], Families: []localnode.Family{localnode.IPv4, localnode.IPv6}},
		backend.NewDiffer(b), 100*time.Millisecond)
	if err != nil && ctx.Err() == nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

func TestKernelOutOfProcess(t *testing.T) {
	cg, pin := hostSetup(t)
	t.Cleanup(func() {
		if err := Cleanup(pin); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})

	src := source.NewStatic()
	src.SetNode(st.Node("node-a", ""))
	src.SetService(st.Service("ns", "web", []string{"10.96.0.20"}))
	slice := func(ips ...string) {
		var eps []discovery.Endpoint
		for _, ip := range ips {
			eps = append(eps, st.Endpoint(ip, "node-a"))
		}
		src.SetEndpointSlice(st.EndpointSlice("ns", "web", "web-1", "http", backendPort, eps...))
	}
	slice(v4Backends...)

	srv, err := server.New(server.Options{Proxy: proxyrun.Options{
		NodeName: "node-a", Families: []localnode.Family{localnode.IPv4, localnode.IPv6}, MinSyncInterval: 10 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + filepath.Join(t.TempDir(), "localnode.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	t.Cleanup(func() { cancel(); wg.Wait() })
	wg.Go(func() { _ = srv.Run(ctx, src) })
	wg.Go(func() {
		if err := srv.Serve(ctx, server.ServeOptions{Address: addr}); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})

	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), backendEnv+"="+addr+"|"+cg+"|"+pin)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("socket load balancer running as pid %d, fed over %s", cmd.Process.Pid, addr)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("backend process exited with %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("backend process did not stop on SIGTERM")
			<-waited
		}
	})

	e := &env{cg: cg, pin: pin}
	e.startClient(t)
	const n = 24
	// waitFor polls until n connections in a row reach exactly want.
	waitFor := func(want string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for {
			seen, ok := map[string]int{}, true
			for i := 0; i < n && ok; i++ {
				r := e.do(t, "tcp", "10.96.0.20:80")
				if r.Err != "" || r.Peer != "10.96.0.20:80" {
					ok = false
					break
				}
				seen[strings.Split(r.ServerAddr, ":")[0]]++
			}
			if ok && keys(seen) == want {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("endpoints reached through 10.96.0.20:80: %v (complete: %v), want %s", seen, ok, want)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	waitFor(strings.Join(v4Backends, ","))
	slice(v4Backends[1])
	waitFor(v4Backends[1])
	slice(v4Backends...)
	waitFor(strings.Join(v4Backends, ","))
}
