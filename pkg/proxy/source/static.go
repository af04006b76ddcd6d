package source

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"k8s.io/kube-proxy/pkg/proxy/config"
)

// Static is an in-memory Source for tests: objects are set and deleted by hand and every
// change is delivered synchronously, before the call returns, to each running handler.
// Objects filtered out by kube-proxy's selectors (headless Services and their slices,
// Services with a service-proxy-name label) are held but not delivered, and an update that
// moves an object in or out of the selection is delivered as an add or a delete, as an
// informer would.
//
// Static is safe for concurrent use.
type Static struct {
	mu       sync.Mutex
	services map[types.NamespacedName]*v1.Service
	slices   map[types.NamespacedName]*discovery.EndpointSlice
	topology map[string]string
	node     *v1.Node
	handlers map[*Handler]Handler
}

// NewStatic returns an empty Static source.
func NewStatic() *Static {
	return &Static{
		services: map[types.NamespacedName]*v1.Service{},
		slices:   map[types.NamespacedName]*discovery.EndpointSlice{},
		topology: map[string]string{},
		handlers: map[*Handler]Handler{},
	}
}

// Run implements Source: it delivers what is held, then every later change, until ctx is
// done.
func (s *Static) Run(ctx context.Context, h Handler) error {
	if h == nil {
		return fmt.Errorf("static source: nil handler")
	}
	key := &h
	s.mu.Lock()
	for _, svc := range sortedValues(s.services) {
		if serviceSelected(svc) {
			h.OnServiceAdd(svc)
		}
	}
	h.OnServiceSynced()
	for _, slice := range sortedValues(s.slices) {
		if sliceSelected(slice) {
			h.OnEndpointSliceAdd(slice)
		}
	}
	h.OnEndpointSlicesSynced()
	if len(s.topology) > 0 {
		h.OnTopologyChange(maps.Clone(s.topology))
	}
	if nh, ok := h.(NodeHandler); ok {
		if s.node != nil {
			nh.OnNodeChange(s.node)
		}
		nh.OnNodeSynced()
	}
	s.handlers[key] = h
	s.mu.Unlock()

	<-ctx.Done()
	s.mu.Lock()
	delete(s.handlers, key)
	s.mu.Unlock()
	return nil
}

func sortedValues[T any](m map[types.NamespacedName]T) []T {
	keys := slices.SortedFunc(maps.Keys(m), func(a, b types.NamespacedName) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	out := make([]T, len(keys))
	for i, k := range keys {
		out[i] = m[k]
	}
	return out
}

// SetService adds svc or replaces the Service of the same namespace and name. A copy is
// kept, so the caller may reuse svc.
func (s *Static) SetService(svc *v1.Service) {
	svc = svc.DeepCopy()
	nn := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.services[nn]
	s.services[nn] = svc
	deliver(s, old, svc, serviceSelected,
		Handler.OnServiceAdd, Handler.OnServiceUpdate, Handler.OnServiceDelete)
}

// DeleteService deletes the Service namespace/name, if held.
func (s *Static) DeleteService(namespace, name string) {
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.services[nn]
	delete(s.services, nn)
	deliver(s, old, nil, serviceSelected,
		Handler.OnServiceAdd, Handler.OnServiceUpdate, Handler.OnServiceDelete)
}

// SetEndpointSlice adds slice or replaces the slice of the same namespace and name. A copy
// is kept.
func (s *Static) SetEndpointSlice(slice *discovery.EndpointSlice) {
	slice = slice.DeepCopy()
	nn := types.NamespacedName{Namespace: slice.Namespace, Name: slice.Name}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.slices[nn]
	s.slices[nn] = slice
	deliver(s, old, slice, sliceSelected,
		Handler.OnEndpointSliceAdd, Handler.OnEndpointSliceUpdate, Handler.OnEndpointSliceDelete)
}

// DeleteEndpointSlice deletes the EndpointSlice namespace/name, if held.
func (s *Static) DeleteEndpointSlice(namespace, name string) {
	nn := types.NamespacedName{Namespace: namespace, Name: name}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.slices[nn]
	delete(s.slices, nn)
	deliver(s, old, nil, sliceSelected,
		Handler.OnEndpointSliceAdd, Handler.OnEndpointSliceUpdate, Handler.OnEndpointSliceDelete)
}

// SetNode records this node (a copy; nil is DeleteNode). Handlers implementing
// NodeHandler hear of every call, as from an informer; OnTopologyChange, as with
// config.NodeTopologyConfig, is called only when the topology labels changed.
func (s *Static) SetNode(node *v1.Node) {
	if node == nil {
		s.DeleteNode()
		return
	}
	node = node.DeepCopy()
	labels := config.NodeTopologyLabels(node)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.node = node
	for _, h := range s.handlers {
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNodeChange(node)
		}
	}
	if maps.Equal(labels, s.topology) {
		return
	}
	s.topology = labels
	for _, h := range s.handlers {
		h.OnTopologyChange(maps.Clone(labels))
	}
}

// DeleteNode forgets this node, if held: handlers implementing NodeHandler are told with
// OnNodeDelete. The topology labels are kept, as an informer-fed kube-proxy keeps them
// (it exits instead).
func (s *Static) DeleteNode() {
	s.mu.Lock()
	defer s.mu.Unlock()
	old := s.node
	if old == nil {
		return
	}
	s.node = nil
	for _, h := range s.handlers {
		if nh, ok := h.(NodeHandler); ok {
			nh.OnNodeDelete(old)
		}
	}
}

// deliver turns a change from old to cur (either may be nil) into the informer event a
// handler would see, given which objects the selectors let through. Called with s.mu held.
func deliver[T comparable](s *Static, old, cur T, selected func(T) bool,
	add func(Handler, T), update func(Handler, T, T), del func(Handler, T)) {
	var zero T
	was := old != zero && selected(old)
	now := cur != zero && selected(cur)
	for _, h := range s.handlers {
		switch {
		case was && now:
			update(h, old, cur)
		case now:
			add(h, cur)
		case was:
			del(h, old)
		}
	}
}
