package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"
	"k8s.io/klog/v2"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnode/api/v1"
)

// DefaultMaxConns bounds the connections Serve accepts at once.
const DefaultMaxConns = 1024

// ServeOptions configure Serve.
type ServeOptions struct {
	// Address is "unix:///path/to.sock" (the default, DefaultAddress) or
	// "tcp://host:port". A TCP address requires TLS unless InsecureTCP is set.
	Address string
	// TLS, when set, is the server's TLS configuration (certificates, client CAs).
	TLS *tls.Config
	// InsecureTCP allows plain TCP, for tests on loopback.
	InsecureTCP bool
	// MaxConns bounds concurrent connections; DefaultMaxConns when 0.
	MaxConns int
}

// Listen opens the listener an address names. A unix socket's directory is created,
// a stale socket file (one nobody answers on) replaced, and the socket made accessible to its owner only.
func Listen(address string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if path == "" {
			return nil, fmt.Errorf("address %q: empty socket path", address)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		// A socket file someone still answers on is not stale: refuse rather than
		// take a running server's address away.
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, fmt.Errorf("address %q: a server is already listening there", address)
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("address %q: removing stale socket: %w", address, err)
		}
		l, err := net.Listen("unix", path)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		if err := os.Chmod(path, 0o600); err != nil {
			l.Close()
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		return l, nil
	case strings.HasPrefix(address, "tcp://"):
		l, err := net.Listen("tcp", strings.TrimPrefix(address, "tcp://"))
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("address %q: want unix:///path or tcp://host:port", address)
}

// GRPCServer returns a grpc.Server with s registered and the limits a node-local service
// wants: bounded streams per connection, bounded receive size (clients send only small
// requests), keepalive to drop dead peers.
func (s *Server) GRPCServer(tlsConfig *tls.Config) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(64 << 10),
		grpc.MaxConcurrentStreams(16),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(10 * time.Second),
	}
	if tlsConfig != nil {
		opts = append(opts, grpc.Creds(credentials.NewTLS(tlsConfig)))
	}
	g := grpc.NewServer(opts...)
	localnodev1.RegisterLocalNodeServer(g, s)
	return g
}

// Serve serves s on opts.Address until ctx is done, then stops the gRPC server
// (closing every watch) and, for a unix socket, removes the socket file.
func (s *Server) Serve(ctx context.Context, opts ServeOptions) error {
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	if strings.HasPrefix(opts.Address, "tcp://") && opts.TLS == nil && !opts.InsecureTCP {
		return fmt.Errorf("address %q: TCP needs TLS", opts.Address)
	}
	l, err := Listen(opts.Address)
	if err != nil {
		return err
	}
	return s.ServeListener(ctx, l, opts)
}

// ServeListener is Serve on an open listener.
func (s *Server) ServeListener(ctx context.Context, l net.Listener, opts ServeOptions) error {
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	l = &limitListener{Listener: l, sem: make(chan struct{}, opts.MaxConns)}
	g := s.GRPCServer(opts.TLS)
	klog.FromContext(ctx).Info("Serving node-local state", "address", l.Addr().String(), "instance", s.instance)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			g.Stop()
		case <-done:
		}
	}()
	err := g.Serve(l)
	close(done)
	if ua, ok := l.Addr().(*net.UnixAddr); ok {
		_ = os.Remove(ua.Name)
	}
	if ctx.Err() != nil || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// limitListener holds Accept while MaxConns connections are open, so thousands of
// connects cost at most MaxConns connections' memory; the rest wait in the kernel's
// backlog.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: func() { <-l.sem }}, nil
}

type limitConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
