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

	localnodev1 "k8s.io/kube-proxy/pkg/proxy/localnode/api/v1"
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
// leaves nothing half applied.
func (g *Global) Apply(b *Batch) (*Global, error) {
	out := newGlobal()
	if !b.Reset {
		out.Services, out.Slices, out.Node = maps.Clone(g.Services), maps.Clone(g.Slices), g.Node
		out.ServiceCIDRs = maps.Clone(g.ServiceCIDRs)
		if out.ServiceCIDRs == nil {
			out.ServiceCIDRs = map[types.NamespacedName]*networkingv1.ServiceCIDR{}
		}
	}
	for i, op := range b.Ops {
		switch o := op.GetOp().(type) {
		case *localnodev1.Op_SetGlobalService:
			svc, err := localnodev1.GlobalServiceToAPI(o.SetGlobalService)
			if err != nil {
				return nil, fmt.Errorf("ops[%d]: %w", i, err)
			}
			out.Services[types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}] = svc
		case *localnodev1.Op_DeleteGlobalService:
			delete(out.Services, types.NamespacedName{Namespace: o.DeleteGlobalService.GetNamespace(), Name: o.DeleteGlobalService.GetName()})
		case *localnodev1.Op_SetEndpointSlice:
			s, err := localnodev1.EndpointSliceToAPI(o.SetEndpointSlice)
			if err != nil {
				return nil, fmt.Errorf("ops[%d]: %w", i, err)
			}
			out.Slices[types.NamespacedName{Namespace: s.Namespace, Name: s.Name}] = s
		case *localnodev1.Op_DeleteEndpointSlice:
			delete(out.Slices, types.NamespacedName{Namespace: o.DeleteEndpointSlice.GetNamespace(), Name: o.DeleteEndpointSlice.GetName()})
		case *localnodev1.Op_SetNode:
			n, err := localnodev1.NodeToAPI(o.SetNode)
			if err != nil {
				return nil, fmt.Errorf("ops[%d]: %w", i, err)
			}
			out.Node = n
		case *localnodev1.Op_DeleteNode:
			out.Node = nil
		case *localnodev1.Op_SetServiceCidr:
			c, err := localnodev1.ServiceCIDRToAPI(o.SetServiceCidr)
			if err != nil {
				return nil, fmt.Errorf("ops[%d]: %w", i, err)
			}
			out.ServiceCIDRs[types.NamespacedName{Name: c.Name}] = c
		case *localnodev1.Op_DeleteServiceCidr:
			delete(out.ServiceCIDRs, types.NamespacedName{Name: o.DeleteServiceCidr.GetName()})
		case nil:
			return nil, fmt.Errorf("ops[%d]: empty op", i)
		}
	}
	return out, nil
}

// Run implements source.Source.
func (s *Source) Run(ctx context.Context, h source.Handler) error {
	if h == nil {
		return fmt.Errorf("localnode client source: nil handler")
	}
	delivered := newGlobal()
	first := true
	var topology map[string]string
	apply := func(b *Batch) error {
		next, err := delivered.Apply(b)
		if err != nil {
			return err
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
			if labels := topologyLabels(next.Node); topology == nil || !maps.Equal(labels, topology) {
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

// topologyLabels picks the Node labels the brain's topology code reads, as
// config.NodeTopologyConfig does.
func topologyLabels(n *v1.Node) map[string]string {
	out := map[string]string{}
	if z, ok := n.Labels[v1.LabelTopologyZone]; ok {
		out[v1.LabelTopologyZone] = z
	}
	return out
}
