package app

import (
	"crypto/tls"
	"errors"
	"io"
	"os"
	"testing"
	"time"
)

// TestLocalNodeTLSReload: a rotated server key pair and client CA bundle apply to the
// next connection without a restart, a half-written rotation keeps the previous files'
// values, and the client's rotated key pair is presented at its next connection.
func TestLocalNodeTLSReload(t *testing.T) {
	a, b := newTestPKI(t), newTestPKI(t) // two independent CAs, each with its own leaves
	dir := t.TempDir()
	copyTo := func(dst, src string) {
		t.Helper()
		data, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		// A distinct modification time, as a real rotation minutes later would have.
		if err := os.WriteFile(dst, data, 0o600); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Duration(len(data)) * time.Millisecond)
		if err := os.Chtimes(dst, later, later); err != nil {
			t.Fatal(err)
		}
	}
	srvCert, srvKey, clientCA := dir+"/srv.crt", dir+"/srv.key", dir+"/client-ca.crt"
	cliCert, cliKey := dir+"/cli.crt", dir+"/cli.key"
	copyTo(srvCert, a.serverCert)
	copyTo(srvKey, a.serverKey)
	copyTo(clientCA, a.caFile)
	copyTo(cliCert, a.clientCert)
	copyTo(cliKey, a.clientKey)

	serve := localNodeServeOptions{address: "tcp://127.0.0.1:0", certFile: srvCert, keyFile: srvKey, clientCAFile: clientCA}
	srvTLS, err := serve.tlsConfig()
	if err != nil {
		t.Fatal(err)
	}
	l, err := tls.Listen("tcp", "127.0.0.1:0", srvTLS)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _ = c.(*tls.Conn).Handshake(); c.Close() }()
		}
	}()

	client := clientTLSOptions{flagPrefix: "localnode-source-", certFile: cliCert, keyFile: cliKey, serverName: "localhost"}
	// connect dials with the client's key pair (reloading) trusting caFile, and returns
	// the CA that signed the server's certificate, or the handshake error.
	connect := func(caFile string) (string, error) {
		client.caFile = caFile
		cfg, err := client.tlsConfig()
		if err != nil {
			t.Fatal(err)
		}
		c, err := tls.Dial("tcp", l.Addr().String(), cfg)
		if err != nil {
			return "", err
		}
		defer c.Close()
		// TLS 1.3 reports a rejected client certificate only at the first read.
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err != nil && !isEOF(err) {
			return "", err
		}
		return c.ConnectionState().PeerCertificates[0].Issuer.CommonName, nil
	}

	if _, err := connect(a.caFile); err != nil {
		t.Fatalf("before any rotation: %v", err)
	}

	// Half-written rotation: B's certificate beside A's key. The old pair keeps serving.
	copyTo(srvCert, b.serverCert)
	if _, err := connect(a.caFile); err != nil {
		t.Fatalf("with a half-written server rotation the previous pair must serve: %v", err)
	}
	// Completed: B's key too. A client trusting only A now fails, one trusting B passes.
	copyTo(srvKey, b.serverKey)
	if _, err := connect(a.caFile); err == nil {
		t.Fatal("the server still presents the certificate from before the rotation")
	}
	if _, err := connect(b.caFile); err != nil {
		t.Fatalf("after rotating the server's key pair: %v", err)
	}

	// The client CA bundle rotates to B: A's client certificate is refused, and the
	// client's own rotation to B's key pair is presented at its next connection.
	copyTo(clientCA, b.caFile)
	if _, err := connect(b.caFile); err == nil {
		t.Fatal("a client certificate from the CA rotated out was accepted")
	}
	copyTo(cliCert, b.clientCert)
	copyTo(cliKey, b.clientKey)
	if _, err := connect(b.caFile); err != nil {
		t.Fatalf("after rotating the client CA and the client's key pair: %v", err)
	}
}

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
