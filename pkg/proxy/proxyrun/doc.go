// Package proxyrun runs a service proxy built on this library: it feeds a Source's events
// into the brain's change trackers, syncs through runner.BoundedFrequencyRunner, computes
// the node-local State of each IP family, and calls the backend only when that State
// actually changed (or to retry a failed sync). It reports to the proxy health server and
// records kube-proxy's sync metrics, so a library proxy is observed like kube-proxy.
//
//	err := proxyrun.Run(ctx, source.NewKubernetes(client, node, 15*time.Minute),
//		myBackend, proxyrun.Options{NodeName: node, MinSyncInterval: time.Second})
//
// Metrics are recorded into pkg/proxy/metrics' collectors; like kube-proxy, the program
// decides whether to expose them, by calling metrics.RegisterMetrics once (a library proxy
// would pass the nftables mode, whose metric set is the smallest) and serving the legacy
// registry.
//
// Allowed imports: the brain (pkg/proxy, pkg/proxy/{runner,healthcheck,metrics}) and the
// library packages (localnode, backend, source), the standard library and
// k8s.io/{api,apimachinery,klog}. No backend.
package proxyrun
