//go:build linux

package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// runMainEnv makes this test binary be the userspaceproxy command itself (TestMain calls
// main with the process's arguments), so the out-of-process test runs the real program.
const runMainEnv = "USERSPACEPROXY_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// startOutOfProcess serves src's node-local state on a unix socket from this process
// (the brain, as kube-proxy --localnode-serve would) and starts the userspaceproxy
// program as a second process reading it with --socket. At cleanup the program is
// stopped with SIGTERM and must have removed its service addresses.
func startOutOfProcess(t *testing.T, src source.Source) {
	srv, err := server.New(server.Options{Proxy: proxyrun.Options{
		NodeName: thisNode, Families: []localnode.Family{localnode.IPv4, localnode.IPv6}, MinSyncInterval: 10 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	addr := "unix://" + filepath.Join(t.TempDir(), "localnode.sock")
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = srv.Run(ctx, src) })
	wg.Go(func() {
		if err := srv.Serve(ctx, server.ServeOptions{Address: addr}); err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	cmd := exec.Command(os.Args[0], "--socket", addr, "--interface", iface, "--ipv6", "-v=2")
	cmd.Env = append(os.Environ(), runMainEnv+"=1")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Logf("userspaceproxy running as pid %d, fed over %s", cmd.Process.Pid, addr)
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		waited := make(chan error, 1)
		go func() { waited <- cmd.Wait() }()
		select {
		case err := <-waited:
			if err != nil {
				t.Errorf("userspaceproxy exited with %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("userspaceproxy did not stop on SIGTERM")
			<-waited
		}
		cancel()
		wg.Wait()
		if got := dummyAddrs(t); len(got) != 0 {
			t.Errorf("service addresses left on %s after the program stopped: %v", iface, got)
		}
	})
}
