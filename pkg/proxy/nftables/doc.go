// Package nftables implements the nftables kube-proxy backend: it programs the
// "kube-proxy" table (family ip or ip6) through sigs.k8s.io/knftables with the
// same table, chain, set, map and counter names and the same packet behaviour
// as upstream Kubernetes v1.37.
//
// Unlike upstream it keeps an authoritative in-memory view of the table
// (view.go): partial syncs diff only the service ports that changed and never
// list the kernel; a sync with nothing to change makes no kernel call at all;
// the kernel is read back only on full syncs (startup, hourly, after an
// error); large transactions are cut into bounded chunks at safe boundaries
// (plan.go); stale chains are flushed at once and deleted a sync later.
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy and its
// config, conntrack, healthcheck, metrics, runner, util, apis/config),
// pkg/features, pkg/proxy/localnodeportproxy, pkg/proxy/metaproxier,
// sigs.k8s.io/knftables, and the usual k8s.io staging libraries. No other
// backend.
package nftables
