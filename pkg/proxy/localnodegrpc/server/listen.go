package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"k8s.io/klog/v2"

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	proxyutil "k8s.io/kube-proxy/pkg/proxy/util"
)

// DefaultMaxConns bounds the connections Serve accepts at once.
const DefaultMaxConns = 1024

// ServeOptions configure Serve.
type ServeOptions struct {
	// Address is "unix:///path/to.sock" (the default, DefaultAddress) or
	// "tcp://host:port". A TCP address requires TLS unless InsecureTCP is set, and
	// InsecureTCP is only honoured on a loopback address.
	Address string
	// TLS, when set, is the server's TLS configuration (certificates, client CAs). A
	// MinVersion below TLS 1.2 is raised to it.
	TLS *tls.Config
	// InsecureTCP allows plain TCP on a loopback address (127.0.0.0/8, ::1,
	// "localhost"): any other host could be reached from off the node, by anyone.
	InsecureTCP bool
	// MaxConns bounds concurrent connections; DefaultMaxConns when 0. When that many
	// are open, the oldest with no RPC in progress is closed to make room for a new
	// one; when every one has an RPC in progress, a new one is closed at once.
	MaxConns int
	// IdleTimeout closes a connection that has had no RPC in progress for this long
	// since it was accepted or since its last RPC ended (a watching client always has
	// one); DefaultIdleTimeout when 0.
	IdleTimeout time.Duration
}

// Listen opens the listener an address names.
//
// A unix socket's path must be absolute (clients refuse relative ones, and a relative
// path would depend on the working directory). Its directory is created; what is at the
// path decides the rest, because the path is named by an operator and may be wrong:
// nothing → listen; a socket something answers on → refuse (a running server keeps its
// address); a stale socket (nothing answers) → replace it; a symbolic link or anything
// else (a regular file, a directory, a pipe, a device) → refuse, untouched. The socket
// is made accessible to its owner only, and closing the listener removes it only while
// it is still the socket Listen created.
//
// A TCP address is listened on as given; Serve decides whether it needs TLS.
func Listen(address string) (net.Listener, error) {
	switch {
	case strings.HasPrefix(address, "unix://"):
		path := strings.TrimPrefix(address, "unix://")
		if path == "" {
			return nil, fmt.Errorf("address %q: empty socket path", address)
		}
		if !filepath.IsAbs(path) {
			return nil, fmt.Errorf("address %q: socket path %q is not absolute", address, path)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		if err := clearStaleSocket(path); err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		l, err := bindUnixPrivate(path)
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		fi, err := os.Lstat(path)
		if err != nil {
			l.Close()
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		return &unixListener{UnixListener: l, path: path, created: fi}, nil
	case strings.HasPrefix(address, "tcp://"):
		l, err := net.Listen("tcp", strings.TrimPrefix(address, "tcp://"))
		if err != nil {
			return nil, fmt.Errorf("address %q: %w", address, err)
		}
		return l, nil
	}
	return nil, fmt.Errorf("address %q: want unix:///path or tcp://host:port", address)
}

// clearStaleSocket makes path free for a new socket, removing only a socket nobody
// answers on; it refuses whatever else is there, naming it.
func clearStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	mode := fi.Mode()
	if mode&os.ModeSocket == 0 {
		// A symbolic link is not followed: it may point at anything, and removing it
		// would break whatever the operator linked.
		return fmt.Errorf("%s is a %s, not a socket: refusing to replace it", path, proxyutil.FileKind(mode))
	}
	c, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		c.Close()
		return fmt.Errorf("%s: a server is already listening there", path)
	}
	// Only a refused connection proves nobody listens; a socket we may not connect to
	// (permissions) or that times out could still be someone's live server.
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%s: cannot tell whether the socket there is stale: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("removing stale socket %s: %w", path, err)
	}
	return nil
}

// maxUnixPath is the longest socket path bind accepts everywhere we build (sun_path is
// 108 bytes on Linux, 104 on the BSDs and darwin, both including the terminating NUL).
const maxUnixPath = 103

// afterPrivateBind, when set by a test, runs between binding the socket in its private
// directory and linking it into place.
var afterPrivateBind func(tmp string)

// bindUnixPrivate binds a socket at path that only its owner can connect to, from the
// first moment it is reachable there. bind creates the file under the process's umask
// (typically 0755 for a socket: connectable by every local user), so binding at path
// and then chmod-ing leaves a window in which another user can connect and keep the
// connection. Instead the socket is bound in a fresh 0700 directory beside path, made
// 0600 there, and hard-linked to path. link, unlike rename, fails if anything appeared
// at path since clearStaleSocket looked, so a file created in between is never replaced.
//
// Where the private name would not fit in sun_path although path does, or on Windows
// (whose AF_UNIX socket files cannot be hard-linked and have no mode bits to protect),
// the socket is bound at path and chmod-ed, with that window.
func bindUnixPrivate(path string) (*net.UnixListener, error) {
	dir := ""
	if runtime.GOOS != "windows" {
		d, err := os.MkdirTemp(filepath.Dir(path), ".kp")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		if len(filepath.Join(d, "s")) <= maxUnixPath {
			dir = d
		}
	}
	if dir == "" {
		return bindUnix(path)
	}
	tmp := filepath.Join(dir, "s")
	l, err := bindUnix(tmp)
	if err != nil {
		return nil, err
	}
	if afterPrivateBind != nil {
		afterPrivateBind(tmp)
	}
	if err := os.Link(tmp, path); err != nil {
		l.Close()
		return nil, fmt.Errorf("putting the socket in place: %w", err)
	}
	return l, nil
}

// bindUnix binds and listens on path and makes the socket owner-only.
func bindUnix(path string) (*net.UnixListener, error) {
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The net package would unlink the name on Close whatever is there by then;
	// unixListener.Close removes the socket only if it is still ours, and the private
	// name goes with its directory.
	l.SetUnlinkOnClose(false)
	if err := os.Chmod(path, 0o600); err != nil {
		l.Close()
		return nil, err
	}
	return l, nil
}

// unixListener removes its socket file on Close, but only while the path still names
// the socket Listen created: someone may have removed it and put a file, or another
// server's socket, there since.
type unixListener struct {
	*net.UnixListener
	path    string
	created os.FileInfo
	once    sync.Once
}

func (l *unixListener) Close() error {
	err := l.UnixListener.Close()
	l.once.Do(func() {
		// Between this Lstat and Remove the path could change again; that window is
		// the caller's own shutdown, far smaller than the lifetime checked here.
		if fi, lerr := os.Lstat(l.path); lerr == nil && os.SameFile(fi, l.created) {
			_ = os.Remove(l.path)
		}
	})
	return err
}

// GRPCServer returns a grpc.Server with s registered and the limits a node-local service
// wants: bounded streams per connection, bounded receive size (clients send only small
// requests), keepalive to drop dead peers.
func (s *Server) GRPCServer(tlsConfig *tls.Config) *grpc.Server {
	return s.grpcServer(tlsConfig, false)
}

// grpcServer is GRPCServer; with track it also tells each connection of the
// connTracker its listener is wrapped in when its RPCs begin and end.
func (s *Server) grpcServer(tlsConfig *tls.Config, track bool) *grpc.Server {
	opts := []grpc.ServerOption{
		grpc.MaxRecvMsgSize(64 << 10),
		grpc.MaxConcurrentStreams(16),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: time.Minute, Timeout: 20 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}),
		grpc.ConnectionTimeout(10 * time.Second),
	}
	creds := insecure.NewCredentials()
	if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	if track {
		creds = trackingCreds{creds}
		opts = append(opts, grpc.StatsHandler(rpcCounter{}))
	}
	opts = append(opts, grpc.Creds(creds))
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
	if hostPort, ok := strings.CutPrefix(opts.Address, "tcp://"); ok && opts.TLS == nil {
		if !opts.InsecureTCP {
			return fmt.Errorf("address %q: TCP needs TLS", opts.Address)
		}
		if host, _, err := net.SplitHostPort(hostPort); err != nil || !IsLoopbackHost(host) {
			return fmt.Errorf("address %q: plain TCP (no TLS) is only allowed on a loopback address (127.0.0.0/8, ::1, localhost)", opts.Address)
		}
	}
	l, err := Listen(opts.Address)
	if err != nil {
		return err
	}
	if opts.TLS == nil {
		// "localhost" could resolve to anything: check what was bound.
		if ta, ok := l.Addr().(*net.TCPAddr); ok && !ta.IP.IsLoopback() {
			l.Close()
			return fmt.Errorf("address %q: plain TCP bound %s, not a loopback address", opts.Address, ta)
		}
	}
	return s.ServeListener(ctx, l, opts)
}

// IsLoopbackHost says whether host (of a host:port) is a loopback address: an IP in
// 127.0.0.0/8 or ::1, or "localhost".
func IsLoopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// ServeListener is Serve on an open listener.
func (s *Server) ServeListener(ctx context.Context, l net.Listener, opts ServeOptions) error {
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.TLS != nil && opts.TLS.MinVersion < tls.VersionTLS12 {
		opts.TLS = opts.TLS.Clone()
		opts.TLS.MinVersion = tls.VersionTLS12
	}
	l = newConnTracker(l, opts.MaxConns, opts.IdleTimeout)
	g := s.grpcServer(opts.TLS, true)
	klog.FromContext(ctx).Info("Serving node-local state", "address", l.Addr().String(), "instance", s.instance)
	done := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			g.Stop()
		case <-done:
		}
	}()
	// Stopping the server closes l, which removes a socket Listen created (and only
	// if it is still there).
	err := g.Serve(l)
	close(done)
	if ctx.Err() != nil || errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}
