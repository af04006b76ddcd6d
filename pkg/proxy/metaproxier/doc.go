// Package metaproxier combines an IPv4 and an IPv6 proxy.Provider into one
// dual-stack Provider.
//
// Services carry addresses of both families, so every Service event goes to
// both wrapped providers; each provider's change tracker drops what is not of
// its family. An EndpointSlice holds addresses of exactly one family (its
// AddressType), so it is routed to the matching provider only.
//
// Allowed imports: the standard library, k8s.io/api, k8s.io/klog and
// k8s.io/kube-proxy/pkg/proxy. Never a backend package.
package metaproxier
