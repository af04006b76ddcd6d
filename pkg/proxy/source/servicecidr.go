package source

import (
	"context"

	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// ServiceCIDRHandler is implemented by a Handler that also wants the cluster's
// networking.k8s.io/v1 ServiceCIDR objects one by one, as a LocalNode server does to
// serve them by name. (A proxier wants only their union: config.ServiceCIDRHandler.)
// The objects are shared and must not be modified. A source that delivers them
// implements ServiceCIDRSource; it delivers every existing object as an add, then
// OnServiceCIDRsSynced, then changes.
//
// It is an optional interface, not part of Handler, so that Handlers written before it
// existed keep compiling.
type ServiceCIDRHandler interface {
	OnServiceCIDRAdd(cidr *networkingv1.ServiceCIDR)
	OnServiceCIDRUpdate(old, cidr *networkingv1.ServiceCIDR)
	OnServiceCIDRDelete(cidr *networkingv1.ServiceCIDR)
	OnServiceCIDRsSynced()
}

// ServiceCIDRSource is implemented by a Source that delivers ServiceCIDRs to a Handler
// implementing ServiceCIDRHandler, so a consumer knows whether to wait for
// OnServiceCIDRsSynced: a source without ServiceCIDRs never calls it.
type ServiceCIDRSource interface {
	Source
	DeliversServiceCIDRs() bool
}

// DeliversServiceCIDRs implements ServiceCIDRSource.
func (k *Kubernetes) DeliversServiceCIDRs() bool { return !k.noServiceCIDRs }

// registerServiceCIDRs registers h on the factories' ServiceCIDR informer, which must
// not have started, and returns what signals OnServiceCIDRsSynced once it has listed
// (or gives up when ctx is done); run it after starting the factories.
func registerServiceCIDRs(ctx context.Context, factories *InformerFactories, h ServiceCIDRHandler) (waitSynced func()) {
	informer := factories.Unfiltered.Networking().V1().ServiceCIDRs().Informer()
	logger := klog.FromContext(ctx)
	reg, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if c, ok := obj.(*networkingv1.ServiceCIDR); ok {
				h.OnServiceCIDRAdd(c)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*networkingv1.ServiceCIDR)
			c, ok2 := newObj.(*networkingv1.ServiceCIDR)
			if ok1 && ok2 {
				h.OnServiceCIDRUpdate(o, c)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if c, ok := obj.(*networkingv1.ServiceCIDR); ok {
				h.OnServiceCIDRDelete(c)
			}
		},
	})
	if err != nil {
		// Only a stopped informer refuses a handler, and this one has not started.
		logger.Error(err, "Not delivering ServiceCIDRs")
		return func() {}
	}
	return func() {
		if cache.WaitForNamedCacheSync("serviceCIDR source", ctx.Done(), reg.HasSynced) {
			h.OnServiceCIDRsSynced()
		}
	}
}
