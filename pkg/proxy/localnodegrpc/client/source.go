package client

import (
	"context"
	"fmt"
	"maps"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"k8s.io/kube-proxy/pkg/proxy/config"
	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1"
	"k8s.io/kube-proxy/pkg/proxy/source"
)

// Source is a source.Source reading the global view of a LocalNode server. It delivers
// nothing before the first complete state; then every object as an add and both synced
// signals, ServiceCIDRs (to a handler that implements source.ServiceCIDRHandler), the Node (to a handler that implements source.NodeHandler) and its topology
// labels; then changes as updates, and after a reconnect that needed a full state, the
// difference between what it delivered and the new state, as an informer does after a
// relist.
type Source struct {
	opts Options
}

var _ source.Source = &Source{}
var _ source.ServiceCIDRSource = &Source{}

// DeliversServiceCIDRs implements source.ServiceCIDRSource. A server that predates
// ServiceCIDRs in the schema sends none: the handler is told they are synced, and
// empty, with the first state.
func (s *Source) DeliversServiceCIDRs() bool { return true }

// NewSource returns a Source for the server opts.Address names.
func NewSource(opts Options) *Source {
	opts.defaults()
	return &Source{opts: opts}
}

// Global is the global view: what a Source has delivered.
type Global struct {
	Services map[types.NamespacedName]*v1.Service
	Slices   map[types.NamespacedName]*discovery.EndpointSlice
	Node     *v1.Node
	// ServiceCIDRs are keyed by name alone: they are cluster-scoped.
	ServiceCIDRs map[types.NamespacedName]*networkingv1.ServiceCIDR
}

func newGlobal() *Global {
	return &Global{
		Services:     map[types.NamespacedName]*v1.Service{},
		Slices:       map[types.NamespacedName]*discovery.EndpointSlice{},
		ServiceCIDRs: map[types.NamespacedName]*networkingv1.ServiceCIDR{},
	}
}

// Apply decodes a batch onto a copy of g; g is unchanged, so a batch that does not decode
// leaves nothing half applied. Any object that does not decode fails the whole batch;
// ApplyValid skips it instead.
func (g *Global) Apply(b *Batch) (*Global, error) {
	out, rejected := g.ApplyValid(b)
	if len(rejected) > 0 {
		return nil, rejected[0]
	}
	return out, nil
}

// ApplyValid decodes a batch onto a copy of g (g is unchanged) and returns it with the
// objects it skipped because they do not decode: for those, what g held under the
// same name stays.
func (g *Global) ApplyValid(b *Batch) (*Global, []Rejected) {
	out := newGlobal()
	if !b.Reset {
		out.Services, out.Slices, out.Node = maps.Clone(g.Services), maps.Clone(g.Slices), g.Node
		out.ServiceCIDRs = maps.Clone(g.ServiceCIDRs)
		if out.Services == nil {
			out.Services = map[types.NamespacedName]*v1.Service{}
		}
		if out.Slices == nil {
			out.Slices = map[types.NamespacedName]*discovery.EndpointSlice{}
		}
		if out.ServiceCIDRs == nil {
			out.ServiceCIDRs = map[types.NamespacedName]*networkingv1.ServiceCIDR{}
		}
	}
	var rejected []Rejected
	reject := func(i int, kind, object string, err error) {
		rejected = append(rejected, Rejected{Op: i, Kind: kind, Object: object, Err: err})
	}
	for i, op := range b.Ops {
		switch o := op.GetOp().(type) {
		case *localnodev1.Op_SetGlobalService:
			key := types.NamespacedName{Namespace: o.SetGlobalService.GetNamespace(), Name: o.SetGlobalService.GetName()}
			svc, err := localnodev1.GlobalServiceToAPI(o.SetGlobalService)
			if err != nil {
				reject(i, "GlobalService", namespacedName(key), err)
				keepHeld(out.Services, g.Services, key, b.Reset)
				continue
			}
			out.Services[key] = svc
		case *localnodev1.Op_DeleteGlobalService:
			delete(out.Services, types.NamespacedName{Namespace: o.DeleteGlobalService.GetNamespace(), Name: o.DeleteGlobalService.GetName()})
		case *localnodev1.Op_SetEndpointSlice:
			key := types.NamespacedName{Namespace: o.SetEndpointSlice.GetNamespace(), Name: o.SetEndpointSlice.GetName()}
			s, err := localnodev1.EndpointSliceToAPI(o.SetEndpointSlice)
			if err != nil {
				reject(i, "EndpointSlice", namespacedName(key), err)
				keepHeld(out.Slices, g.Slices, key, b.Reset)
				continue
			}
			out.Slices[key] = s
		case *localnodev1.Op_DeleteEndpointSlice:
			delete(out.Slices, types.NamespacedName{Namespace: o.DeleteEndpointSlice.GetNamespace(), Name: o.DeleteEndpointSlice.GetName()})
		case *localnodev1.Op_SetNode:
			n, err := localnodev1.NodeToAPI(o.SetNode)
			if err != nil {
				reject(i, "Node", o.SetNode.GetName(), err)
				// The Node is this node's: losing it would make the binary exit.
				if b.Reset && out.Node == nil {
					out.Node = g.Node
				}
				continue
			}
			out.Node = n
		case *localnodev1.Op_DeleteNode:
			out.Node = nil
		case *localnodev1.Op_SetServiceCidr:
			key := types.NamespacedName{Name: o.SetServiceCidr.GetName()}
			c, err := localnodev1.ServiceCIDRToAPI(o.SetServiceCidr)
			if err != nil {
				reject(i, "ServiceCIDR", key.Name, err)
				keepHeld(out.ServiceCIDRs, g.ServiceCIDRs, key, b.Reset)
				continue
			}
			out.ServiceCIDRs[key] = c
		case *localnodev1.Op_DeleteServiceCidr:
			delete(out.ServiceCIDRs, types.NamespacedName{Name: o.DeleteServiceCidr.GetName()})
		case nil:
			if !isUnknownOp(op) {
				reject(i, "Op", "", fmt.Errorf("empty op"))
			}
		}
	}
	return out, rejected
}

// Len is the number of objects g holds.
func (g *Global) Len() int {
	n := len(g.Services) + len(g.Slices) + len(g.ServiceCIDRs)
	if g.Node != nil {
		n++
	}
	return n
}

// keepHeld keeps, for an object whose new version was rejected, what was held under its
// key: without a reset dst already has it (or what the batch did to it before), after
// one it is carried over from held unless the batch set it already.
func keepHeld[T any](dst, held map[types.NamespacedName]T, key types.NamespacedName, reset bool) {
	if !reset || key.Name == "" {
		return
	}
	if _, ok := dst[key]; ok {
		return
	}
	if v, ok := held[key]; ok {
		dst[key] = v
	}
}

// namespacedName is key as logs write an object: "namespace/name", or the name of a
// cluster-scoped one.
func namespacedName(key types.NamespacedName) string {
	if key.Namespace == "" {
		return key.Name
	}
	return key.String()
}

// Run implements source.Source.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	if h == nil {
		return fmt.Errorf("localnode client source: nil handler")
	}
	RegisterMetrics()
	logger := klog.FromContext(ctx)
	delivered := newGlobal()
	first := true
	var topology map[string]string
	apply := func(b *Batch) error {
		next, rejected := delivered.ApplyValid(b)
		reportRejected(logger, s.opts.Address, rejected)
		if n := next.Len(); n > s.opts.MaxPendingObjects {
			return &LimitError{Limit: "MaxPendingObjects", Max: int64(s.opts.MaxPendingObjects), Got: int64(n),
				What: "objects of the global view the server's batches add up to"}
		}
		// ServiceCIDRs go first, so the proxier knows the ranges by its first sync,
		// which follows the two lists' synced signals.
		if ch, ok := h.(source.ServiceCIDRHandler); ok {
			deliver(delivered.ServiceCIDRs, next.ServiceCIDRs, ch.OnServiceCIDRAdd, ch.OnServiceCIDRUpdate, ch.OnServiceCIDRDelete)
			if first {
				ch.OnServiceCIDRsSynced()
			}
		}
		deliver(delivered.Services, next.Services, h.OnServiceAdd, h.OnServiceUpdate, nil)
		if first {
			h.OnServiceSynced()
		}
		var deletedSlices []*discovery.EndpointSlice
		deliver(delivered.Slices, next.Slices, h.OnEndpointSliceAdd, h.OnEndpointSliceUpdate, func(s *discovery.EndpointSlice) {
			deletedSlices = append(deletedSlices, s)
		})
		for _, sl := range deletedSlices {
			h.OnEndpointSliceDelete(sl)
		}
		if first {
			h.OnEndpointSlicesSynced()
		}
		// Services go after their slices, as the brain expects of a deletion.
		deliver(delivered.Services, next.Services, nil, nil, h.OnServiceDelete)
		if next.Node != nil {
			if labels := config.NodeTopologyLabels(next.Node); topology == nil || !maps.Equal(labels, topology) {
				topology = labels
				h.OnTopologyChange(maps.Clone(labels))
			}
		}
		if nh, ok := h.(source.NodeHandler); ok {
			switch {
			case next.Node != nil && (delivered.Node == nil || !equality.Semantic.DeepEqual(next.Node, delivered.Node)):
				nh.OnNodeChange(next.Node)
			case next.Node == nil && delivered.Node != nil:
				nh.OnNodeDelete(delivered.Node)
			}
			if first {
				nh.OnNodeSynced()
			}
		}
		delivered, first = next, false
		return nil
	}
	return watchLoop(ctx, s.opts, &localnodev1.WatchRequest{Global: true}, apply)
}

// deliver calls add, update or del (when not nil) for what differs between old and cur.
func deliver[T comparable](old, cur map[types.NamespacedName]T, add func(T), update func(T, T), del func(T)) {
	for k, c := range cur {
		o, ok := old[k]
		switch {
		case !ok && add != nil:
			add(c)
		case ok && update != nil && o != c && !equality.Semantic.DeepEqual(o, c):
			update(o, c)
		}
	}
	if del == nil {
		return
	}
	for k, o := range old {
		if _, ok := cur[k]; !ok {
			del(o)
		}
	}
}
