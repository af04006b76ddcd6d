// Package syncshell is the per-IP-family sync loop every backend sits on:
// the iptables, nftables, ipvs and winkernel proxiers and the library's
// proxyrun.
//
// A Shell owns what is the same for all of them: the Service and EndpointSlice
// change trackers and the informer handlers feeding them, the bounded-frequency
// runner, the choice between a full and a partial sync (a full one first, after
// a failed sync, after a topology change, periodically if asked, and when the
// backend's RulesChecker finds its rules gone), the traffic-policy decision for
// each changed service port (proxy.ResolveTrafficPolicy, cached per port), and
// the report after a sync: sync and network-programming latency metrics, the
// no-local-endpoints totals, healthz, the per-service health check servers and
// stale UDP conntrack cleanup.
//
// A backend implements Backend: it is handed an Update (what changed, or
// everything) and programs it. It never re-decides traffic policy.
// kube-proxy's own proxiers also share ProxierOptions (upstream's timing),
// NewProxierShell (their one way to build and start a Shell) and HostOptions
// (the host-facing options the With* functions of the proxieropts
// sub-package set). The Shell, not each proxier, leaves out the ports and
// endpoints no backend can program, including any of a type the backend's
// makers never made; a Validator adds only a backend's own reasons.
//
// It may import the brain (k8s.io/kube-proxy/pkg/proxy and its config,
// runner, healthcheck, metrics and util packages), never a backend, and
// builds on every platform: Linux-only facilities such as conntrack cleanup
// are handed in as functions.
package syncshell
