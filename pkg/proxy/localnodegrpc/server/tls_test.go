package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"math/big"
	"net"
	"strings"
	"testing"
	"time"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/localnodegrpc/client"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// selfSigned returns a server certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localnode-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, pool
}

// TestTCPWithTLS: over TCP the server speaks TLS; a client trusting its certificate reads
// the state, a plain-text client does not, and plain TCP is refused unless asked for.
func TestTCPWithTLS(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 3, 2)
	srv, err := New(Options{Proxy: proxyrun.Options{NodeName: testNode, MinSyncInterval: time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(context.Background(), ServeOptions{Address: "tcp://127.0.0.1:0"}); err == nil || !strings.Contains(err.Error(), "TCP needs TLS") {
		t.Errorf("plain TCP without InsecureTCP: err = %v", err)
	}
	cert, pool := selfSigned(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{}, 2)
	go func() { _ = srv.Run(ctx, src); done <- struct{}{} }()
	go func() {
		_ = srv.ServeListener(ctx, l, ServeOptions{TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}})
		done <- struct{}{}
	}()
	t.Cleanup(func() { cancel(); <-done; <-done })
	addr := "tcp://" + l.Addr().String()

	tests := []struct {
		name    string
		tls     *tls.Config
		wantErr bool
	}{
		{"client trusting the server's certificate", &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, false},
		{"plain-text client", nil, true},
		{"client trusting nobody", &tls.Config{RootCAs: x509.NewCertPool(), MinVersion: tls.VersionTLS12}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conn, err := client.Dial(addr, tc.tls)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			wctx, wcancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer wcancel()
			got := 0
			stop := errDone
			_, _, err = client.WatchOnce(wctx, conn, &localnodev1.WatchRequest{}, func(b *client.Batch) error {
				got = len(b.Ops)
				return stop
			})
			if tc.wantErr {
				if err == stop {
					t.Errorf("read the state without a trusted TLS connection")
				}
				return
			}
			if err != stop || got != 3 {
				t.Errorf("err = %v, %d ops, want 3", err, got)
			}
		})
	}
}

var errDone = errorString("done")

type errorString string

func (e errorString) Error() string { return string(e) }

// TestFullStateMode: a watcher asking for full_state gets every batch as a whole state.
func TestFullStateMode(t *testing.T) {
	src := source.NewStatic()
	cluster(src, 5, 2)
	r := start(t, src, t.TempDir(), Options{})
	ch, _ := collect(t, dial(t, r.addr), &localnodev1.WatchRequest{NodeLocal: true, FullState: true})
	if b := next(t, ch); !b.Reset || len(b.Ops) != 5 {
		t.Fatalf("first batch: reset=%v, %d ops", b.Reset, len(b.Ops))
	}
	// A change outside the node-local view (a label) sends nothing; the next real
	// change sends the whole state again.
	labelled := svc(1)
	labelled.Labels = map[string]string{"team": "a"}
	src.SetService(labelled)
	src.SetEndpointSlice(slice(2, 2, 1))
	if b := next(t, ch); !b.Reset || len(b.Ops) != 5 {
		t.Fatalf("after a change: reset=%v, %d ops, want the whole state", b.Reset, len(b.Ops))
	}
	select {
	case b := <-ch:
		t.Errorf("an extra batch (%d ops) for a change the watcher did not ask for", len(b.Ops))
	case <-time.After(100 * time.Millisecond):
	}
}

// TestListenUnix: a stale socket file is replaced, a live one is not taken over, and a
// bad address is refused with the reason.
func TestListenUnix(t *testing.T) {
	dir := t.TempDir()
	addr := "unix://" + dir + "/sub/ln.sock"
	l, err := Listen(addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Listen(addr); err == nil || !strings.Contains(err.Error(), "already listening") {
		t.Errorf("second Listen on a live socket: err = %v", err)
	}
	// Closing the listener Listen returns removes its file; close the socket under it
	// to leave a stale one behind instead.
	l.(*unixListener).UnixListener.Close()
	l, err = Listen(addr)
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	l.Close()
	for _, bad := range []string{"unix://", "http://x", "/run/x.sock"} {
		if _, err := Listen(bad); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("address %q", bad)) {
			t.Errorf("Listen(%q): err = %v", bad, err)
		}
	}
}
