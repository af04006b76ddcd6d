package client

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
)

// DefaultAddress is where a kube-proxy serving its node-local state listens by default.
const DefaultAddress = "unix:///run/kube-proxy/localnode.sock"

// Options configure a client.
type Options struct {
	// Address is "unix:///path.sock" or "tcp://host:port"; DefaultAddress when empty.
	Address string
	// TLS, when set, secures a TCP connection; without it TCP is plain (loopback only).
	TLS *tls.Config
	// Families are the node-local families RunBackend hands on; IPv4 only when empty, as
	// in proxyrun.
	Families []localnode.Family
	// MinBackoff and MaxBackoff bound the wait between reconnects (100ms and 5s when 0).
	MinBackoff, MaxBackoff time.Duration
	// FullState asks the server for whole states in every batch instead of changes.
	FullState bool
	// Limits bound what a server can make the client hold; see Limits.
	Limits
}

func (o *Options) defaults() {
	if o.Address == "" {
		o.Address = DefaultAddress
	}
	if o.MinBackoff <= 0 {
		o.MinBackoff = 100 * time.Millisecond
	}
	if o.MaxBackoff <= 0 {
		o.MaxBackoff = 5 * time.Second
	}
	o.Limits = o.Limits.withDefaults()
}

// Defaults of Limits. A cluster at Kubernetes' documented scalability limits (10,000
// Services, 150,000 endpoints in 30,000 EndpointSlices) is, as a server sends its full
// state (global view and the IPv4 node-local services), about 50,000 objects and 18 MiB
// on the wire (TestDefaultLimitsFitLargeCluster measures it; dual-stack adds a third).
// The defaults leave about 20 and 14 times that room, while stopping a server that
// never completes a state well before the client holds gigabytes: decoded protobuf
// takes two to three times its wire size.
const (
	// DefaultMaxPendingObjects bounds the objects of a batch not yet complete, and of the
	// state held.
	DefaultMaxPendingObjects = 1_000_000
	// DefaultMaxPendingBytes bounds the encoded size of a batch not yet complete.
	DefaultMaxPendingBytes = 256 << 20
	// DefaultMaxRecvMsgBytes bounds one WatchEvent. The server splits a batch into events
	// of 256 KiB, but one object is never split: a node-local Service carries all its
	// endpoints, about 60 bytes each, so 16 MiB fits a Service of over 250,000 endpoints
	// where gRPC's own default (4 MiB) would refuse one of 70,000 for good.
	DefaultMaxRecvMsgBytes = 16 << 20
)

// Limits bound what one server can make a client hold. A batch is held until the
// server's synced event completes it, so a server that never sends one (broken, or
// hostile) would otherwise grow the client without bound. Exceeding a limit fails the
// stream with a *LimitError; the client then reconnects and asks for a full state.
// Zero fields take the defaults.
type Limits struct {
	// MaxPendingObjects bounds the objects (ops) of one batch not yet complete, and the
	// objects of the state held once batches are applied: no legitimate state is larger
	// than a full state, which arrives as one batch.
	MaxPendingObjects int
	// MaxPendingBytes bounds the encoded size of one batch not yet complete.
	MaxPendingBytes int64
	// MaxRecvMsgBytes bounds the encoded size of one WatchEvent.
	MaxRecvMsgBytes int
}

func (l Limits) withDefaults() Limits {
	if l.MaxPendingObjects <= 0 {
		l.MaxPendingObjects = DefaultMaxPendingObjects
	}
	if l.MaxPendingBytes <= 0 {
		l.MaxPendingBytes = DefaultMaxPendingBytes
	}
	if l.MaxRecvMsgBytes <= 0 {
		l.MaxRecvMsgBytes = DefaultMaxRecvMsgBytes
	}
	return l
}

// LimitError says a server made the client exceed one of its Limits.
type LimitError struct {
	// Limit is the name of the Limits field exceeded, e.g. "MaxPendingObjects".
	Limit string
	// Max is the limit's value, Got what the server would have made the client hold.
	Max, Got int64
	// What says what was counted.
	What string
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d is more than the limit %s=%d", e.What, e.Got, e.Limit, e.Max)
}

// Dial returns a gRPC connection to address (see Options.Address).
func Dial(address string, tlsConfig *tls.Config) (*grpc.ClientConn, error) {
	var target string
	switch {
	case strings.HasPrefix(address, "unix://"):
		target = address
	case strings.HasPrefix(address, "tcp://"):
		target = "passthrough:///" + strings.TrimPrefix(address, "tcp://")
	default:
		return nil, fmt.Errorf("address %q: want unix:///path or tcp://host:port", address)
	}
	creds := insecure.NewCredentials()
	if tlsConfig != nil {
		creds = credentials.NewTLS(tlsConfig)
	}
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", address, err)
	}
	return conn, nil
}

// Batch is one complete update from the server: apply Ops (after forgetting everything
// when Reset) to reach Revision of Instance.
type Batch struct {
	Instance string
	Revision uint64
	Reset    bool
	Ops      []*localnodev1.Op
}

// errBadStream ends a stream whose events contradict the protocol.
var errBadStream = errors.New("protocol error")

// WatchOnce runs one Watch stream on conn, calling apply with each complete batch, until
// the stream ends or apply fails. It returns the instance and revision of the last batch
// applied (the resume point) and why it stopped. The default Limits apply.
func WatchOnce(ctx context.Context, conn grpc.ClientConnInterface, req *localnodev1.WatchRequest, apply func(*Batch) error) (instance string, revision uint64, err error) {
	return WatchOnceWithLimits(ctx, conn, req, Limits{}, apply)
}

// WatchOnceWithLimits is WatchOnce with limits (zero fields: the defaults) on what the
// server can make it hold; exceeding one ends the stream with a *LimitError.
func WatchOnceWithLimits(ctx context.Context, conn grpc.ClientConnInterface, req *localnodev1.WatchRequest, limits Limits, apply func(*Batch) error) (instance string, revision uint64, err error) {
	limits = limits.withDefaults()
	instance, revision = req.GetInstanceId(), req.GetRevision()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := localnodev1.NewLocalNodeClient(conn).Watch(ctx, req, grpc.MaxCallRecvMsgSize(limits.MaxRecvMsgBytes))
	if err != nil {
		return instance, revision, err
	}
	var cur *Batch
	var pendingBytes int64
	for {
		ev, err := stream.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = fmt.Errorf("server closed the stream: %w", err)
			}
			return instance, revision, err
		}
		if cur == nil {
			cur = &Batch{Instance: ev.GetInstanceId(), Reset: ev.GetReset_()}
			if cur.Instance == "" {
				return instance, revision, fmt.Errorf("%w: event without instance ID", errBadStream)
			}
			if cur.Instance != instance && !cur.Reset {
				return instance, revision, fmt.Errorf("%w: new instance %q without a reset", errBadStream, cur.Instance)
			}
		} else if ev.GetInstanceId() != cur.Instance || ev.GetReset_() {
			return instance, revision, fmt.Errorf("%w: instance or reset changed within a batch", errBadStream)
		}
		// Counted before it is kept: the event itself is bounded by MaxRecvMsgBytes. What
		// was applied before is intact, so the next stream may resume from it.
		pendingBytes += int64(proto.Size(ev))
		if n := len(cur.Ops) + len(ev.GetOps()); n > limits.MaxPendingObjects {
			return instance, revision, &LimitError{Limit: "MaxPendingObjects", Max: int64(limits.MaxPendingObjects), Got: int64(n),
				What: fmt.Sprintf("objects of a batch of instance %q the server has not completed", cur.Instance)}
		}
		if pendingBytes > limits.MaxPendingBytes {
			return instance, revision, &LimitError{Limit: "MaxPendingBytes", Max: limits.MaxPendingBytes, Got: pendingBytes,
				What: fmt.Sprintf("bytes of a batch of instance %q the server has not completed", cur.Instance)}
		}
		cur.Ops = append(cur.Ops, ev.GetOps()...)
		if !ev.GetSynced() {
			continue
		}
		cur.Revision = ev.GetRevision()
		if err := apply(cur); err != nil {
			// What apply rejected may be half staged: start over from scratch.
			return "", 0, err
		}
		instance, revision = cur.Instance, cur.Revision
		cur, pendingBytes = nil, 0
	}
}

// failureLogEvery is how often an unchanged failure is logged again at error level: with
// the default 5s MaxBackoff, about every 50s while a server stays down.
const failureLogEvery = 10

// watchLoop reconnects forever (until ctx is done), resuming where the last batch left
// off.
func watchLoop(ctx context.Context, opts Options, base *localnodev1.WatchRequest, apply func(*Batch) error) error {
	conn, err := Dial(opts.Address, opts.TLS)
	if err != nil {
		return err
	}
	defer conn.Close()
	logger := klog.FromContext(ctx)
	var instance string
	var revision uint64
	backoff := opts.MinBackoff
	// failures counts the streams that ended since the last one that delivered a state;
	// lastErr is the last failure logged at error level.
	failures := 0
	lastErr := ""
	for ctx.Err() == nil {
		req := &localnodev1.WatchRequest{
			InstanceId: instance, Revision: revision,
			NodeLocal: base.GetNodeLocal(), Global: base.GetGlobal(), Families: base.GetFamilies(), FullState: opts.FullState,
		}
		start := time.Now()
		connected := false
		var err error
		instance, revision, err = WatchOnceWithLimits(ctx, conn, req, opts.Limits, func(b *Batch) error {
			if err := apply(b); err != nil {
				return err
			}
			if !connected {
				// A stream counts as connected once it delivered a state: a server that
				// accepts the call and then fails is still down for the backend.
				connected = true
				logger.Info("Connected to node-local state server", "address", opts.Address,
					"instance", b.Instance, "revision", b.Revision, "reset", b.Reset, "failedAttempts", failures)
				failures, lastErr = 0, ""
			}
			return nil
		})
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			backoff = opts.MinBackoff
		}
		failures++
		// A server that stays down fails the same way on every attempt: log the first
		// failure, a changed one, and every failureLogEvery-th, so the error stays
		// visible without a line per reconnect.
		msg := fmt.Sprint(err)
		if msg != lastErr || failures%failureLogEvery == 1 {
			lastErr = msg
			logger.Error(err, "Node-local state stream failed; reconnecting", "address", opts.Address,
				"revision", revision, "failedAttempts", failures, "backoff", backoff)
		} else {
			logger.V(2).Info("Node-local state stream failed again; reconnecting", "address", opts.Address,
				"err", err, "failedAttempts", failures, "backoff", backoff)
		}
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, opts.MaxBackoff)
	}
	return nil
}
