// Package proxyrun runs a service proxy built on this library: it feeds a Source's events
// into the brain's change trackers, syncs through runner.BoundedFrequencyRunner, computes
// the node-local State of each IP family, and calls the backend only when that State
// actually changed (or to retry a failed sync). It reports to the proxy health server and
// records kube-proxy's sync metrics, so a library proxy is observed like kube-proxy.
//
//	err := proxyrun.Run(ctx, source.NewKubernetes(client, node, 15*time.Minute),
//		myBackend, proxyrun.Options{NodeName: node, MinSyncInterval: time.Second})
//
// To serve /healthz as kube-proxy does, give the health server a node holder and the
// Proxy the same one, so the Node the source delivers reaches it:
//
//	nodes := &proxy.NodeManager{}
//	hs := healthcheck.NewProxyHealthServer("0.0.0.0:10256", 2*time.Minute, nodes)
//	go hs.Run(ctx)
//	err := proxyrun.Run(ctx, src, myBackend, proxyrun.Options{NodeName: node, Health: hs, Node: nodes})
//
// A program driving a Proxy by hand (tests, benchmarks) starts the source, waits for
// Proxy.Synced or Proxy.WaitForInitial, then calls Sync or SyncReport.
//
// Metrics are recorded into pkg/proxy/metrics' collectors; like kube-proxy, the program
// decides whether to expose them, by calling metrics.RegisterMetrics once (a library proxy
// would pass the nftables mode, whose metric set is the smallest) and serving the legacy
// registry.
//
// Allowed imports: the brain (pkg/proxy, pkg/proxy/{config,syncshell,healthcheck,metrics})
// and the library packages (localnode, backend, source; not source/manifests, whose fake
// clientset a proxy on another source should not link), the standard library and
// k8s.io/{api,apimachinery,klog}. No backend.
package proxyrun
