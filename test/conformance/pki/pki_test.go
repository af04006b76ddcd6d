package pki

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"testing"
)

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	c := Cluster{Dir: dir, NodeName: "node-1", NodeIP: net.ParseIP("198.18.0.1"), ServiceIP: net.ParseIP("198.19.0.1"), ServerURL: "https://127.0.0.1:6443",
		MoreNodes: []Node{{Name: "node-2", IP: net.ParseIP("198.18.0.2")}}}
	if err := Generate(c); err != nil {
		t.Fatal(err)
	}
	ca := readCert(t, filepath.Join(dir, "ca.crt"))
	roots := x509.NewCertPool()
	roots.AddCert(ca)

	// Serving certificates must verify for every name clients dial.
	for _, tc := range []struct {
		file, host string
	}{
		{"apiserver.crt", "127.0.0.1"},
		{"apiserver.crt", "198.19.0.1"},
		{"apiserver.crt", "kubernetes.default.svc"},
		{"kubelet.crt", "198.18.0.1"},
		{"kubelet.crt", "node-1"},
		{"kubelet-node-2.crt", "198.18.0.2"},
		{"kubelet-node-2.crt", "node-2"},
	} {
		cert := readCert(t, filepath.Join(dir, tc.file))
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.host}); err != nil {
			t.Errorf("%s for %s: %v", tc.file, tc.host, err)
		}
	}

	// A node's serving certificate must not be valid for another node's address: each
	// kubelet is its own identity.
	if _, err := readCert(t, filepath.Join(dir, "kubelet.crt")).Verify(x509.VerifyOptions{Roots: roots, DNSName: "198.18.0.2"}); err == nil {
		t.Errorf("kubelet.crt (node-1) verifies for node-2's address")
	}

	// Each kubeconfig's client certificate chains to the CA with the identity RBAC expects.
	_, conf2 := NodeFiles("node-2")
	clients := append(Clients("node-1"), Client{File: conf2, CN: "system:node:node-2", Groups: []string{"system:nodes"}})
	for _, cl := range clients {
		data, err := os.ReadFile(filepath.Join(dir, cl.File))
		if err != nil {
			t.Fatal(err)
		}
		var kc struct {
			Users []struct {
				User struct {
					Cert string `json:"client-certificate-data"`
				} `json:"user"`
			} `json:"users"`
		}
		if err := json.Unmarshal(data, &kc); err != nil {
			t.Fatalf("%s: %v", cl.File, err)
		}
		raw, _ := base64.StdEncoding.DecodeString(kc.Users[0].User.Cert)
		block, _ := pem.Decode(raw)
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("%s: %v", cl.File, err)
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("%s: %v", cl.File, err)
		}
		if cert.Subject.CommonName != cl.CN || len(cert.Subject.Organization) != len(cl.Groups) {
			t.Errorf("%s: subject %v, want CN %s groups %v", cl.File, cert.Subject, cl.CN, cl.Groups)
		}
	}
	if got := Clients("node-1")[3].CN; got != "system:node:node-1" {
		t.Errorf("kubelet identity %q: the Node authorizer needs system:node:<name>", got)
	}
}

func TestGenerateRejectsBadNodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		node Node
	}{
		{"no name", Node{IP: net.ParseIP("198.18.0.2")}},
		{"no IP", Node{Name: "node-2"}},
		{"the first node's name", Node{Name: "node-1", IP: net.ParseIP("198.18.0.2")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Cluster{Dir: t.TempDir(), NodeName: "node-1", NodeIP: net.ParseIP("198.18.0.1"), ServiceIP: net.ParseIP("198.19.0.1"),
				ServerURL: "https://127.0.0.1:6443", MoreNodes: []Node{tc.node}}
			if err := Generate(c); err == nil {
				t.Errorf("Generate accepted additional node %+v", tc.node)
			}
		})
	}
}
