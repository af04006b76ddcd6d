package client

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/backend"
	"k8s.io/kube-proxy/pkg/proxy/localnode"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
)

// NodeLocal is the node-local state a client holds: the services of each family.
type NodeLocal struct {
	services map[localnode.Family]map[localnode.PortName]localnode.Service
}

// NewNodeLocal returns an empty state.
func NewNodeLocal() *NodeLocal {
	return &NodeLocal{services: map[localnode.Family]map[localnode.PortName]localnode.Service{}}
}

// Apply decodes a batch into a copy of n and returns it with the families it touched; n
// is unchanged, so a batch that fails to decode leaves nothing half applied. Any object
// that does not decode fails the whole batch; ApplyValid skips it instead.
func (n *NodeLocal) Apply(b *Batch) (*NodeLocal, map[localnode.Family]bool, error) {
	out, touched, rejected := n.ApplyValid(b)
	if len(rejected) > 0 {
		return nil, nil, rejected[0]
	}
	return out, touched, nil
}

// ApplyValid decodes a batch into a copy of n (n is unchanged) and returns it with the
// families it touched and the objects it skipped because they do not decode: for those,
// what n held under the same name stays.
func (n *NodeLocal) ApplyValid(b *Batch) (*NodeLocal, map[localnode.Family]bool, []Rejected) {
	out := &NodeLocal{services: map[localnode.Family]map[localnode.PortName]localnode.Service{}}
	touched := map[localnode.Family]bool{}
	if !b.Reset {
		for f, m := range n.services {
			out.services[f] = m
		}
	}
	cloned := map[localnode.Family]bool{}
	famMap := func(f localnode.Family) map[localnode.PortName]localnode.Service {
		touched[f] = true
		if !cloned[f] {
			cloned[f] = true
			out.services[f] = maps.Clone(out.services[f])
			if out.services[f] == nil {
				out.services[f] = map[localnode.PortName]localnode.Service{}
			}
		}
		return out.services[f]
	}
	var rejected []Rejected
	for i, op := range b.Ops {
		switch o := op.GetOp().(type) {
		case *localnodev1.Op_SetService:
			f, svc, err := localnodev1.ServiceToLocal(o.SetService)
			if err != nil {
				r := Rejected{Op: i, Kind: "Service", Err: err}
				// The key may decode where the rest did not; then what was held stays,
				// after a reset too.
				kf, kerr := localnodev1.FamilyToLocal(o.SetService.GetFamily())
				name, nerr := localnodev1.PortNameToLocal(o.SetService.GetName())
				if kerr == nil && nerr == nil {
					r.Object = name.String()
					m := famMap(kf)
					if _, ok := m[name]; !ok && b.Reset {
						if held, ok := n.services[kf][name]; ok {
							m[name] = held
						}
					}
				}
				rejected = append(rejected, r)
				continue
			}
			famMap(f)[svc.Name] = svc
		case *localnodev1.Op_DeleteService:
			f, name, err := localnodev1.ServiceKeyToLocal(o.DeleteService)
			if err != nil {
				rejected = append(rejected, Rejected{Op: i, Kind: "ServiceKey", Err: fmt.Errorf("delete_service: %w", err)})
				continue
			}
			delete(famMap(f), name)
		case nil:
			if !isUnknownOp(op) {
				rejected = append(rejected, Rejected{Op: i, Kind: "Op", Err: fmt.Errorf("empty op")})
			}
		default:
			// Global-view ops are not node-local state.
		}
	}
	if b.Reset {
		for f := range n.services {
			touched[f] = true
		}
	}
	return out, touched, rejected
}

// Len is the number of services n holds, of every family.
func (n *NodeLocal) Len() int {
	total := 0
	for _, m := range n.services {
		total += len(m)
	}
	return total
}

// State returns the canonical State of family f.
func (n *NodeLocal) State(f localnode.Family) *localnode.State {
	m := n.services[f]
	st := &localnode.State{Family: f, Services: make([]localnode.Service, 0, len(m))}
	for _, name := range slices.SortedFunc(maps.Keys(m), localnode.PortName.Compare) {
		st.Services = append(st.Services, m[name])
	}
	return st
}

// RunBackend watches the node-local state of opts.Families at opts.Address and hands b a
// complete State of a family every time a batch changed it (and, after a reconnect that
// needed a full state, every family again), until ctx is done. A failed Sync is retried
// every retry interval (1s when 0) until it succeeds or a newer State replaces it.
// It returns nil when ctx is done, or an error if the address is unusable.
func RunBackend(ctx context.Context, opts Options, b backend.FullState, retry time.Duration) error {
	opts.defaults()
	if retry <= 0 {
		retry = time.Second
	}
	families := opts.Families
	if len(families) == 0 {
		families = []localnode.Family{localnode.IPv4}
	}
	req := &localnodev1.WatchRequest{NodeLocal: true}
	for _, f := range families {
		req.Families = append(req.Families, localnodev1.FamilyFromLocal(f))
	}
	RegisterMetrics()
	logger := klog.FromContext(ctx)
	state := NewNodeLocal()
	synced := map[localnode.Family]bool{}
	// pending holds families whose last Sync failed.
	pending := map[localnode.Family]bool{}
	syncFamilies := func(ctx context.Context, fams map[localnode.Family]bool) {
		for _, f := range families {
			if !fams[f] {
				continue
			}
			st := state.State(f)
			if err := b.Sync(ctx, st); err != nil {
				logger.Error(err, "Backend sync failed; will retry", "ipFamily", f, "services", len(st.Services))
				pending[f] = true
				continue
			}
			synced[f] = true
			delete(pending, f)
		}
	}
	apply := func(batch *Batch) error {
		next, touched, rejected := state.ApplyValid(batch)
		reportRejected(logger, opts.Address, rejected)
		if n := next.Len(); n > opts.MaxPendingObjects {
			return &LimitError{Limit: "MaxPendingObjects", Max: int64(opts.MaxPendingObjects), Got: int64(n),
				What: "node-local services the server's batches add up to"}
		}
		state = next
		for _, f := range families {
			// The first complete state of a family is handed on even if it is empty.
			if !synced[f] || pending[f] {
				touched[f] = true
			}
		}
		syncFamilies(ctx, touched)
		return nil
	}
	// Batches are applied on this goroutine, and failed syncs retried here between them,
	// so the backend is never called concurrently.
	type result struct {
		batch *Batch
		err   chan error
	}
	batches := make(chan result)
	watchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- watchLoop(watchCtx, opts, req, func(b *Batch) error {
			r := result{batch: b, err: make(chan error, 1)}
			select {
			case batches <- r:
			case <-watchCtx.Done():
				return watchCtx.Err()
			}
			return <-r.err
		})
	}()
	ticker := time.NewTicker(retry)
	defer ticker.Stop()
	for {
		select {
		case r := <-batches:
			r.err <- apply(r.batch)
		case <-ticker.C:
			if len(pending) > 0 {
				syncFamilies(ctx, maps.Clone(pending))
			}
		case err := <-done:
			return err
		}
	}
}
