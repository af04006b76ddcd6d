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
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnode/api/v1"
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
// applied (the resume point) and why it stopped.
func WatchOnce(ctx context.Context, conn grpc.ClientConnInterface, req *localnodev1.WatchRequest, apply func(*Batch) error) (instance string, revision uint64, err error) {
	instance, revision = req.GetInstanceId(), req.GetRevision()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := localnodev1.NewLocalNodeClient(conn).Watch(ctx, req)
	if err != nil {
		return instance, revision, err
	}
	var cur *Batch
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
		cur = nil
	}
}

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
	for ctx.Err() == nil {
		req := &localnodev1.WatchRequest{
			InstanceId: instance, Revision: revision,
			NodeLocal: base.GetNodeLocal(), Global: base.GetGlobal(), Families: base.GetFamilies(), FullState: opts.FullState,
		}
		start := time.Now()
		var err error
		instance, revision, err = WatchOnce(ctx, conn, req, apply)
		if ctx.Err() != nil {
			break
		}
		if time.Since(start) > 10*time.Second {
			backoff = opts.MinBackoff
		}
		logger.Info("Node-local state stream ended; reconnecting", "address", opts.Address, "err", err, "revision", revision, "backoff", backoff)
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, opts.MaxBackoff)
	}
	return nil
}
