package app

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/features"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	lnserver "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// localNodeServeOptions are --localnode-serve and its TLS flags.
type localNodeServeOptions struct {
	address      string
	certFile     string
	keyFile      string
	clientCAFile string
}

// addLocalNodeFlags registers --localnode-serve and its TLS flags. The usage has no
// backquotes: pflag would take a quoted word for the value's name in --help.
func addLocalNodeFlags(fs *pflag.FlagSet, o *localNodeServeOptions) {
	fs.StringVar(&o.address, "localnode-serve", o.address, "Also serve this node's node-local state (and the cluster-wide objects it is computed from) over gRPC at this address, for out-of-process backends and for 'kube-proxy state --socket': unix:///absolute/path.sock (e.g. "+lnserver.DefaultAddress+"; an existing file there is never replaced, only a stale socket) or tcp://host:port. Plain TCP is only allowed on a loopback address (127.0.0.1, ::1, localhost); any other host requires --localnode-serve-tls-cert-file and --localnode-serve-tls-private-key-file. Empty (the default) serves nothing. A v1alpha2 --config file can set this and the TLS flags as localNode.serveAddress, tlsCertFile, tlsPrivateKeyFile and clientCAFile; a flag given on the command line wins.")
	fs.StringVar(&o.certFile, "localnode-serve-tls-cert-file", o.certFile, "With a tcp:// --localnode-serve, the PEM file of the server's certificate (with any intermediates after it) for TLS (1.2 or later).")
	fs.StringVar(&o.keyFile, "localnode-serve-tls-private-key-file", o.keyFile, "With --localnode-serve-tls-cert-file, the PEM file of its private key.")
	fs.StringVar(&o.clientCAFile, "localnode-serve-client-ca-file", o.clientCAFile, "With --localnode-serve-tls-cert-file, require every client to present a certificate signed by a CA in this PEM file (mutual TLS).")
}

// validateLocalNodeServe checks --localnode-serve and its TLS flags without reading the
// files; the messages name each flag and its value.
func validateLocalNodeServe(o localNodeServeOptions) error {
	tlsFlags := []struct{ name, value string }{
		{"--localnode-serve-tls-cert-file", o.certFile},
		{"--localnode-serve-tls-private-key-file", o.keyFile},
		{"--localnode-serve-client-ca-file", o.clientCAFile},
	}
	if o.address == "" {
		var errs []error
		for _, f := range tlsFlags {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s %q requires a tcp:// --localnode-serve", f.name, f.value))
			}
		}
		return errors.Join(errs...)
	}
	if err := checkLocalNodeAddress(o.address); err != nil {
		return fmt.Errorf("--localnode-serve %q: %w", o.address, err)
	}
	if strings.HasPrefix(o.address, "unix://") {
		var errs []error
		for _, f := range tlsFlags {
			if f.value != "" {
				errs = append(errs, fmt.Errorf("%s %q: TLS is for a tcp:// --localnode-serve; the unix socket %q is guarded by its file permissions (owner only)", f.name, f.value, o.address))
			}
		}
		return errors.Join(errs...)
	}
	var errs []error
	if (o.certFile == "") != (o.keyFile == "") {
		errs = append(errs, fmt.Errorf("--localnode-serve-tls-cert-file %q and --localnode-serve-tls-private-key-file %q: give both or neither", o.certFile, o.keyFile))
	}
	if o.clientCAFile != "" && o.certFile == "" {
		errs = append(errs, fmt.Errorf("--localnode-serve-client-ca-file %q requires --localnode-serve-tls-cert-file: client certificates are checked only over TLS", o.clientCAFile))
	}
	host, _, _ := net.SplitHostPort(strings.TrimPrefix(o.address, "tcp://"))
	if o.certFile == "" && !lnserver.IsLoopbackHost(host) {
		errs = append(errs, fmt.Errorf("--localnode-serve %q: plain TCP is only allowed on a loopback address (127.0.0.1, ::1, localhost), since anyone who can reach %q could read the cluster's Services and EndpointSlices; set --localnode-serve-tls-cert-file and --localnode-serve-tls-private-key-file (and --localnode-serve-client-ca-file to require client certificates)", o.address, host))
	}
	return errors.Join(errs...)
}

// tlsConfig loads the server's TLS configuration; nil without a certificate.
func (o localNodeServeOptions) tlsConfig() (*tls.Config, error) {
	if o.certFile == "" {
		return nil, nil
	}
	pair, err := reloadingKeyPair("--localnode-serve-tls-cert-file", o.certFile, "--localnode-serve-tls-private-key-file", o.keyFile)
	if err != nil {
		return nil, err
	}
	// Both the key pair and the client CA bundle are read again when their files
	// change, so rotating them needs no restart.
	cfg := &tls.Config{
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return pair.get(), nil },
		MinVersion:     tls.VersionTLS12,
	}
	if o.clientCAFile != "" {
		pool, err := reloadingCertPool("--localnode-serve-client-ca-file", o.clientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientAuth = tls.RequireAnyClientCert
		cfg.VerifyPeerCertificate = verifyClientAgainst(pool)
	}
	return cfg, nil
}

// loadCertPool reads the PEM certificates of file, named by flag in errors.
func loadCertPool(flag, file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", flag, file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s %q: no PEM certificate in the file", flag, file)
	}
	return pool, nil
}

// startLocalNodeServer serves the node-local state next to normal operation, when
// --localnode-serve is set. It watches through a source of its own on the same client
// (the API server or the manifests' fake one), so the built-in proxier is untouched.
// It listens before returning, so an address that cannot be served (taken, or a file
// there) fails start-up instead of leaving the proxy running without the server its
// clients wait for; a later failure of the source or the server is logged.
func (s *ProxyServer) startLocalNodeServer(ctx context.Context, o localNodeServeOptions) error {
	if o.address == "" {
		return nil
	}
	logger := klog.FromContext(ctx)
	if err := validateLocalNodeServe(o); err != nil {
		return err
	}
	tlsConfig, err := o.tlsConfig()
	if err != nil {
		return err
	}
	families := []localnode.Family{localnode.IPv4, localnode.IPv6}
	if s.PrimaryIPFamily == v1.IPv6Protocol {
		families = []localnode.Family{localnode.IPv6, localnode.IPv4}
	}
	srv, err := lnserver.New(lnserver.Options{Proxy: proxyrun.Options{
		NodeName: s.NodeName, Families: families,
		MinSyncInterval: s.Config.MinSyncPeriod.Duration,
	}})
	if err != nil {
		return fmt.Errorf("--localnode-serve %q: %w", o.address, err)
	}
	l, err := lnserver.Listen(o.address)
	if err != nil {
		// Listen's error already names the address.
		return fmt.Errorf("--localnode-serve: %w", err)
	}
	if tlsConfig == nil {
		// validateLocalNodeServe checked the host; "localhost" could still resolve to
		// something else.
		if ta, ok := l.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			l.Close()
			return fmt.Errorf("--localnode-serve %q: plain TCP bound %s, which is not a loopback address", o.address, ta)
		}
	}
	lnserver.RegisterMetrics()
	src := source.NewKubernetes(s.Client, s.NodeName, s.Config.ConfigSyncPeriod.Duration)
	if !features.DefaultFeatureGate.Enabled(features.MultiCIDRServiceAllocator) {
		// As startInformers: without the gate kube-proxy does not read ServiceCIDRs, and
		// the server would otherwise wait for a list that may never come.
		src.WithoutServiceCIDRs()
	}
	go func() {
		if err := srv.Run(ctx, src); err != nil {
			logger.Error(err, "Node-local state source failed")
		}
	}()
	go func() {
		if err := srv.ServeListener(ctx, l, lnserver.ServeOptions{Address: o.address, TLS: tlsConfig}); err != nil {
			logger.Error(fmt.Errorf("--localnode-serve %q: %w", o.address, err), "Stopped serving the node-local state")
		}
	}()
	return nil
}
