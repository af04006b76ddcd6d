package config

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	v1informers "k8s.io/client-go/informers/core/v1"
	discoveryv1informers "k8s.io/client-go/informers/discovery/v1"
	networkingv1informers "k8s.io/client-go/informers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ServiceHandler receives Service events. Implementations must not modify
// the objects they are given: they are shared with the informer cache.
type ServiceHandler interface {
	// OnServiceAdd is called when a Service is created.
	OnServiceAdd(service *v1.Service)
	// OnServiceUpdate is called when a Service changes.
	OnServiceUpdate(oldService, service *v1.Service)
	// OnServiceDelete is called when a Service is deleted.
	OnServiceDelete(service *v1.Service)
	// OnServiceSynced is called once every Service that existed when the
	// watch started has been passed to OnServiceAdd.
	OnServiceSynced()
}

// EndpointSliceHandler receives EndpointSlice events. Implementations must
// not modify the objects they are given.
type EndpointSliceHandler interface {
	// OnEndpointSliceAdd is called when an EndpointSlice is created.
	OnEndpointSliceAdd(endpointSlice *discoveryv1.EndpointSlice)
	// OnEndpointSliceUpdate is called when an EndpointSlice changes.
	OnEndpointSliceUpdate(oldEndpointSlice, newEndpointSlice *discoveryv1.EndpointSlice)
	// OnEndpointSliceDelete is called when an EndpointSlice is deleted.
	OnEndpointSliceDelete(endpointSlice *discoveryv1.EndpointSlice)
	// OnEndpointSlicesSynced is called once every pre-existing
	// EndpointSlice has been passed to OnEndpointSliceAdd.
	OnEndpointSlicesSynced()
}

// NodeHandler receives events for kube-proxy's own Node.
type NodeHandler interface {
	// OnNodeChange is called when the Node is created or changes.
	OnNodeChange(node *v1.Node)
	// OnNodeDelete is called when the Node is deleted.
	OnNodeDelete(node *v1.Node)
	// OnNodeSynced is called once the pre-existing Node has been reported.
	OnNodeSynced()
}

// NodeTopologyHandler receives the topology labels of kube-proxy's Node when
// they change.
type NodeTopologyHandler interface {
	// OnTopologyChange is called with the Node's current topology labels
	// (today only topology.kubernetes.io/zone). The map must not be modified.
	OnTopologyChange(topologyLabels map[string]string)
}

// ServiceCIDRHandler receives the union of the cluster's Service CIDRs.
type ServiceCIDRHandler interface {
	// OnServiceCIDRsChanged is called with every CIDR of every ServiceCIDR
	// object, in no particular order, whenever that set may have changed.
	OnServiceCIDRsChanged(cidrs []string)
}

// handlerList is a registration list that is safe to extend while events are
// being delivered.
type handlerList[H any] struct {
	mu       sync.RWMutex
	handlers []H
}

func (l *handlerList[H]) add(h H) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.handlers = append(l.handlers, h)
}

// each calls f for every handler registered when the call starts.
func (l *handlerList[H]) each(f func(H)) {
	for _, h := range l.snapshot() {
		f(h)
	}
}

func (l *handlerList[H]) snapshot() []H {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return slices.Clip(l.handlers)
}

// objectFrom extracts a T from an informer delete notification, which may be
// the object itself or a tombstone wrapping it.
func objectFrom[T any](obj interface{}) (T, bool) {
	if t, ok := obj.(T); ok {
		return t, true
	}
	if tombstone, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		if t, ok := tombstone.Obj.(T); ok {
			return t, true
		}
	}
	var zero T
	utilruntime.HandleError(fmt.Errorf("unexpected object type %T from informer", obj))
	return zero, false
}

// typedFuncs adapts typed callbacks to an informer's untyped ones, so that the
// type assertion, tombstone unwrapping and the report of an unexpected type live
// in one place. An update is delivered only when both objects have type T.
func typedFuncs[T any](add func(T), update func(oldObj, newObj T), del func(T)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			if o, ok := objectFrom[T](obj); ok {
				add(o)
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			o, ok := objectFrom[T](oldObj)
			if !ok {
				return
			}
			if n, ok := objectFrom[T](newObj); ok {
				update(o, n)
			}
		},
		DeleteFunc: func(obj interface{}) {
			if o, ok := objectFrom[T](obj); ok {
				del(o)
			}
		},
	}
}

func addHandler(informer cache.SharedIndexInformer, funcs cache.ResourceEventHandlerFuncs, resync time.Duration) cache.InformerSynced {
	reg, err := informer.AddEventHandlerWithResyncPeriod(funcs, resync)
	if err != nil {
		// Only a stopped informer refuses handlers; it will never sync.
		utilruntime.HandleError(fmt.Errorf("adding event handler: %w", err))
		return func() bool { return false }
	}
	return reg.HasSynced
}

// ServiceConfig delivers Service informer events to ServiceHandlers.
type ServiceConfig struct {
	listerSynced cache.InformerSynced
	handlers     handlerList[ServiceHandler]
	logger       klog.Logger
}

// NewServiceConfig registers on serviceInformer; handlers added later with
// RegisterEventHandler receive its events.
func NewServiceConfig(ctx context.Context, serviceInformer v1informers.ServiceInformer, resyncPeriod time.Duration) *ServiceConfig {
	c := &ServiceConfig{logger: klog.FromContext(ctx)}
	c.listerSynced = addHandler(serviceInformer.Informer(), typedFuncs(
		func(svc *v1.Service) {
			c.handlers.each(func(h ServiceHandler) {
				c.logger.V(4).Info("Calling handler.OnServiceAdd", "service", klog.KObj(svc))
				h.OnServiceAdd(svc)
			})
		},
		func(oldSvc, svc *v1.Service) {
			c.handlers.each(func(h ServiceHandler) {
				c.logger.V(4).Info("Calling handler.OnServiceUpdate", "service", klog.KObj(svc))
				h.OnServiceUpdate(oldSvc, svc)
			})
		},
		func(svc *v1.Service) {
			c.handlers.each(func(h ServiceHandler) {
				c.logger.V(4).Info("Calling handler.OnServiceDelete", "service", klog.KObj(svc))
				h.OnServiceDelete(svc)
			})
		},
	), resyncPeriod)
	return c
}

// RegisterEventHandler adds a handler. Register before the informer starts,
// or the handler misses the initial adds.
func (c *ServiceConfig) RegisterEventHandler(handler ServiceHandler) {
	c.handlers.add(handler)
}

// Run waits for the informer to sync, then calls OnServiceSynced on every
// handler. It returns early, without calling them, if stopCh closes first.
func (c *ServiceConfig) Run(stopCh <-chan struct{}) {
	c.logger.Info("Starting service config controller")
	if !cache.WaitForNamedCacheSync("service config", stopCh, c.listerSynced) {
		return
	}
	for _, h := range c.handlers.snapshot() {
		c.logger.V(3).Info("Calling handler.OnServiceSynced()")
		h.OnServiceSynced()
	}
}

// EndpointSliceConfig delivers EndpointSlice informer events to
// EndpointSliceHandlers.
type EndpointSliceConfig struct {
	listerSynced cache.InformerSynced
	handlers     handlerList[EndpointSliceHandler]
	logger       klog.Logger
}

// NewEndpointSliceConfig registers on endpointSliceInformer; handlers added
// later with RegisterEventHandler receive its events.
func NewEndpointSliceConfig(ctx context.Context, endpointSliceInformer discoveryv1informers.EndpointSliceInformer, resyncPeriod time.Duration) *EndpointSliceConfig {
	c := &EndpointSliceConfig{logger: klog.FromContext(ctx)}
	c.listerSynced = addHandler(endpointSliceInformer.Informer(), typedFuncs(
		func(slice *discoveryv1.EndpointSlice) {
			c.handlers.each(func(h EndpointSliceHandler) {
				c.logger.V(4).Info("Calling handler.OnEndpointSliceAdd", "endpointSlice", klog.KObj(slice))
				h.OnEndpointSliceAdd(slice)
			})
		},
		func(oldSlice, slice *discoveryv1.EndpointSlice) {
			c.handlers.each(func(h EndpointSliceHandler) {
				c.logger.V(4).Info("Calling handler.OnEndpointSliceUpdate", "endpointSlice", klog.KObj(slice))
				h.OnEndpointSliceUpdate(oldSlice, slice)
			})
		},
		func(slice *discoveryv1.EndpointSlice) {
			c.handlers.each(func(h EndpointSliceHandler) {
				c.logger.V(4).Info("Calling handler.OnEndpointSliceDelete", "endpointSlice", klog.KObj(slice))
				h.OnEndpointSliceDelete(slice)
			})
		},
	), resyncPeriod)
	return c
}

// RegisterEventHandler adds a handler. Register before the informer starts.
func (c *EndpointSliceConfig) RegisterEventHandler(handler EndpointSliceHandler) {
	c.handlers.add(handler)
}

// Run waits for the informer to sync, then calls OnEndpointSlicesSynced on
// every handler, unless stopCh closes first.
func (c *EndpointSliceConfig) Run(stopCh <-chan struct{}) {
	c.logger.Info("Starting endpoint slice config controller")
	if !cache.WaitForNamedCacheSync("endpoint slice config", stopCh, c.listerSynced) {
		return
	}
	for _, h := range c.handlers.snapshot() {
		c.logger.V(3).Info("Calling handler.OnEndpointSlicesSynced()")
		h.OnEndpointSlicesSynced()
	}
}

// NodeConfig delivers Node informer events to NodeHandlers. Adds and updates
// both become OnNodeChange.
type NodeConfig struct {
	listerSynced cache.InformerSynced
	handlers     handlerList[NodeHandler]
	logger       klog.Logger
}

// NewNodeConfig registers on nodeInformer (normally a single-node informer).
func NewNodeConfig(ctx context.Context, nodeInformer v1informers.NodeInformer, resyncPeriod time.Duration) *NodeConfig {
	c := &NodeConfig{logger: klog.FromContext(ctx)}
	change := func(node *v1.Node) {
		c.handlers.each(func(h NodeHandler) {
			c.logger.V(4).Info("Calling handler.OnNodeChange", "node", klog.KObj(node))
			h.OnNodeChange(node)
		})
	}
	c.listerSynced = addHandler(nodeInformer.Informer(), typedFuncs(
		change,
		func(_, node *v1.Node) { change(node) },
		func(node *v1.Node) {
			c.handlers.each(func(h NodeHandler) {
				c.logger.V(4).Info("Calling handler.OnNodeDelete", "node", klog.KObj(node))
				h.OnNodeDelete(node)
			})
		},
	), resyncPeriod)
	return c
}

// RegisterEventHandler adds a handler. Register before the informer starts.
func (c *NodeConfig) RegisterEventHandler(handler NodeHandler) {
	c.handlers.add(handler)
}

// Run waits for the informer to sync, then calls OnNodeSynced on every
// handler, unless stopCh closes first.
func (c *NodeConfig) Run(stopCh <-chan struct{}) {
	c.logger.Info("Starting node config controller")
	if !cache.WaitForNamedCacheSync("node config", stopCh, c.listerSynced) {
		return
	}
	for _, h := range c.handlers.snapshot() {
		c.logger.V(3).Info("Calling handler.OnNodeSynced()")
		h.OnNodeSynced()
	}
}

// ServiceCIDRConfig tracks the union of all ServiceCIDR objects' CIDRs and
// reports it to ServiceCIDRHandlers after every event.
type ServiceCIDRConfig struct {
	listerSynced cache.InformerSynced
	handlers     handlerList[ServiceCIDRHandler]
	logger       klog.Logger

	mu sync.Mutex
	// refs counts how many ServiceCIDR objects list each CIDR, so that
	// deleting one of two objects naming the same CIDR keeps it.
	refs map[string]int
}

// NewServiceCIDRConfig registers on serviceCIDRInformer.
func NewServiceCIDRConfig(ctx context.Context, serviceCIDRInformer networkingv1informers.ServiceCIDRInformer, resyncPeriod time.Duration) *ServiceCIDRConfig {
	c := &ServiceCIDRConfig{logger: klog.FromContext(ctx), refs: map[string]int{}}
	c.listerSynced = addHandler(serviceCIDRInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj interface{}) { c.handleEvent(nil, obj) },
		UpdateFunc: func(oldObj, newObj interface{}) { c.handleEvent(oldObj, newObj) },
		DeleteFunc: func(obj interface{}) { c.handleEvent(obj, nil) },
	}, resyncPeriod)
	return c
}

// RegisterEventHandler adds a handler. Register before the informer starts.
func (c *ServiceCIDRConfig) RegisterEventHandler(handler ServiceCIDRHandler) {
	c.handlers.add(handler)
}

// Run waits for the informer to sync, then reports the current CIDRs to every
// handler (also when there are none), unless stopCh closes first.
func (c *ServiceCIDRConfig) Run(stopCh <-chan struct{}) {
	c.logger.Info("Starting serviceCIDR config controller")
	if !cache.WaitForNamedCacheSync("serviceCIDR config", stopCh, c.listerSynced) {
		return
	}
	c.handleEvent(nil, nil)
}

func (c *ServiceCIDRConfig) handleEvent(oldObj, newObj interface{}) {
	var oldCIDR, newCIDR *networkingv1.ServiceCIDR
	var ok bool
	if oldObj != nil {
		if oldCIDR, ok = objectFrom[*networkingv1.ServiceCIDR](oldObj); !ok {
			return
		}
	}
	if newObj != nil {
		if newCIDR, ok = objectFrom[*networkingv1.ServiceCIDR](newObj); !ok {
			return
		}
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if oldCIDR != nil {
		for _, cidr := range oldCIDR.Spec.CIDRs {
			if c.refs[cidr]--; c.refs[cidr] <= 0 {
				delete(c.refs, cidr)
			}
		}
	}
	if newCIDR != nil {
		for _, cidr := range newCIDR.Spec.CIDRs {
			c.refs[cidr]++
		}
	}
	cidrs := make([]string, 0, len(c.refs))
	for cidr := range c.refs {
		cidrs = append(cidrs, cidr)
	}
	// Delivered under the lock so handlers see updates in event order.
	for _, h := range c.handlers.snapshot() {
		c.logger.V(4).Info("Calling handler.OnServiceCIDRsChanged", "cidrs", cidrs)
		h.OnServiceCIDRsChanged(cidrs)
	}
}

// NodeTopologyConfig watches kube-proxy's Node and tells NodeTopologyHandlers
// about changes to its topology labels. It has no Run: it needs no sync
// signal, since the Node is waited for by the NodeManager.
type NodeTopologyConfig struct {
	handlers handlerList[NodeTopologyHandler]
	logger   klog.Logger

	mu             sync.Mutex
	topologyLabels map[string]string
}

// NewNodeTopologyConfig registers on nodeInformer.
func NewNodeTopologyConfig(ctx context.Context, nodeInformer v1informers.NodeInformer, resyncPeriod time.Duration) *NodeTopologyConfig {
	c := &NodeTopologyConfig{logger: klog.FromContext(ctx), topologyLabels: map[string]string{}}
	_ = addHandler(nodeInformer.Informer(), cache.ResourceEventHandlerFuncs{
		AddFunc:    c.handleNode,
		UpdateFunc: func(_, newObj interface{}) { c.handleNode(newObj) },
		// A deleted Node makes kube-proxy exit (see NodeManager); nothing
		// to report here.
		DeleteFunc: func(interface{}) {},
	}, resyncPeriod)
	return c
}

// RegisterEventHandler adds a handler. Register before the informer starts.
func (c *NodeTopologyConfig) RegisterEventHandler(handler NodeTopologyHandler) {
	c.handlers.add(handler)
}

// topologyLabelKeys are the Node labels CategorizeEndpoints consults. Keep in
// step with pkg/proxy's topology code.
var topologyLabelKeys = []string{v1.LabelTopologyZone}

// NodeTopologyLabels returns the labels of node that the brain's topology
// code consults: what NodeTopologyConfig hands its handlers. Every other
// source of a Node (static objects, manifests, the node-local gRPC client,
// the binary's own informer) uses it too, so that all hand the proxiers the
// same labels. A nil node has none.
func NodeTopologyLabels(node *v1.Node) map[string]string {
	labels := make(map[string]string, len(topologyLabelKeys))
	if node == nil {
		return labels
	}
	for _, k := range topologyLabelKeys {
		if v, ok := node.Labels[k]; ok {
			labels[k] = v
		}
	}
	return labels
}

func (c *NodeTopologyConfig) handleNode(obj interface{}) {
	node, ok := objectFrom[*v1.Node](obj)
	if !ok {
		return
	}
	labels := NodeTopologyLabels(node)

	c.mu.Lock()
	defer c.mu.Unlock()
	if maps.Equal(c.topologyLabels, labels) {
		return
	}
	c.topologyLabels = labels
	for _, h := range c.handlers.snapshot() {
		c.logger.V(4).Info("Calling handler.OnTopologyChange", "node", klog.KObj(node), "labels", labels)
		h.OnTopologyChange(labels)
	}
}
