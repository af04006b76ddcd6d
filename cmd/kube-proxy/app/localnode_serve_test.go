package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	kubeproxyconfig "k8s.io/kube-proxy/pkg/proxy/apis/config"
	st "k8s.io/kube-proxy/pkg/proxy/source/testing"
)

// TestLocalNodeServe: with --localnode-serve the running proxy serves the node-local
// state of its client's objects, and `kube-proxy state --socket` reads it; without the
// flag nothing is served.
func TestLocalNodeServe(t *testing.T) {
	client := fake.NewClientset(
		st.Service("ns", "web", []string{"10.0.0.1"}),
		st.EndpointSlice("ns", "web", "web-1", "http", 8080, st.Endpoint("10.1.0.1", "node-a"), st.Endpoint("10.1.0.2", "node-b")),
		st.Node("node-a", "z1"),
	)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.MinSyncPeriod.Duration = time.Millisecond
	s := &ProxyServer{Config: cfg, Client: client, NodeName: "node-a"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	off := "unix://" + filepath.Join(t.TempDir(), "off.sock")
	if err := s.startLocalNodeServer(ctx, localNodeServeOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := runState(t, "--socket", off, "--timeout", "200ms"); err == nil {
		t.Error("something is served without --localnode-serve")
	}

	addr := "unix://" + filepath.Join(t.TempDir(), "ln.sock")
	if err := s.startLocalNodeServer(ctx, localNodeServeOptions{address: addr}); err != nil {
		t.Fatal(err)
	}
	waitForState(t, addr)
}

// waitForState reads the state with `kube-proxy state --socket addr` and extra args
// until it is served, and checks it is the one service of TestLocalNodeServe.
func waitForState(t *testing.T, addr string, args ...string) {
	t.Helper()
	var doc stateDoc
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := runState(t, append([]string{"--socket", addr, "-o", "json", "--timeout", "2s"}, args...)...)
		if err == nil {
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing served at %s: %v", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(doc.Services) != 1 || doc.Services[0].Name.Name != "web" || len(doc.Services[0].Endpoints) != 2 {
		t.Errorf("served state: %+v", doc.Services)
	}
}

func testProxyServer(t *testing.T) *ProxyServer {
	client := fake.NewClientset(
		st.Service("ns", "web", []string{"10.0.0.1"}),
		st.EndpointSlice("ns", "web", "web-1", "http", 8080, st.Endpoint("10.1.0.1", "node-a"), st.Endpoint("10.1.0.2", "node-b")),
		st.Node("node-a", "z1"),
	)
	cfg := &kubeproxyconfig.KubeProxyConfiguration{}
	cfg.MinSyncPeriod.Duration = time.Millisecond
	return &ProxyServer{Config: cfg, Client: client, NodeName: "node-a"}
}

// TestLocalNodeServeOccupiedPathFailsStartup: an address that cannot be served fails
// start-up with the flag and the path named, and what is at the path stays as it was.
// Before, the file was replaced by the socket (and removed at exit), and the failure
// only logged.
func TestLocalNodeServeOccupiedPathFailsStartup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	path := filepath.Join(t.TempDir(), "ln.sock")
	if err := os.WriteFile(path, []byte("precious"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := testProxyServer(t).startLocalNodeServer(ctx, localNodeServeOptions{address: "unix://" + path})
	if err == nil || !strings.Contains(err.Error(), "--localnode-serve") || !strings.Contains(err.Error(), path) {
		t.Errorf("err = %v, want one naming --localnode-serve and %s", err, path)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "precious" {
		t.Errorf("the file at the path now holds %q, %v", b, err)
	}
}

// TestLocalNodeServeMutualTLS: a non-loopback-capable server with TLS and a client CA
// serves `kube-proxy state` only to a client that trusts its CA and presents a
// certificate of the client CA.
func TestLocalNodeServeMutualTLS(t *testing.T) {
	pki := newTestPKI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr := "tcp://" + freeTCPAddress(t)
	o := localNodeServeOptions{address: addr, certFile: pki.serverCert, keyFile: pki.serverKey, clientCAFile: pki.caFile}
	if err := testProxyServer(t).startLocalNodeServer(ctx, o); err != nil {
		t.Fatal(err)
	}
	waitForState(t, addr, "--socket-ca-file", pki.caFile, "--socket-tls-cert-file", pki.clientCert, "--socket-tls-private-key-file", pki.clientKey)

	tests := []struct {
		name string
		args []string
	}{
		{"plain text", nil},
		{"TLS without a client certificate", []string{"--socket-ca-file", pki.caFile}},
		{"TLS trusting another CA", []string{"--socket-ca-file", pki.otherCA, "--socket-tls-cert-file", pki.clientCert, "--socket-tls-private-key-file", pki.clientKey}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if out, err := runState(t, append([]string{"--socket", addr, "-o", "json", "--timeout", "2s"}, tc.args...)...); err == nil {
				t.Errorf("read the state:\n%s", out)
			}
		})
	}
}

// TestLocalNodeServeFlagErrors: a --localnode-serve, --localnode-source or TLS flag that
// cannot be used fails start-up, naming the flag and its value; before, a bad address
// was only logged, a relative socket path served from the working directory, and plain
// TCP on any address accepted.
func TestLocalNodeServeFlagErrors(t *testing.T) {
	pki := newTestPKI(t)
	missing := filepath.Join(t.TempDir(), "missing.crt")
	tests := []struct {
		name string
		args []string
		want []string // nil: valid
	}{
		{name: "absolute unix socket", args: []string{"--localnode-serve", "unix:///run/kube-proxy/ln.sock"}},
		{name: "loopback TCP", args: []string{"--localnode-serve", "tcp://127.0.0.1:7777"}},
		{name: "IPv6 loopback TCP", args: []string{"--localnode-serve", "tcp://[::1]:7777"}},
		{name: "localhost TCP", args: []string{"--localnode-serve", "tcp://localhost:7777"}},
		{name: "any address with TLS", args: []string{"--localnode-serve", "tcp://0.0.0.0:7777",
			"--localnode-serve-tls-cert-file", pki.serverCert, "--localnode-serve-tls-private-key-file", pki.serverKey, "--localnode-serve-client-ca-file", pki.caFile}},
		{name: "any address without TLS", args: []string{"--localnode-serve", "tcp://0.0.0.0:7777"},
			want: []string{"--localnode-serve", `"tcp://0.0.0.0:7777"`, "loopback", "--localnode-serve-tls-cert-file"}},
		{name: "relative socket path", args: []string{"--localnode-serve", "unix://relative.sock"},
			want: []string{"--localnode-serve", `"unix://relative.sock"`, "not absolute"}},
		{name: "unknown scheme", args: []string{"--localnode-serve", "http://localhost:7777"},
			want: []string{"--localnode-serve", `"http://localhost:7777"`}},
		{name: "no port", args: []string{"--localnode-serve", "tcp://127.0.0.1"},
			want: []string{"--localnode-serve", `"tcp://127.0.0.1"`}},
		{name: "certificate without key", args: []string{"--localnode-serve", "tcp://0.0.0.0:7777", "--localnode-serve-tls-cert-file", pki.serverCert},
			want: []string{"--localnode-serve-tls-private-key-file", "both or neither"}},
		{name: "missing certificate file", args: []string{"--localnode-serve", "tcp://0.0.0.0:7777", "--localnode-serve-tls-cert-file", missing, "--localnode-serve-tls-private-key-file", pki.serverKey},
			want: []string{"--localnode-serve-tls-cert-file", missing}},
		{name: "missing client CA file", args: []string{"--localnode-serve", "tcp://0.0.0.0:7777",
			"--localnode-serve-tls-cert-file", pki.serverCert, "--localnode-serve-tls-private-key-file", pki.serverKey, "--localnode-serve-client-ca-file", missing},
			want: []string{"--localnode-serve-client-ca-file", missing}},
		{name: "client CA without TLS", args: []string{"--localnode-serve", "tcp://127.0.0.1:7777", "--localnode-serve-client-ca-file", pki.caFile},
			want: []string{"--localnode-serve-client-ca-file", "requires --localnode-serve-tls-cert-file"}},
		{name: "TLS on a unix socket", args: []string{"--localnode-serve", "unix:///run/ln.sock", "--localnode-serve-tls-cert-file", pki.serverCert, "--localnode-serve-tls-private-key-file", pki.serverKey},
			want: []string{"--localnode-serve-tls-cert-file", "tcp://"}},
		{name: "TLS without an address", args: []string{"--localnode-serve-tls-cert-file", pki.serverCert},
			want: []string{"--localnode-serve-tls-cert-file", "requires a tcp:// --localnode-serve"}},
		{name: "source over TLS", args: []string{"--localnode-source", "tcp://10.0.0.1:7777", "--localnode-source-ca-file", pki.caFile,
			"--localnode-source-tls-cert-file", pki.clientCert, "--localnode-source-tls-private-key-file", pki.clientKey}},
		{name: "source on another host without TLS", args: []string{"--localnode-source", "tcp://10.0.0.1:7777"},
			want: []string{"--localnode-source", `"tcp://10.0.0.1:7777"`, "--localnode-source-ca-file"}},
		{name: "source with a missing CA file", args: []string{"--localnode-source", "tcp://10.0.0.1:7777", "--localnode-source-ca-file", missing},
			want: []string{"--localnode-source-ca-file", missing}},
		{name: "source client certificate without CA", args: []string{"--localnode-source", "tcp://127.0.0.1:7777", "--localnode-source-tls-cert-file", pki.clientCert, "--localnode-source-tls-private-key-file", pki.clientKey},
			want: []string{"--localnode-source-tls-cert-file", "requires --localnode-source-ca-file"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseAndComplete(t, tc.args)
			if tc.want == nil {
				if err != nil {
					t.Errorf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

// TestLocalNodeServeConfigFile: a v1alpha2 file's localNode section configures the
// server, is validated like the flags, and a flag on the command line wins.
func TestLocalNodeServeConfigFile(t *testing.T) {
	pki := newTestPKI(t)
	tests := []struct {
		name    string
		config  string
		args    []string
		want    localNodeServeOptions
		wantErr string
	}{
		{
			name:   "from the file",
			config: "localNode:\n  serveAddress: tcp://0.0.0.0:7777\n  tlsCertFile: " + pki.serverCert + "\n  tlsPrivateKeyFile: " + pki.serverKey + "\n  clientCAFile: " + pki.caFile + "\n",
			want:   localNodeServeOptions{address: "tcp://0.0.0.0:7777", certFile: pki.serverCert, keyFile: pki.serverKey, clientCAFile: pki.caFile},
		},
		{
			name:   "the flag wins",
			config: "localNode:\n  serveAddress: unix:///run/a.sock\n",
			args:   []string{"--localnode-serve", "unix:///run/b.sock"},
			want:   localNodeServeOptions{address: "unix:///run/b.sock"},
		},
		{
			name:    "validated, naming the file",
			config:  "localNode:\n  serveAddress: tcp://0.0.0.0:7777\n",
			wantErr: "localNode in --config",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"--config=" + writeConfig(t, v1alpha2Header+"mode: nftables\n"+tc.config)}, tc.args...)
			o, err := parseAndComplete(t, args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.localNodeServe != tc.want {
				t.Errorf("got %+v, want %+v", o.localNodeServe, tc.want)
			}
		})
	}
}
