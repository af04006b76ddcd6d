package healthcheck

import (
	"context"
	"net"
	"net/http"
	"time"

	netutils "k8s.io/utils/net"
)

// listener opens sockets; tests substitute it to avoid real ports.
type listener interface {
	Listen(ctx context.Context, network string, addrs ...string) (net.Listener, error)
}

// httpServerFactory builds HTTP servers; tests substitute it.
type httpServerFactory interface {
	New(handler http.Handler) httpServer
}

// httpServer is the part of *http.Server we use.
type httpServer interface {
	Serve(l net.Listener) error
	Close() error
}

type netListener struct{}

// Listen uses MultiListen so one logical server can span several addresses.
func (netListener) Listen(ctx context.Context, network string, addrs ...string) (net.Listener, error) {
	return netutils.MultiListen(ctx, network, addrs...)
}

type stdHTTPServers struct{}

// readHeaderTimeout keeps idle or slow probe connections from pinning
// goroutines forever.
const readHeaderTimeout = 10 * time.Second

func (stdHTTPServers) New(h http.Handler) httpServer {
	return &http.Server{Handler: h, ReadHeaderTimeout: readHeaderTimeout}
}

var (
	_ listener          = netListener{}
	_ httpServerFactory = stdHTTPServers{}
)

func setJSONHeaders(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("X-Content-Type-Options", "nosniff")
}
