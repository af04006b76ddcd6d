package kubeapiserver

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// Identity names one of the client certificates the harness issues.
type Identity string

const (
	// Admin is in group system:masters: everything is allowed.
	Admin Identity = "admin"
	// KubeProxy is CN=system:kube-proxy, the user the bootstrap ClusterRoleBinding
	// system:node-proxier grants kube-proxy's real permissions to.
	KubeProxy Identity = "kube-proxy"
	// Unprivileged is an authenticated user no role is bound to: only discovery
	// (/version, /api, …) is allowed.
	Unprivileged Identity = "unprivileged"
)

// Identities are all identities the harness issues certificates for.
var Identities = []Identity{Admin, KubeProxy, Unprivileged}

// UserName is the Kubernetes user name an identity authenticates as.
func (id Identity) UserName() string {
	switch id {
	case KubeProxy:
		return "system:kube-proxy"
	case Unprivileged:
		return "kube-proxy-test:unprivileged"
	default:
		return "kube-proxy-test:admin"
	}
}

func (id Identity) subject() pkix.Name {
	n := pkix.Name{CommonName: id.UserName()}
	if id == Admin {
		n.Organization = []string{"system:masters"}
	}
	return n
}

// pkiFiles are the paths of everything writePKI produced.
type pkiFiles struct {
	caCert                string
	servingCert           string
	servingKey            string
	saKey, saPub          string
	clientCert, clientKey map[Identity]string
}

// writePKI creates a throwaway CA (valid for two days) and, signed by it, the serving
// certificate for loopback, one client certificate per identity and the service-account
// signing key. All keys are EC P-256: generating them takes milliseconds.
func writePKI(dir string) (*pkiFiles, error) {
	f := &pkiFiles{
		caCert:      filepath.Join(dir, "ca.crt"),
		servingCert: filepath.Join(dir, "apiserver.crt"),
		servingKey:  filepath.Join(dir, "apiserver.key"),
		saKey:       filepath.Join(dir, "sa.key"),
		saPub:       filepath.Join(dir, "sa.pub"),
		clientCert:  map[Identity]string{},
		clientKey:   map[Identity]string{},
	}
	// Backdated so that a clock a little behind the CA's does not reject it.
	notBefore := time.Now().Add(-time.Hour)
	notAfter := notBefore.Add(48 * time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "kube-proxy-test-ca"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if err := writePEM(f.caCert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}

	serial := int64(1)
	issue := func(tmpl *x509.Certificate, certPath, keyPath string) error {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return fmt.Errorf("key for %s: %w", tmpl.Subject.CommonName, err)
		}
		serial++
		tmpl.SerialNumber = big.NewInt(serial)
		tmpl.NotBefore, tmpl.NotAfter = notBefore, notAfter
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			return fmt.Errorf("certificate for %s: %w", tmpl.Subject.CommonName, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return fmt.Errorf("key for %s: %w", tmpl.Subject.CommonName, err)
		}
		if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
			return err
		}
		return writePEM(keyPath, "PRIVATE KEY", keyDER)
	}

	// Clients reach the server as 127.0.0.1 or localhost, also through a relay inside
	// another network namespace, which keeps the address.
	if err := issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default.svc"},
	}, f.servingCert, f.servingKey); err != nil {
		return nil, err
	}
	for _, id := range Identities {
		f.clientCert[id] = filepath.Join(dir, string(id)+".crt")
		f.clientKey[id] = filepath.Join(dir, string(id)+".key")
		if err := issue(&x509.Certificate{
			Subject:     id.subject(),
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}, f.clientCert[id], f.clientKey[id]); err != nil {
			return nil, err
		}
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	saDER, err := x509.MarshalPKCS8PrivateKey(saKey)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	saPubDER, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if err := writePEM(f.saKey, "PRIVATE KEY", saDER); err != nil {
		return nil, err
	}
	if err := writePEM(f.saPub, "PUBLIC KEY", saPubDER); err != nil {
		return nil, err
	}
	return f, nil
}

func writePEM(path, blockType string, der []byte) error {
	data := pem.EncodeToMemory(&pem.Block{Type: blockType, Bytes: der})
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
