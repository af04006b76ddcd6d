// Package proxy is the brain shared by every kube-proxy backend and by
// third-party service proxies: it turns Service and EndpointSlice objects into
// per-service-port state (ServicePortMap, EndpointsMap) through change trackers
// that accumulate informer events between syncs, decides which endpoints a
// node may use (CategorizeEndpoints: traffic policies, topology hints,
// terminating-endpoint fallback), and watches kube-proxy's own Node
// (NodeManager).
//
// The exported API matches upstream Kubernetes v1.37's k8s.io/kubernetes/pkg/proxy
// by name and signature, so out-of-tree proxies can switch by rewriting
// imports. Beyond it, this package adds, without changing anything upstream
// callers use:
//   - TrafficPolicy and ResolveTrafficPolicy: CategorizeEndpoints' decision for one
//     service port, with the no-endpoints action (NoEndpointsAction) a rule writer
//     needs, so that no proxier re-decides it;
//   - UsableEndpoints, ServicePortProblem and EndpointProblem: which service ports and
//     endpoints a proxier can program for a family, and why not;
//   - NewStaticNodeManager: NewNodeManager for an in-memory client (--manifests),
//     which waits for nothing;
//   - CompareServicePortNames, a total order for deterministic output;
//   - GetNodeHostIPs, the node addresses as upstream's pkg/util/node computes them.
//
// Allowed imports: the standard library, k8s.io/{api,apimachinery,client-go,klog,utils},
// and from this module pkg/features, pkg/proxy/config, pkg/proxy/metrics,
// pkg/proxy/util and pkg/proxy/apis/config. Never a backend package
// (iptables, nftables, ipvs, winkernel, metaproxier).
package proxy
