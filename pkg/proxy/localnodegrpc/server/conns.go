package server

import (
	"container/list"
	"context"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/stats"
)

// DefaultIdleTimeout is ServeOptions.IdleTimeout's default: long enough for any client
// to connect (TLS included) and start its Watch, short enough that connections which
// never do cannot hold the server's connection slots.
const DefaultIdleTimeout = 5 * time.Second

// connTracker admits at most max connections. Before, a limit that held Accept let
// idle connections fill every slot, and a real client then waited in the kernel's
// backlog until it timed out. Now a connection with no RPC in progress is closed after
// the idle timeout, and when all slots are taken the oldest such connection makes room
// for the new one; connections with an RPC (a Watch) in progress are never closed, and
// when all of them have one the new connection is refused at once, which a client
// sees as an error instead of a hang.
type connTracker struct {
	net.Listener
	max  int
	idle time.Duration

	mu sync.Mutex
	// conns holds the open connections, oldest first.
	conns list.List
}

func newConnTracker(l net.Listener, max int, idle time.Duration) *connTracker {
	return &connTracker{Listener: l, max: max, idle: idle}
}

// Accept returns the next admitted connection; a refused one is closed and not
// returned (gRPC ends Serve on any Accept error that is not temporary).
func (l *connTracker) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if tc := l.admit(c); tc != nil {
			return tc, nil
		}
	}
}

func (l *connTracker) admit(c net.Conn) *trackedConn {
	l.mu.Lock()
	var victim *trackedConn
	if l.conns.Len() >= l.max {
		for e := l.conns.Front(); e != nil; e = e.Next() {
			if tc := e.Value.(*trackedConn); tc.active == 0 {
				victim = tc
				break
			}
		}
		if victim == nil {
			l.mu.Unlock()
			c.Close()
			connectionsRefused.WithLabelValues("limit").Inc()
			return nil
		}
		// Out of the list now, so that the slot is free before its Close runs.
		l.forget(victim)
	}
	tc := &trackedConn{Conn: c, l: l, idleSince: time.Now()}
	tc.elem = l.conns.PushBack(tc)
	tc.timer = time.AfterFunc(l.idle, tc.idleCheck)
	l.mu.Unlock()
	if victim != nil {
		connectionsEvicted.WithLabelValues("limit").Inc()
		victim.Close()
	}
	return tc
}

// forget removes c from the list; l.mu is held.
func (l *connTracker) forget(c *trackedConn) {
	if c.elem != nil {
		l.conns.Remove(c.elem)
		c.elem = nil
		c.timer.Stop()
	}
}

// open is how many connections are admitted.
func (l *connTracker) open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.conns.Len()
}

// trackedConn is an admitted connection and how many RPCs it has in progress.
type trackedConn struct {
	net.Conn
	l *connTracker

	// Under l.mu.
	elem      *list.Element
	active    int
	idleSince time.Time
	timer     *time.Timer

	closeOnce sync.Once
}

func (c *trackedConn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	var err error
	c.closeOnce.Do(func() { err = c.Conn.Close() })
	return err
}

// idleCheck runs when c may have been idle for the timeout. It closes the connection
// outright rather than asking gRPC to (keepalive's MaxConnectionIdle sends a GOAWAY):
// that would not reach a peer that never finished its handshake, and a client that
// starts an RPC just then retries on a new connection either way.
func (c *trackedConn) idleCheck() {
	l := c.l
	l.mu.Lock()
	if c.elem == nil || c.active > 0 {
		// Closed, or busy: rpcEnd re-arms the timer.
		l.mu.Unlock()
		return
	}
	if left := l.idle - time.Since(c.idleSince); left > 0 {
		// An RPC came and went since the timer was set.
		c.timer.Reset(left)
		l.mu.Unlock()
		return
	}
	l.forget(c)
	l.mu.Unlock()
	connectionsEvicted.WithLabelValues("idle").Inc()
	c.Close()
}

func (c *trackedConn) rpcBegin() {
	c.l.mu.Lock()
	c.active++
	c.l.mu.Unlock()
}

func (c *trackedConn) rpcEnd() {
	c.l.mu.Lock()
	defer c.l.mu.Unlock()
	c.active--
	if c.active == 0 && c.elem != nil {
		c.idleSince = time.Now()
		c.timer.Reset(c.l.idle)
	}
}

// trackingCreds wraps the server's transport credentials so that the handshake's
// AuthInfo carries the trackedConn it ran on: gRPC's stats handler sees a connection
// only through its context, whose peer holds that AuthInfo, and a unix socket's peer
// address is empty for every client, so the address cannot tell them apart.
type trackingCreds struct {
	credentials.TransportCredentials
}

func (c trackingCreds) ServerHandshake(raw net.Conn) (net.Conn, credentials.AuthInfo, error) {
	conn, info, err := c.TransportCredentials.ServerHandshake(raw)
	if err != nil {
		return conn, info, err
	}
	if tc, ok := raw.(*trackedConn); ok {
		info = trackedAuth{AuthInfo: info, conn: tc}
	}
	return conn, info, nil
}

func (c trackingCreds) Clone() credentials.TransportCredentials {
	return trackingCreds{c.TransportCredentials.Clone()}
}

// trackedAuth is the handshake's AuthInfo (in AuthInfo) and the connection it ran on.
type trackedAuth struct {
	credentials.AuthInfo
	conn *trackedConn
}

func (a trackedAuth) AuthType() string {
	if a.AuthInfo == nil {
		return "unknown"
	}
	return a.AuthInfo.AuthType()
}

type trackedConnKey struct{}

// rpcCounter is the stats.Handler that tells each trackedConn when its RPCs begin and
// end.
type rpcCounter struct{}

func (rpcCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	if p, ok := peer.FromContext(ctx); ok {
		if a, ok := p.AuthInfo.(trackedAuth); ok {
			return context.WithValue(ctx, trackedConnKey{}, a.conn)
		}
	}
	return ctx
}

func (rpcCounter) HandleConn(context.Context, stats.ConnStats) {}

func (rpcCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }

func (rpcCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	c, _ := ctx.Value(trackedConnKey{}).(*trackedConn)
	if c == nil {
		return
	}
	switch s.(type) {
	case *stats.Begin:
		c.rpcBegin()
	case *stats.End:
		c.rpcEnd()
	}
}
