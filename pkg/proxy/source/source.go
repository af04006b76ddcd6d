package source

import (
	"context"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"k8s.io/kube-proxy/pkg/proxy/apis"
	"k8s.io/kube-proxy/pkg/proxy/config"
)

// Handler receives what a Source delivers. The objects are shared and must not be
// modified. proxyrun's proxy implements it.
type Handler interface {
	config.ServiceHandler
	config.EndpointSliceHandler
	config.NodeTopologyHandler
}

// Source delivers events to a Handler.
type Source interface {
	// Run delivers events to h until ctx is done, then returns nil. It first delivers
	// every existing object as an add, then OnServiceSynced and OnEndpointSlicesSynced
	// (in either order), and to an h that implements NodeHandler, this node's Node (if
	// any) and OnNodeSynced: the LocalNode server is not ready before it. It returns an
	// error, early, only if it cannot start at all.
	Run(ctx context.Context, h Handler) error
}

// serviceSelected reports whether kube-proxy's Service informer would deliver svc: not
// headless, and not claimed by another proxy.
func serviceSelected(svc *v1.Service) bool {
	if _, claimed := svc.Labels[apis.LabelServiceProxyName]; claimed {
		return false
	}
	return svc.Spec.ClusterIP != v1.ClusterIPNone
}

// sliceSelected reports whether kube-proxy's EndpointSlice informer would deliver slice:
// not one of a headless Service.
func sliceSelected(slice *discovery.EndpointSlice) bool {
	_, headless := slice.Labels[v1.IsHeadlessService]
	return !headless
}

// ServiceListOptions narrows a Service list or watch the way kube-proxy does.
func ServiceListOptions(o *metav1.ListOptions) {
	noProxyName, _ := labels.NewRequirement(apis.LabelServiceProxyName, selection.DoesNotExist, nil)
	o.LabelSelector = labels.NewSelector().Add(*noProxyName).String()
	o.FieldSelector = fields.OneTermNotEqualSelector("spec.clusterIP", v1.ClusterIPNone).String()
}

// EndpointSliceListOptions narrows an EndpointSlice list or watch the way kube-proxy does.
func EndpointSliceListOptions(o *metav1.ListOptions) {
	notHeadless, _ := labels.NewRequirement(v1.IsHeadlessService, selection.DoesNotExist, nil)
	o.LabelSelector = labels.NewSelector().Add(*notHeadless).String()
}

// NodeListOptions returns a tweak selecting only the Node named nodeName.
func NodeListOptions(nodeName string) func(*metav1.ListOptions) {
	return func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", nodeName).String()
	}
}
