package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/proxyrun"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// Defaults of Options.
const (
	DefaultMaxTombstones   = 10000
	DefaultMaxLog          = 100000
	DefaultMaxWatches      = 1000
	DefaultMaxEventBytes   = 256 << 10
	DefaultAddress         = "unix:///run/kube-proxy/localnode.sock"
	defaultMinSyncInterval = 100 * time.Millisecond
)

// Options configure a Server.
type Options struct {
	// Proxy configures the brain the source runs through (node name, families, sync
	// intervals); see proxyrun.Options. MinSyncInterval defaults to 100ms here.
	Proxy proxyrun.Options
	// MaxTombstones bounds the deletions remembered for watchers that resume; beyond it
	// the older half is dropped and watchers older than them get the full state again.
	MaxTombstones int
	// MaxLog bounds the index of recent changes that spares a pass over every object.
	MaxLog int
	// MaxWatches bounds concurrent Watch streams; more are refused with
	// ResourceExhausted.
	MaxWatches int
	// MaxEventBytes bounds one WatchEvent's encoded size (a batch is split into several
	// events, the last one synced); keep it under the clients' receive limit (4 MiB by
	// default in grpc).
	MaxEventBytes int
}

// Server is the LocalNode gRPC service over a source.
type Server struct {
	localnodev1.UnimplementedLocalNodeServer

	opts     Options
	instance string
	store    *store
	families []localnode.Family

	mu sync.Mutex
	// last is each family's last State, to diff the next one against.
	last map[localnode.Family]*localnode.State
	// ready is closed once every family has a State and the global view is synced
	// (ServiceCIDRs too, when the source delivers them, and this node's Node: a
	// snapshot taken between the Services' sync and the Node's had no Node, and
	// `kube-proxy state --global` printed none under load).
	ready                               chan struct{}
	readyOnce                           sync.Once
	svcSynced, slicesSynced, nodeSynced bool
	// cidrsSynced is set at Run when the source delivers no ServiceCIDRs, so that
	// readiness does not wait for them.
	cidrsSynced  bool
	familiesSeen map[localnode.Family]bool

	watches   atomic.Int64
	sentBytes atomic.Uint64
}

// New returns a Server; it serves nothing until Run feeds it and a gRPC server
// registers it (Serve does both halves of the latter).
func New(opts Options) (*Server, error) {
	if opts.MaxTombstones <= 0 {
		opts.MaxTombstones = DefaultMaxTombstones
	}
	if opts.MaxLog <= 0 {
		opts.MaxLog = DefaultMaxLog
	}
	if opts.MaxWatches <= 0 {
		opts.MaxWatches = DefaultMaxWatches
	}
	if opts.MaxEventBytes <= 0 {
		opts.MaxEventBytes = DefaultMaxEventBytes
	}
	if opts.Proxy.MinSyncInterval == 0 {
		opts.Proxy.MinSyncInterval = defaultMinSyncInterval
	}
	fams := opts.Proxy.Families
	if len(fams) == 0 {
		fams = []localnode.Family{localnode.IPv4}
	}
	for _, f := range fams {
		if f != localnode.IPv4 && f != localnode.IPv6 {
			return nil, fmt.Errorf("localnode server: families: unknown IP family %q", f)
		}
	}
	var id [16]byte
	if _, err := rand.Read(id[:]); err != nil {
		return nil, fmt.Errorf("localnode server: instance ID: %w", err)
	}
	return &Server{
		opts: opts, instance: hex.EncodeToString(id[:]),
		store:    newStore(opts.MaxTombstones, opts.MaxLog),
		families: fams,
		last:     map[localnode.Family]*localnode.State{},
		ready:    make(chan struct{}), familiesSeen: map[localnode.Family]bool{},
	}, nil
}

// InstanceID names this server: revisions are only comparable within one instance.
func (s *Server) InstanceID() string { return s.instance }

// Revision returns the current revision.
func (s *Server) Revision() uint64 { return s.store.revision() }

// Ready is closed once the server has a complete state to serve; watches wait for it.
func (s *Server) Ready() <-chan struct{} { return s.ready }

// SentBytes is how many encoded WatchEvent bytes were sent to all watchers.
func (s *Server) SentBytes() uint64 { return s.sentBytes.Load() }

// Run feeds the server from src through the brain until ctx is done. It returns what
// proxyrun.Run returns.
func (s *Server) Run(ctx context.Context, src source.Source) error {
	opts := s.opts.Proxy
	opts.Families = s.families
	if cs, ok := src.(source.ServiceCIDRSource); !ok || !cs.DeliversServiceCIDRs() {
		s.mu.Lock()
		s.cidrsSynced = true
		s.mu.Unlock()
	}
	p, err := proxyrun.New(backend.FullStateFunc(s.syncState), opts)
	if err != nil {
		return fmt.Errorf("localnode server: %w", err)
	}
	return p.Run(ctx, &teeSource{src: src, s: s})
}

// syncState is the backend: it diffs the family's new State against the last one and
// commits the changed services as one revision.
func (s *Server) syncState(ctx context.Context, st *localnode.State) error {
	s.mu.Lock()
	old := s.last[st.Family]
	s.last[st.Family] = st
	s.mu.Unlock()
	var changes []change
	var prev []localnode.Service
	if old != nil {
		prev = old.Services
	}
	cur := st.Services
	i, j := 0, 0
	for i < len(prev) || j < len(cur) {
		var c int
		switch {
		case i == len(prev):
			c = 1
		case j == len(cur):
			c = -1
		default:
			c = prev[i].Name.Compare(cur[j].Name)
		}
		switch {
		case c < 0:
			n := prev[i].Name
			changes = append(changes, change{
				key: key{kindService, st.Family, n.String()}, del: true,
				op: &localnodev1.Op{Op: &localnodev1.Op_DeleteService{DeleteService: localnodev1.ServiceKeyFromLocal(st.Family, n)}},
			})
			i++
		case c > 0 || !prev[i].Equal(&cur[j]):
			changes = append(changes, change{
				key: key{kindService, st.Family, cur[j].Name.String()},
				op:  &localnodev1.Op{Op: &localnodev1.Op_SetService{SetService: localnodev1.ServiceFromLocal(st.Family, &cur[j])}},
			})
			if c == 0 {
				i++
			}
			j++
		default:
			i++
			j++
		}
	}
	s.store.commit(changes)
	klog.FromContext(ctx).V(4).Info("Serving new node-local state", "ipFamily", st.Family, "changes", len(changes), "revision", s.store.revision())
	s.mu.Lock()
	s.familiesSeen[st.Family] = true
	s.mu.Unlock()
	s.checkReady()
	return nil
}

func (s *Server) checkReady() {
	s.mu.Lock()
	ok := s.svcSynced && s.slicesSynced && s.nodeSynced && s.cidrsSynced && len(s.familiesSeen) == len(s.families)
	s.mu.Unlock()
	if ok {
		s.readyOnce.Do(func() { close(s.ready) })
	}
}

// teeSource runs the real source with a handler that records the global view and passes
// every event on to the brain.
type teeSource struct {
	src source.Source
	s   *Server
}

func (t *teeSource) Run(ctx context.Context, h source.Handler) error {
	return t.src.Run(ctx, &teeHandler{h: h, s: t.s})
}

type teeHandler struct {
	h source.Handler
	s *Server
}

var _ source.NodeHandler = &teeHandler{}
var _ source.ServiceCIDRHandler = &teeHandler{}

func objName(ns, name string) string { return ns + "/" + name }

func (t *teeHandler) setService(svc *v1.Service) {
	t.s.store.commit([]change{{
		key: key{kind: kindGlobalService, name: objName(svc.Namespace, svc.Name)},
		op:  &localnodev1.Op{Op: &localnodev1.Op_SetGlobalService{SetGlobalService: localnodev1.GlobalServiceFromAPI(svc)}},
	}})
}

func (t *teeHandler) OnServiceAdd(svc *v1.Service) {
	t.setService(svc)
	t.h.OnServiceAdd(svc)
}

func (t *teeHandler) OnServiceUpdate(old, svc *v1.Service) {
	t.setService(svc)
	t.h.OnServiceUpdate(old, svc)
}

func (t *teeHandler) OnServiceDelete(svc *v1.Service) {
	t.s.store.commit([]change{{
		key: key{kind: kindGlobalService, name: objName(svc.Namespace, svc.Name)}, del: true,
		op: &localnodev1.Op{Op: &localnodev1.Op_DeleteGlobalService{DeleteGlobalService: &localnodev1.ObjectKey{Namespace: svc.Namespace, Name: svc.Name}}},
	}})
	t.h.OnServiceDelete(svc)
}

func (t *teeHandler) OnServiceSynced() {
	t.h.OnServiceSynced()
	t.s.mu.Lock()
	t.s.svcSynced = true
	t.s.mu.Unlock()
	t.s.checkReady()
}

func (t *teeHandler) setSlice(slice *discovery.EndpointSlice) {
	t.s.store.commit([]change{{
		key: key{kind: kindEndpointSlice, name: objName(slice.Namespace, slice.Name)},
		op:  &localnodev1.Op{Op: &localnodev1.Op_SetEndpointSlice{SetEndpointSlice: localnodev1.EndpointSliceFromAPI(slice)}},
	}})
}

func (t *teeHandler) OnEndpointSliceAdd(slice *discovery.EndpointSlice) {
	t.setSlice(slice)
	t.h.OnEndpointSliceAdd(slice)
}

func (t *teeHandler) OnEndpointSliceUpdate(old, slice *discovery.EndpointSlice) {
	t.setSlice(slice)
	t.h.OnEndpointSliceUpdate(old, slice)
}

func (t *teeHandler) OnEndpointSliceDelete(slice *discovery.EndpointSlice) {
	t.s.store.commit([]change{{
		key: key{kind: kindEndpointSlice, name: objName(slice.Namespace, slice.Name)}, del: true,
		op: &localnodev1.Op{Op: &localnodev1.Op_DeleteEndpointSlice{DeleteEndpointSlice: &localnodev1.ObjectKey{Namespace: slice.Namespace, Name: slice.Name}}},
	}})
	t.h.OnEndpointSliceDelete(slice)
}

func (t *teeHandler) OnEndpointSlicesSynced() {
	t.h.OnEndpointSlicesSynced()
	t.s.mu.Lock()
	t.s.slicesSynced = true
	t.s.mu.Unlock()
	t.s.checkReady()
}

func (t *teeHandler) OnTopologyChange(labels map[string]string) { t.h.OnTopologyChange(labels) }

func (t *teeHandler) OnNodeChange(node *v1.Node) {
	t.s.store.commit([]change{{
		key: key{kind: kindNode, name: node.Name},
		op:  &localnodev1.Op{Op: &localnodev1.Op_SetNode{SetNode: localnodev1.NodeFromAPI(node)}},
	}})
	if nh, ok := t.h.(source.NodeHandler); ok {
		nh.OnNodeChange(node)
	}
}

func (t *teeHandler) OnNodeDelete(node *v1.Node) {
	t.s.store.commit([]change{{
		key: key{kind: kindNode, name: node.Name}, del: true,
		op: &localnodev1.Op{Op: &localnodev1.Op_DeleteNode{DeleteNode: &localnodev1.ObjectKey{Name: node.Name}}},
	}})
	if nh, ok := t.h.(source.NodeHandler); ok {
		nh.OnNodeDelete(node)
	}
}

func (t *teeHandler) OnNodeSynced() {
	if nh, ok := t.h.(source.NodeHandler); ok {
		nh.OnNodeSynced()
	}
	t.s.mu.Lock()
	t.s.nodeSynced = true
	t.s.mu.Unlock()
	t.s.checkReady()
}

// Watch implements localnodev1.LocalNodeServer.
func (s *Server) Watch(req *localnodev1.WatchRequest, stream localnodev1.LocalNode_WatchServer) error {
	ctx := stream.Context()
	if n := s.watches.Add(1); n > int64(s.opts.MaxWatches) {
		s.watches.Add(-1)
		return status.Errorf(codes.ResourceExhausted, "more than %d watches", s.opts.MaxWatches)
	}
	defer s.watches.Add(-1)
	f := &filter{local: req.GetNodeLocal() || !req.GetGlobal(), global: req.GetGlobal()}
	for i, fam := range req.GetFamilies() {
		lf, err := localnodev1.FamilyToLocal(fam)
		if err != nil {
			return status.Errorf(codes.InvalidArgument, "families[%d]: %v", i, err)
		}
		f.families = append(f.families, lf)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	}
	var from uint64
	if req.GetInstanceId() == s.instance {
		from = req.GetRevision()
	}
	logger := klog.FromContext(ctx)
	first := true
	for {
		keys, rev, reset, notify := s.store.keysSince(from, false, f)
		// A full-state watcher is sent the whole state, but only when something it asked
		// for changed.
		if req.GetFullState() && (first || reset || len(keys) > 0) {
			keys, rev, reset, notify = s.store.keysSince(from, true, f)
		}
		// The first batch is always sent, even empty, so a resuming client learns it is
		// up to date; later, a revision that changed nothing this watcher asked for is
		// not sent.
		if first || reset || len(keys) > 0 {
			var err error
			if rev, err = s.send(stream, f, keys, rev, reset); err != nil {
				logger.V(2).Info("Watch ended", "err", err)
				return err
			}
		}
		from, first = rev, false
		select {
		case <-notify:
		case <-ctx.Done():
			return nil
		}
	}
}

// lookupChunk is how many keys send reads from the store under one lock.
const lookupChunk = 256

// maxCatchUp bounds the rounds send spends re-sending keys that changed while it was
// sending, so a watcher under constant churn still reaches a synced event.
const maxCatchUp = 3

// errCompacted ends a watch whose pending deletions were compacted while it was being
// sent; the client's reconnect gets a full state.
var errCompacted = status.Error(codes.Aborted, "deletions were compacted while sending; reconnect for the full state")

// send sends one batch, keys read from the store as each event is built (so a slow
// watcher holds names, not a copy of old values), in events of at most MaxEventBytes,
// the last one synced. Values read late may be newer than rev: keys that changed while
// sending are sent again at the end (up to maxCatchUp rounds), and the synced event
// carries the revision reached, which send returns.
func (s *Server) send(stream localnodev1.LocalNode_WatchServer, f *filter, keys []key, rev uint64, reset bool) (uint64, error) {
	ev := &localnodev1.WatchEvent{InstanceId: s.instance, Reset_: reset}
	size := 0
	flush := func(last bool) error {
		if last {
			ev.Revision, ev.Synced = rev, true
		}
		n := proto.Size(ev)
		if err := stream.Send(ev); err != nil {
			return err
		}
		s.sentBytes.Add(uint64(n))
		ev = &localnodev1.WatchEvent{InstanceId: s.instance}
		size = 0
		return nil
	}
	ops := make([]*localnodev1.Op, 0, lookupChunk)
	for round := 0; ; round++ {
		for i := 0; i < len(keys); i += lookupChunk {
			ops = s.store.lookup(keys[i:min(i+lookupChunk, len(keys))], ops[:0])
			for _, op := range ops {
				if op == nil {
					if reset {
						continue // gone: a client starting over never had it
					}
					return rev, errCompacted
				}
				n := proto.Size(op) + 4
				if size > 0 && size+n > s.opts.MaxEventBytes {
					if err := flush(false); err != nil {
						return rev, err
					}
				}
				ev.Ops = append(ev.Ops, op)
				size += n
			}
			clear(ops)
		}
		if round == maxCatchUp {
			break
		}
		more, now, compacted, _ := s.store.keysSince(rev, false, f)
		if compacted {
			return rev, errCompacted
		}
		rev = now
		if len(more) == 0 {
			break
		}
		keys = more
	}
	return rev, flush(true)
}

// ErrNoState is returned by State before the server is ready.
var ErrNoState = errors.New("localnode server: no complete state yet")

// State returns the node-local State of family as served now.
func (s *Server) State(f localnode.Family) (*localnode.State, error) {
	select {
	case <-s.ready:
	default:
		return nil, ErrNoState
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last[f], nil
}

// Snapshot returns what a new watcher asking for req's selection would be sent first:
// the whole state, and its revision. It waits for the server to be ready or ctx to end.
func (s *Server) Snapshot(ctx context.Context, req *localnodev1.WatchRequest) ([]*localnodev1.Op, uint64, error) {
	f := &filter{local: req.GetNodeLocal() || !req.GetGlobal(), global: req.GetGlobal()}
	for i, fam := range req.GetFamilies() {
		lf, err := localnodev1.FamilyToLocal(fam)
		if err != nil {
			return nil, 0, fmt.Errorf("families[%d]: %w", i, err)
		}
		f.families = append(f.families, lf)
	}
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil, 0, fmt.Errorf("waiting for a complete state: %w", context.Cause(ctx))
	}
	ops, rev, _ := s.store.since(0, true, f)
	return ops, rev, nil
}
