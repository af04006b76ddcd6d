package localnodeportproxy

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"k8s.io/kube-proxy/pkg/proxy"
	"k8s.io/kube-proxy/pkg/proxy/metrics"
)

// dialTimeout bounds connecting to one endpoint.
const dialTimeout = 5 * time.Second

// maxDialAttempts is how many endpoints a connection tries before giving up,
// so that one dead endpoint does not fail every connection routed to it.
const maxDialAttempts = 3

// NodePortSpec describes one NodePort to serve on localhost.
type NodePortSpec struct {
	ServicePortName proxy.ServicePortName
	Protocol        v1.Protocol
	NodePort        int
	// Endpoints are the "ip:port" backends to forward to.
	Endpoints []string
	// SessionAffinityType and StickyMaxAgeSeconds mirror the Service. All
	// localhost clients share one source IP, so ClientIP affinity pins every
	// localhost connection of this NodePort to one endpoint.
	SessionAffinityType v1.ServiceAffinity
	StickyMaxAgeSeconds int
}

func (s *NodePortSpec) key() string { return string(s.Protocol) + "/" + strconv.Itoa(s.NodePort) }

func (s *NodePortSpec) affinity() time.Duration {
	if s.SessionAffinityType != v1.ServiceAffinityClientIP {
		return 0
	}
	return time.Duration(s.StickyMaxAgeSeconds) * time.Second
}

// LocalNodePortProxy manages the localhost listeners of one IP family.
type LocalNodePortProxy struct {
	ctx      context.Context
	logger   klog.Logger
	listenIP string
	family   string
	clock    clock.PassiveClock

	mu        sync.Mutex
	listeners map[string]*listener
}

// NewLocalNodePortProxy returns a proxy listening on 127.0.0.1 (IPv4) or ::1
// (IPv6). Listeners stop when ctx is cancelled or on Shutdown.
func NewLocalNodePortProxy(ctx context.Context, ipFamily v1.IPFamily) *LocalNodePortProxy {
	return newProxy(ctx, ipFamily, clock.RealClock{})
}

func newProxy(ctx context.Context, ipFamily v1.IPFamily, clk clock.PassiveClock) *LocalNodePortProxy {
	ip := "127.0.0.1"
	if ipFamily == v1.IPv6Protocol {
		ip = "::1"
	}
	return &LocalNodePortProxy{
		ctx:       ctx,
		logger:    klog.FromContext(ctx).WithValues("ipFamily", ipFamily),
		listenIP:  ip,
		family:    string(ipFamily),
		clock:     clk,
		listeners: map[string]*listener{},
	}
}

// SyncNodePorts makes the set of listeners match desired: NodePorts without
// endpoints or gone from desired are closed, new ones opened, and existing
// ones get the new endpoints without dropping connections.
func (p *LocalNodePortProxy) SyncNodePorts(desired []NodePortSpec) {
	want := make(map[string]*NodePortSpec, len(desired))
	for i := range desired {
		spec := &desired[i]
		if len(spec.Endpoints) == 0 {
			continue
		}
		if spec.Protocol != v1.ProtocolTCP {
			p.logger.Error(nil, "Ignoring non-TCP localhost NodePort", "servicePort", spec.ServicePortName.String(), "protocol", spec.Protocol, "nodePort", spec.NodePort)
			continue
		}
		if spec.NodePort <= 0 || spec.NodePort > 65535 {
			p.logger.Error(nil, "Ignoring out-of-range localhost NodePort", "servicePort", spec.ServicePortName.String(), "nodePort", spec.NodePort)
			continue
		}
		want[spec.key()] = spec
	}

	p.mu.Lock()
	defer p.mu.Unlock()
	for key, l := range p.listeners {
		if _, ok := want[key]; !ok {
			p.logger.V(2).Info("Removing localhost NodePort listener", "nodePort", l.port)
			l.close()
			delete(p.listeners, key)
		}
	}
	for key, spec := range want {
		if l, ok := p.listeners[key]; ok {
			l.update(spec)
			continue
		}
		l, err := p.listen(spec)
		if err != nil {
			p.logger.Error(err, "Failed to create localhost NodePort listener", "servicePort", spec.ServicePortName.String(), "nodePort", spec.NodePort)
			metrics.LocalhostNodePortListenerCreationFailuresTotal.WithLabelValues(p.family).Inc()
			continue
		}
		p.listeners[key] = l
		p.logger.V(4).Info("Created localhost NodePort listener", "nodePort", spec.NodePort, "endpoints", len(spec.Endpoints))
	}
	metrics.LocalhostNodePortListeners.WithLabelValues(p.family).Set(float64(len(p.listeners)))
}

// Shutdown closes every listener and the connections they carry.
func (p *LocalNodePortProxy) Shutdown() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for key, l := range p.listeners {
		l.close()
		delete(p.listeners, key)
	}
	metrics.LocalhostNodePortListeners.WithLabelValues(p.family).Set(0)
}

func (p *LocalNodePortProxy) listen(spec *NodePortSpec) (*listener, error) {
	addr := net.JoinHostPort(p.listenIP, strconv.Itoa(spec.NodePort))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listening on %s for %s: %w", addr, spec.ServicePortName.String(), err)
	}
	ctx, cancel := context.WithCancel(p.ctx)
	l := &listener{
		port:     spec.NodePort,
		logger:   p.logger.WithValues("nodePort", spec.NodePort),
		ln:       ln,
		cancel:   cancel,
		clock:    p.clock,
		backends: spec.Endpoints,
		affinity: spec.affinity(),
	}
	l.wg.Add(1)
	go l.serve(ctx)
	return l, nil
}

type listener struct {
	port   int
	logger klog.Logger
	ln     net.Listener
	cancel context.CancelFunc
	clock  clock.PassiveClock
	wg     sync.WaitGroup

	mu       sync.Mutex
	backends []string
	affinity time.Duration
	pinned   string
	lastUsed time.Time
}

func (l *listener) serve(ctx context.Context) {
	defer l.wg.Done()
	for {
		conn, err := l.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return
			}
			l.logger.V(4).Info("Accept failed", "err", err)
			continue
		}
		go l.forward(ctx, conn)
	}
}

func (l *listener) forward(ctx context.Context, client net.Conn) {
	defer func() { _ = client.Close() }()
	var backend net.Conn
	tried := map[string]bool{}
	for attempt := 0; attempt < maxDialAttempts; attempt++ {
		ep := l.pick(tried)
		if ep == "" {
			break
		}
		tried[ep] = true
		d := net.Dialer{Timeout: dialTimeout}
		c, err := d.DialContext(ctx, "tcp", ep)
		if err == nil {
			backend = c
			break
		}
		l.logger.V(4).Info("Failed to connect to endpoint", "endpoint", ep, "err", err)
		l.unpin(ep)
	}
	if backend == nil {
		return
	}
	defer func() { _ = backend.Close() }()

	// Closing both ends on shutdown unblocks the copies of idle connections.
	connCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		<-connCtx.Done()
		_ = client.Close()
		_ = backend.Close()
	}()
	var wg sync.WaitGroup
	wg.Go(func() { l.pipe(connCtx, backend, client) })
	wg.Go(func() { l.pipe(connCtx, client, backend) })
	wg.Wait()
}

func (l *listener) pipe(ctx context.Context, dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil && ctx.Err() == nil {
		l.logger.V(4).Info("Error proxying localhost NodePort connection", "err", err)
	}
	// Half-close so the peer sees EOF while the other direction drains.
	if tc, ok := dst.(*net.TCPConn); ok {
		_ = tc.CloseWrite()
	}
}

// pick chooses an endpoint not in exclude: the pinned one while affinity
// holds (renewed on use), otherwise a random one.
func (l *listener) pick(exclude map[string]bool) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clock.Now()
	if l.affinity > 0 && l.pinned != "" && !exclude[l.pinned] && now.Sub(l.lastUsed) <= l.affinity {
		for _, b := range l.backends {
			if b == l.pinned {
				l.lastUsed = now
				return b
			}
		}
	}
	candidates := make([]string, 0, len(l.backends))
	for _, b := range l.backends {
		if !exclude[b] {
			candidates = append(candidates, b)
		}
	}
	if len(candidates) == 0 {
		return ""
	}
	ep := candidates[rand.IntN(len(candidates))]
	if l.affinity > 0 {
		l.pinned, l.lastUsed = ep, now
	}
	return ep
}

func (l *listener) unpin(ep string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.pinned == ep {
		l.pinned = ""
	}
}

func (l *listener) update(spec *NodePortSpec) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.backends = spec.Endpoints
	if a := spec.affinity(); a != l.affinity {
		l.affinity = a
		l.pinned = ""
	}
}

func (l *listener) close() {
	l.cancel()
	_ = l.ln.Close()
	l.wg.Wait()
}
