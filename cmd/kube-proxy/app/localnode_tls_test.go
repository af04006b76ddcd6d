package app

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// testPKI is a CA and, signed by it, a server certificate for 127.0.0.1 and localhost
// and a client certificate, as PEM files.
type testPKI struct {
	caFile                string
	serverCert, serverKey string
	clientCert, clientKey string
	otherCA               string // a CA that signed neither
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	newKey := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	keyDER := func(k *ecdsa.PrivateKey) []byte {
		der, err := x509.MarshalPKCS8PrivateKey(k)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	serial := int64(0)
	sign := func(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer *ecdsa.PrivateKey) []byte {
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
		der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
		if err != nil {
			t.Fatal(err)
		}
		return der
	}
	newCA := func(name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
		k := newKey()
		tmpl := &x509.Certificate{Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
			KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
		der := sign(tmpl, tmpl, &k.PublicKey, k)
		ca, err := x509.ParseCertificate(der)
		if err != nil {
			t.Fatal(err)
		}
		return ca, k, der
	}
	ca, caKey, caDER := newCA("localnode-test-ca")
	_, _, otherDER := newCA("localnode-other-ca")
	var p testPKI
	p.caFile = write("ca.crt", "CERTIFICATE", caDER)
	p.otherCA = write("other-ca.crt", "CERTIFICATE", otherDER)
	sk := newKey()
	p.serverCert = write("server.crt", "CERTIFICATE", sign(&x509.Certificate{
		Subject: pkix.Name{CommonName: "localnode-server"}, DNSNames: []string{"localhost"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("::1")},
		KeyUsage:    x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}, ca, &sk.PublicKey, caKey))
	p.serverKey = write("server.key", "PRIVATE KEY", keyDER(sk))
	ck := newKey()
	p.clientCert = write("client.crt", "CERTIFICATE", sign(&x509.Certificate{
		Subject:  pkix.Name{CommonName: "localnode-client"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}, ca, &ck.PublicKey, caKey))
	p.clientKey = write("client.key", "PRIVATE KEY", keyDER(ck))
	return p
}

// freeTCPAddress returns a loopback host:port nothing listens on (for a moment).
func freeTCPAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
