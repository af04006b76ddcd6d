package app

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"k8s.io/klog/v2"
)

// reloadingFiles holds a value loaded from files and loads it again when any of them
// changes, checked at each use. Certificates served over --localnode-serve and
// presented by --localnode-source are rotated on disk (cert-manager, a Secret volume's
// symlink swap); picking them up at the next handshake avoids a restart, which would
// cost a full resync. A rotation caught half-written (the new certificate beside the old
// key) fails to load: the last good value is kept, the failure logged once, and the
// load tried again at the next use.
type reloadingFiles[T any] struct {
	files []string
	load  func() (T, error)

	mu       sync.Mutex
	stamp    string // the files' size and modification time at the last load attempt
	val      T
	failedAt string // stamp whose load failed, so a bad rotation is logged once
}

// newReloadingFiles loads the value once; an error there is returned, as at start-up a
// wrong file must stop kube-proxy rather than serve nothing.
func newReloadingFiles[T any](load func() (T, error), files ...string) (*reloadingFiles[T], error) {
	r := &reloadingFiles[T]{files: files, load: load}
	r.stamp = r.currentStamp()
	v, err := load()
	if err != nil {
		return nil, err
	}
	r.val = v
	return r, nil
}

func (r *reloadingFiles[T]) currentStamp() string {
	var b strings.Builder
	for _, f := range r.files {
		// Stat follows symbolic links, so a Secret volume's ..data swap changes it.
		fi, err := os.Stat(f)
		if err != nil {
			fmt.Fprintf(&b, "%s:missing;", f)
			continue
		}
		fmt.Fprintf(&b, "%s:%d:%d;", f, fi.Size(), fi.ModTime().UnixNano())
	}
	return b.String()
}

// get returns the value, loaded again first if a file changed since the last attempt.
func (r *reloadingFiles[T]) get() T {
	stamp := r.currentStamp()
	r.mu.Lock()
	defer r.mu.Unlock()
	if stamp == r.stamp {
		return r.val
	}
	v, err := r.load()
	if err != nil {
		if r.failedAt != stamp {
			klog.Background().Error(err, "Reloading TLS files failed; keeping the previous ones", "files", r.files)
			r.failedAt = stamp
		}
		// The stamp is not recorded, so a write that completes the rotation later
		// (or leaves the files as they are now) is loaded at a later use.
		return r.val
	}
	r.stamp, r.val, r.failedAt = stamp, v, ""
	klog.Background().Info("Reloaded TLS files", "files", r.files)
	return v
}

// reloadingKeyPair loads a certificate and key, named by their flags in errors.
func reloadingKeyPair(certFlag, certFile, keyFlag, keyFile string) (*reloadingFiles[*tls.Certificate], error) {
	return newReloadingFiles(func() (*tls.Certificate, error) {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%s %q, %s %q: %w", certFlag, certFile, keyFlag, keyFile, err)
		}
		return &cert, nil
	}, certFile, keyFile)
}

// reloadingCertPool loads a CA bundle, named by its flag in errors.
func reloadingCertPool(flag, file string) (*reloadingFiles[*x509.CertPool], error) {
	return newReloadingFiles(func() (*x509.CertPool, error) { return loadCertPool(flag, file) }, file)
}

// verifyClientAgainst checks a client's certificate chain against the CA bundle as it is
// now. tls.Config.ClientCAs is fixed once the server is built, so a rotated bundle is
// applied here instead (with tls.RequireAnyClientCert, which leaves the chain to us).
func verifyClientAgainst(pool *reloadingFiles[*x509.CertPool]) func([][]byte, [][]*x509.Certificate) error {
	return func(raw [][]byte, _ [][]*x509.Certificate) error {
		if len(raw) == 0 {
			return errors.New("no client certificate")
		}
		certs := make([]*x509.Certificate, 0, len(raw))
		for _, der := range raw {
			c, err := x509.ParseCertificate(der)
			if err != nil {
				return fmt.Errorf("client certificate: %w", err)
			}
			certs = append(certs, c)
		}
		inter := x509.NewCertPool()
		for _, c := range certs[1:] {
			inter.AddCert(c)
		}
		_, err := certs[0].Verify(x509.VerifyOptions{
			Roots:         pool.get(),
			Intermediates: inter,
			KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		})
		if err != nil {
			return fmt.Errorf("client certificate %q: %w", certs[0].Subject.CommonName, err)
		}
		return nil
	}
}
