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
// Deliberate differences from upstream's generated rules (packet behaviour
// is the same):
//   - A policy chain balances over up to 64 endpoints with one rule per
//     endpoint ("numgen random mod K 0 ... dnat to ep", K = n-i, which picks
//     each endpoint with probability 1/n) instead of one numgen map. Every map
//     is an anonymous set, and the kernel looks sets up by walking the table's
//     set list, so thousands of them make loading quadratic. Larger endpoint
//     sets still use the map.
//   - A ServiceCIDR change rewrites the cluster-ips-check chain in the next
//     partial sync instead of waiting for a full sync.
//
// Other differences in when work is done: the per-service health check
// server is only told about services with a health check node port, and
// only when the service set or one of those services' endpoints changed
// (upstream recounts every endpoint on every sync); a table deleted behind
// kube-proxy's back is noticed on the next full sync (netlink's plain ENOENT
// counts as "not found") and rebuilt, affinity sets included.
//
// Cost floor: with the real kernel, committing a transaction that adds even
// one rule or verdict-map element takes kernel time linear in the table
// (measured on kernel 6.18 with nft 1.0.6 at 10k services x 10 endpoints:
// ~110 ms in nft's commit sendmsg, against ~10 ms to add an empty chain;
// most likely the kernel re-validating the table's jump graph). A
// one-endpoint change cannot be cheaper than that.
//
// Dry run: NewDryRunProxier returns a Proxier that writes every transaction
// it would run (nft -f syntax) to an io.Writer and applies it to a knftables
// fake instead of the kernel; DryRunInterface is the wrapper that does this
// and can wrap any knftables.Interface.
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy and its
// config, conntrack, healthcheck, metrics, runner, util, apis/config),
// pkg/features, pkg/proxy/localnodeportproxy, pkg/proxy/metaproxier,
// sigs.k8s.io/knftables, and the usual k8s.io staging libraries. No other
// backend.
package nftables
