// Package client reads a node's state from a LocalNode gRPC server (see
// k8s.io/kube-proxy/pkg/proxy/localnodegrpc/server) and hands it on, in one of two ways:
//
//   - Source is a source.Source built from the server's global view: the cluster's
//     Services, EndpointSlices and ServiceCIDRs and this Node. proxyrun runs any backend on it
//     unchanged, in another process than the API watcher.
//   - RunBackend hands the server's node-local States (the brain already ran there)
//     straight to a backend.FullState, one complete State per family and batch.
//
// Both reconnect on their own, resuming from the last revision applied when the same
// server instance is still there and taking a full state otherwise, and neither hands on
// anything before a complete state was received: after a (re)connect the staged state is
// applied only once the server's synced event arrives. An object the client cannot
// decode is skipped (logged at error level and counted in
// kubeproxy_localnode_client_rejected_objects_total{kind}), keeping what was held under
// its name, and the rest applies; a stream that breaks the protocol ends, and the next
// connection asks for a full state. Limits bound what a server can make the client hold
// (an incomplete batch, by objects and bytes; one message; the state held): exceeding
// one ends the stream too. Reconnect failures are logged at error level, the first one,
// each new one and every tenth repeat; the connection that delivers a state again is
// logged once.
//
// Allowed imports: the library (localnode, localnodegrpc/api/v1, backend, source), the
// standard library, k8s.io/{api,apimachinery,component-base (metrics),klog} and google.golang.org/{grpc,protobuf}.
// No proxier.
package client
