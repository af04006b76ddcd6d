package server

import (
	"sync"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"
)

var (
	// connectionsRefused counts connections closed as soon as they were accepted:
	// reason "limit" when MaxConns connections are open and every one of them has an
	// RPC in progress, so none may make room.
	connectionsRefused = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "kubeproxy", Name: "localnode_server_connections_refused_total",
		Help:           "Connections to the node-local state server closed on accept, by reason (limit: every one of the maximum connections has an RPC in progress).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})

	// connectionsEvicted counts open connections the server closed: reason "idle" for
	// one with no RPC for the idle timeout, "limit" for the oldest such connection
	// closed to make room for a new one.
	connectionsEvicted = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "kubeproxy", Name: "localnode_server_connections_evicted_total",
		Help:           "Connections to the node-local state server closed because they had no RPC in progress, by reason (idle: for the idle timeout; limit: the oldest, to make room for a new connection).",
		StabilityLevel: metrics.ALPHA,
	}, []string{"reason"})
)

var registerOnce sync.Once

// RegisterMetrics registers, once per process, the server's metrics into the
// component-base legacy registry (what kube-proxy's /metrics serves). Until then they
// count nothing.
func RegisterMetrics() {
	registerOnce.Do(func() {
		legacyregistry.MustRegister(connectionsRefused, connectionsEvicted)
	})
}
