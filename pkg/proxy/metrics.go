package proxy

import "k8s.io/kube-proxy/pkg/proxy/metrics"

// The change trackers report the upstream kube-proxy change metrics
// (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{total,pending}).
// Metrics that are not registered (RegisterMetrics not called, e.g. in a
// library user) are no-ops in component-base, so these are always safe.

func recordServiceChange()           { metrics.ServiceChangesTotal.Inc() }
func setServiceChangesPending(n int) { metrics.ServiceChangesPending.Set(float64(n)) }
func recordEndpointChange()          { metrics.EndpointChangesTotal.Inc() }
func incEndpointChangesPending()     { metrics.EndpointChangesPending.Inc() }
func resetEndpointChangesPending()   { metrics.EndpointChangesPending.Set(0) }
