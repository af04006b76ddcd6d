package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Cluster names what the certificates must cover.
type Cluster struct {
	Dir        string   // output directory
	NodeName   string   // kubelet's node name: its client CN is system:node:<NodeName>
	NodeIP     net.IP   // on the API server's and the kubelet's serving certificates
	ServiceIP  net.IP   // first address of the service range: the "kubernetes" Service
	ServerURL  string   // API server URL written into every kubeconfig
	ExtraNames []string // more DNS names for the API server
	// MoreNodes are the cluster's other nodes. Each gets its own kubelet serving certificate
	// and client kubeconfig (NodeFiles names them): the Node authorizer lets a kubelet act
	// only on its own Node object, so nodes cannot share one identity.
	MoreNodes []Node
}

// Node is one more kubelet of the cluster.
type Node struct {
	Name string
	IP   net.IP
}

// NodeFiles returns the base names Generate writes for an additional node: its serving
// certificate and key (<base>.crt, <base>.key) and its kubeconfig.
func NodeFiles(name string) (base, kubeconfig string) {
	return "kubelet-" + name, "kubelet-" + name + ".conf"
}

// Client is one kubeconfig to write: its file, user and groups.
type Client struct {
	File   string
	CN     string
	Groups []string
}

// Clients are the identities of the control plane, the node and the test client, with the
// names the default RBAC bindings and the Node authorizer recognise.
func Clients(nodeName string) []Client {
	return []Client{
		{File: "admin.conf", CN: "kubernetes-admin", Groups: []string{"system:masters"}},
		{File: "controller-manager.conf", CN: "system:kube-controller-manager"},
		{File: "scheduler.conf", CN: "system:kube-scheduler"},
		{File: "kubelet.conf", CN: "system:node:" + nodeName, Groups: []string{"system:nodes"}},
	}
}

type keyPair struct {
	cert *x509.Certificate
	key  crypto.Signer
}

// Generate writes ca.crt/ca.key, apiserver.crt/.key (also used as the API server's client
// certificate towards the kubelet), kubelet.crt/.key (the kubelet's serving certificate),
// sa.key/sa.pub and a kubeconfig per Client. Existing files are overwritten.
func Generate(c Cluster) error {
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", c.Dir, err)
	}
	now := time.Now().Add(-time.Hour) // tolerate a little clock skew between components
	ca, err := newCert(nil, &x509.Certificate{
		Subject:               pkix.Name{CommonName: "kubernetes"},
		NotBefore:             now,
		NotAfter:              now.AddDate(1, 0, 0),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	})
	if err != nil {
		return fmt.Errorf("cluster CA: %w", err)
	}
	if err := writePair(c.Dir, "ca", ca); err != nil {
		return err
	}

	dns := append([]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
		"kubernetes.default.svc.cluster.local", c.NodeName}, c.ExtraNames...)
	ips := []net.IP{net.ParseIP("127.0.0.1"), c.NodeIP, c.ServiceIP}
	apiserver, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver", Organization: []string{"system:masters"}},
		NotBefore:   now,
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:    dns,
		IPAddresses: ips,
	})
	if err != nil {
		return fmt.Errorf("API server certificate: %w", err)
	}
	if err := writePair(c.Dir, "apiserver", apiserver); err != nil {
		return err
	}

	if err := nodeServing(c.Dir, "kubelet", ca, c.NodeName, c.NodeIP); err != nil {
		return err
	}
	for _, n := range c.MoreNodes {
		if n.Name == "" || n.IP == nil || n.Name == c.NodeName {
			return fmt.Errorf("additional node %q (IP %v): needs a name other than %q and an IP", n.Name, n.IP, c.NodeName)
		}
		base, conf := NodeFiles(n.Name)
		if err := nodeServing(c.Dir, base, ca, n.Name, n.IP); err != nil {
			return err
		}
		if err := writeClient(c.Dir, c.ServerURL, ca, Client{File: conf, CN: "system:node:" + n.Name, Groups: []string{"system:nodes"}}, now); err != nil {
			return err
		}
	}

	// The service-account signer: its public half verifies tokens (kube-proxy's among them).
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("service-account key: %w", err)
	}
	if err := writeKey(filepath.Join(c.Dir, "sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(sa.Public())
	if err != nil {
		return fmt.Errorf("service-account public key: %w", err)
	}
	if err := writePEM(filepath.Join(c.Dir, "sa.pub"), "PUBLIC KEY", pub, 0o644); err != nil {
		return err
	}

	for _, cl := range Clients(c.NodeName) {
		if err := writeClient(c.Dir, c.ServerURL, ca, cl, now); err != nil {
			return err
		}
	}
	return nil
}

// nodeServing writes a kubelet's serving certificate (<base>.crt, <base>.key) for its name
// and address: the API server dials the kubelet by InternalIP for logs and exec.
func nodeServing(dir, base string, ca *keyPair, name string, ip net.IP) error {
	now := time.Now().Add(-time.Hour)
	kp, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		NotBefore:   now,
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{name, "localhost"},
		IPAddresses: []net.IP{ip, net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		return fmt.Errorf("kubelet serving certificate of node %s: %w", name, err)
	}
	return writePair(dir, base, kp)
}

// writeClient writes one client certificate as a kubeconfig.
func writeClient(dir, server string, ca *keyPair, cl Client, now time.Time) error {
	kp, err := newCert(ca, &x509.Certificate{
		Subject:     pkix.Name{CommonName: cl.CN, Organization: cl.Groups},
		NotBefore:   now,
		NotAfter:    now.AddDate(1, 0, 0),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return fmt.Errorf("client certificate %s: %w", cl.CN, err)
	}
	if err := os.WriteFile(filepath.Join(dir, cl.File), Kubeconfig(server, ca.cert.Raw, kp.cert.Raw, mustKeyDER(kp.key), cl.CN), 0o600); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", cl.File, err)
	}
	return nil
}

// Kubeconfig renders a kubeconfig with embedded credentials. JSON is valid YAML, and
// writing it by hand keeps this package free of client-go.
func Kubeconfig(server string, caDER, certDER, keyDER []byte, user string) []byte {
	b64 := func(typ string, der []byte) string {
		return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return fmt.Appendf(nil, `{
  "apiVersion": "v1",
  "kind": "Config",
  "clusters": [{"name": "conformance", "cluster": {"server": %q, "certificate-authority-data": %q}}],
  "users": [{"name": %q, "user": {"client-certificate-data": %q, "client-key-data": %q}}],
  "contexts": [{"name": "conformance", "context": {"cluster": "conformance", "user": %q}}],
  "current-context": "conformance"
}
`, server, b64("CERTIFICATE", caDER), user, b64("CERTIFICATE", certDER), b64("EC PRIVATE KEY", keyDER), user)
}

func newCert(parent *keyPair, tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl.SerialNumber = serial
	signerCert, signerKey := tmpl, crypto.Signer(key)
	if parent != nil {
		signerCert, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, key.Public(), signerKey)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &keyPair{cert: cert, key: key}, nil
}

func mustKeyDER(k crypto.Signer) []byte {
	der, err := x509.MarshalECPrivateKey(k.(*ecdsa.PrivateKey))
	if err != nil {
		panic(err) // a P-256 key generated above always marshals
	}
	return der
}

func writePair(dir, name string, kp *keyPair) error {
	if err := writePEM(filepath.Join(dir, name+".crt"), "CERTIFICATE", kp.cert.Raw, 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), kp.key)
}

func writeKey(path string, k crypto.Signer) error {
	return writePEM(path, "EC PRIVATE KEY", mustKeyDER(k), 0o600)
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
