package proxy

// The change trackers report the upstream kube-proxy change metrics
// (kubeproxy_sync_proxy_rules_{service,endpoint}_changes_{total,pending}).
// These hooks keep the tracker code independent of how they are recorded.
//
// TODO(metrics): wire to pkg/proxy/metrics (ServiceChangesTotal,
// ServiceChangesPending, EndpointChangesTotal, EndpointChangesPending) once
// that package lands.

func recordServiceChange()           {}
func setServiceChangesPending(n int) {}
func recordEndpointChange()          {}
func incEndpointChangesPending()     {}
func resetEndpointChangesPending()   {}
