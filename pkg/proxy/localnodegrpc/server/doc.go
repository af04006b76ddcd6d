// Package server serves a node's state over gRPC (the LocalNode service of
// k8s.io/kube-proxy/pkg/proxy/localnodegrpc/api/v1): it runs any source through the brain,
// exactly as proxyrun does for an in-process backend, and streams the node-local
// services of each family, and the global view (the cluster's Services and
// EndpointSlices before node-local filtering, its ServiceCIDRs when the source delivers
// them, and this Node) to every watcher.
//
// The state is a set of keyed objects, each stamped with the revision that last changed
// it; deletions leave a tombstone. A watcher is only a revision: whenever the state moves
// on, it is sent every object changed since its revision, read from the shared store at
// that moment. So a slow watcher is sent the latest value of each key (coalesced), and
// what it costs the server while it does not read is the one batch it is being sent,
// never a queue. A watcher that reconnects to the same instance with a revision the
// store still covers gets only the changes since; one whose revision predates
// compacted tombstones, or comes from another instance, gets the full state again.
//
// The server is reachable by anything that can open its socket, so it defends itself:
// Listen never replaces anything but a stale socket, plain TCP is served only on
// loopback, and connections that hold a slot without an RPC in progress are closed
// (after an idle timeout, or the oldest first when the slots run out) so that they
// cannot crowd out real clients.
//
// Allowed imports: the library (localnode, localnodegrpc/api/v1, backend, source,
// proxyrun), the standard library, k8s.io/{api,apimachinery,klog}, component-base
// metrics and google.golang.org/{grpc,protobuf}. No proxier.
package server
