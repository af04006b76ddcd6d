//go:build linux

package kubeapiserver

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// DefaultServiceClusterIPRange is the Service CIDR when Options leaves it empty; the
// API server creates the ServiceCIDR "kubernetes" for it and gives default/kubernetes
// its first address.
const DefaultServiceClusterIPRange = "10.96.0.0/16"

// Options configure a Server. The zero value is a working single-stack IPv4 server
// with its own etcd.
type Options struct {
	// ServiceClusterIPRange is --service-cluster-ip-range (one CIDR, or two for
	// dual-stack).
	ServiceClusterIPRange string
	// Etcd is shared with other servers when set (each server keeps to its own key
	// prefix); nil starts a private etcd that Close stops.
	Etcd *Etcd
	// ReadyTimeout bounds each wait for /readyz; 0 means 60s. Start-up is CPU-bound
	// and takes 3 s on an idle machine but 10 s and more with both cores busy.
	ReadyTimeout time.Duration
	// ExtraArgs are appended to the kube-apiserver command line.
	ExtraArgs []string
	// Dir receives certificates, kubeconfigs and logs; empty means a new temporary
	// directory that Close removes.
	Dir string
}

// Server is a running kube-apiserver on 127.0.0.1 with its etcd.
type Server struct {
	// Dir holds ca.crt, <identity>.{crt,key}, <identity>.kubeconfig and the logs.
	Dir string
	// LogPath is kube-apiserver's log (appended to across restarts).
	LogPath string

	opts    Options
	bins    Binaries
	pki     *pkiFiles
	etcd    *Etcd
	ownEtcd bool
	ownDir  bool
	prefix  string

	mu   sync.Mutex
	port int
	proc *process
}

// New starts etcd (unless shared) and kube-apiserver and waits until /readyz passes.
// An API server that exits while starting (etcd stalls, a port taken meanwhile) is
// started once more, on a new port. The caller must Close the server.
func New(bins Binaries, opts Options) (*Server, error) {
	if opts.ServiceClusterIPRange == "" {
		opts.ServiceClusterIPRange = DefaultServiceClusterIPRange
	}
	if opts.ReadyTimeout == 0 {
		opts.ReadyTimeout = 60 * time.Second
	}
	s := &Server{opts: opts, bins: bins, Dir: opts.Dir, etcd: opts.Etcd}
	if s.Dir == "" {
		dir, err := os.MkdirTemp("", "kube-apiserver-test-")
		if err != nil {
			return nil, fmt.Errorf("server dir: %w", err)
		}
		s.Dir, s.ownDir = dir, true
	}
	s.LogPath = filepath.Join(s.Dir, "kube-apiserver.log")
	ok := false
	defer func() {
		if !ok {
			s.Close()
		}
	}()

	var err error
	if s.pki, err = writePKI(s.Dir); err != nil {
		return nil, err
	}
	if s.etcd == nil {
		if s.etcd, err = StartEtcd(bins.Etcd, s.Dir); err != nil {
			return nil, err
		}
		s.ownEtcd = true
	}
	// A per-server prefix lets servers share an etcd without seeing each other's objects.
	s.prefix = "/registry-" + randomHex(6)

	for attempt := 1; ; attempt++ {
		if s.port, err = freePort(); err != nil {
			return nil, err
		}
		err = s.startAndWait()
		if err == nil {
			break
		}
		if attempt == 2 || !errors.Is(err, errExited) {
			return nil, fmt.Errorf("%w\n--- kube-apiserver log tail ---\n%s", err, tail(s.LogPath, 40))
		}
	}
	for _, id := range Identities {
		if err := s.WriteKubeconfig(id, s.URL(), s.Kubeconfig(id)); err != nil {
			return nil, err
		}
	}
	ok = true
	return s, nil
}

// Start is New for a test: it skips (or fails, when Required) without the binaries,
// fails the test when the server does not come up, and stops it in t.Cleanup, printing
// the end of the server's log if the test failed.
func Start(tb testing.TB, opts Options) *Server {
	tb.Helper()
	bins := RequireBinaries(tb)
	if opts.Dir == "" {
		opts.Dir = tb.TempDir()
	}
	began := time.Now()
	s, err := New(bins, opts)
	if err != nil {
		tb.Fatalf("starting kube-apiserver: %v", err)
	}
	tb.Logf("kube-apiserver %s ready on %s after %s (logs in %s)", APIServerVersion, s.URL(), time.Since(began).Round(time.Millisecond), s.Dir)
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("--- kube-apiserver log tail ---\n%s", tail(s.LogPath, 40))
		}
		s.Close()
	})
	return s
}

var errExited = errors.New("kube-apiserver exited before it was ready")

func (s *Server) startAndWait() error {
	args := []string{
		"--etcd-servers=" + s.etcd.URL,
		"--etcd-prefix=" + s.prefix,
		"--bind-address=127.0.0.1",
		// A loopback advertise address is fatal with the default lease endpoint
		// reconciler, and there are no Endpoints to reconcile here anyway.
		"--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none",
		"--secure-port=" + strconv.Itoa(s.port),
		"--tls-cert-file=" + s.pki.servingCert,
		"--tls-private-key-file=" + s.pki.servingKey,
		"--client-ca-file=" + s.pki.caCert,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + s.pki.saPub,
		"--service-account-signing-key-file=" + s.pki.saKey,
		"--service-cluster-ip-range=" + s.opts.ServiceClusterIPRange,
		"--authorization-mode=RBAC",
		// Nothing creates default ServiceAccounts (there are no controllers), which
		// this admission plugin would require of every Pod.
		"--disable-admission-plugins=ServiceAccount",
		"--profiling=false",
	}
	args = append(args, s.opts.ExtraArgs...)
	proc, err := startProcess("kube-apiserver", s.LogPath, s.bins.APIServer, args...)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()

	client, err := s.httpClient(Admin)
	if err != nil {
		proc.stop(0)
		return err
	}
	err = waitFor(proc, s.opts.ReadyTimeout, func() error {
		resp, err := client.Get(s.URL() + "/readyz")
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			return fmt.Errorf("/readyz %d: %s", resp.StatusCode, lastLines(string(body), 5))
		}
		return nil
	})
	if err == nil {
		return nil
	}
	if gone, _ := proc.exited(); gone {
		err = fmt.Errorf("%w: %w", errExited, err)
	}
	proc.stop(0)
	return err
}

func (s *Server) httpClient(id Identity) (*http.Client, error) {
	caPEM, err := os.ReadFile(s.pki.caCert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	cert, err := tls.LoadX509KeyPair(s.pki.clientCert[id], s.pki.clientKey[id])
	if err != nil {
		return nil, fmt.Errorf("client certificate of %s: %w", id, err)
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}},
			DisableKeepAlives: true,
		},
	}, nil
}

// URL is the server's address, https://127.0.0.1:port.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("https://127.0.0.1:%d", s.port)
}

// Port is the server's secure port on 127.0.0.1; it stays the same across Restart.
func (s *Server) Port() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.port
}

// CAFile is the CA that signed the serving and client certificates.
func (s *Server) CAFile() string { return s.pki.caCert }

// Kubeconfig is the path of a kubeconfig for id pointing at URL.
func (s *Server) Kubeconfig(id Identity) string {
	return filepath.Join(s.Dir, string(id)+".kubeconfig")
}

// WriteKubeconfig writes a kubeconfig for id with the given server URL, for clients
// that reach the server some other way (a relay in another network namespace). The
// URL's host must be 127.0.0.1, ::1 or localhost for the serving certificate to match.
func (s *Server) WriteKubeconfig(id Identity, serverURL, path string) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["kube-proxy-test"] = &clientcmdapi.Cluster{Server: serverURL, CertificateAuthority: s.pki.caCert}
	cfg.AuthInfos[string(id)] = &clientcmdapi.AuthInfo{ClientCertificate: s.pki.clientCert[id], ClientKey: s.pki.clientKey[id]}
	cfg.Contexts["kube-proxy-test"] = &clientcmdapi.Context{Cluster: "kube-proxy-test", AuthInfo: string(id)}
	cfg.CurrentContext = "kube-proxy-test"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("kubeconfig for %s: %w", id, err)
	}
	return nil
}

// RESTConfig is a client configuration for id.
func (s *Server) RESTConfig(id Identity) *rest.Config {
	return &rest.Config{
		Host: s.URL(),
		TLSClientConfig: rest.TLSClientConfig{
			CAFile:   s.pki.caCert,
			CertFile: s.pki.clientCert[id],
			KeyFile:  s.pki.clientKey[id],
		},
		// Tests create objects in bursts; client-side throttling would only slow them.
		QPS:   -1,
		Burst: -1,
	}
}

// Client is a clientset for id.
func (s *Server) Client(id Identity) (kubernetes.Interface, error) {
	return kubernetes.NewForConfig(s.RESTConfig(id))
}

// Stop shuts the API server down gracefully (SIGTERM; killed after 30s), leaving etcd
// and the port reserved for Restart. Clients see their watches end and connections
// refused until Restart.
func (s *Server) Stop() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	p.stop(30 * time.Second)
}

// Kill ends the API server at once, as a crash would.
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	p.stop(0)
}

// Restart stops the API server if it runs and starts it again on the same port with
// the same etcd data, waiting for /readyz (one more try if it exits while starting).
func (s *Server) Restart() error {
	s.Stop()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		if err = s.startAndWait(); err == nil || !errors.Is(err, errExited) {
			break
		}
	}
	if err != nil {
		return fmt.Errorf("restarting kube-apiserver on port %d: %w\n--- kube-apiserver log tail ---\n%s", s.Port(), err, tail(s.LogPath, 40))
	}
	return nil
}

// Running reports whether the API server process is alive.
func (s *Server) Running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return false
	}
	gone, _ := s.proc.exited()
	return !gone
}

// LogTail returns the last n lines of the API server's log.
func (s *Server) LogTail(n int) string { return tail(s.LogPath, n) }

// Close kills the API server, and etcd unless shared, and removes a temporary Dir.
func (s *Server) Close() {
	s.Kill()
	if s.ownEtcd {
		s.etcd.Close()
		s.etcd = nil
	}
	if s.ownDir {
		_ = os.RemoveAll(s.Dir)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}
