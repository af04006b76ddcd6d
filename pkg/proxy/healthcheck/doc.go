// Package healthcheck serves kube-proxy's HTTP health endpoints: the proxy
// health server (/healthz and /livez, normally on port 10256), which reports
// stale rule syncs and node eligibility, and the per-Service servers that
// answer load-balancer probes on each Service's healthCheckNodePort with the
// number of local endpoints.
//
// It is a brain package: it may import the standard library,
// k8s.io/{api,apimachinery,client-go,klog,utils}, pkg/proxy/metrics and
// pkg/proxy/util. It must not import pkg/proxy itself (the node source is a
// small interface) nor any backend.
package healthcheck
