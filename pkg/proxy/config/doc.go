// Package config turns client-go informer events for Services, EndpointSlices,
// Nodes and ServiceCIDRs into calls on small handler interfaces
// (ServiceHandler, EndpointSliceHandler, NodeHandler, NodeTopologyHandler,
// ServiceCIDRHandler). Proxiers and third-party service proxies implement
// those interfaces; this package knows nothing about how they program the
// data plane.
//
// Allowed imports: the standard library, k8s.io/api, k8s.io/apimachinery,
// k8s.io/client-go and k8s.io/klog. It must not import any other package of
// this module, so that pkg/proxy can embed its interfaces.
package config
