// Package consumer is a tiny out-of-tree service proxy built only from kube-proxy's
// public packages, the way Calico's eBPF data plane builds its own: it keeps its own
// Endpoint type, wraps the trackers' ServicePort in its own struct, feeds the change
// trackers from the config handlers (with nil callbacks), drives syncs with the
// bounded-frequency runner, and serves health checks with the healthcheck package.
//
// It lives in a module of its own so that it sees only what an importer of
// k8s.io/kube-proxy sees; its tests also prove that such an importer pulls in
// nothing from k8s.io/kubernetes.
//
// May import k8s.io/kube-proxy's public packages and the Kubernetes client libraries.
// Nothing imports it.
package consumer
