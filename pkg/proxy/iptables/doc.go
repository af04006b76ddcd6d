// Package iptables is kube-proxy's iptables backend: it turns the brain's
// view of Services and endpoints (pkg/proxy) into iptables rules in the nat
// and filter tables, written with one iptables-restore per sync.
//
// The generated chains and rules are identical in name and meaning to
// upstream Kubernetes v1.37's iptables mode, so a node can switch between the
// two binaries without stale or conflicting rules. Internally the proxier
// differs: it keeps the per-service dispatch rules rendered from the previous
// sync and re-renders only changed services, it tracks the chains it created
// so that partial syncs never need iptables-save, and a partial sync leaves
// the top-level chains (KUBE-SERVICES, KUBE-NODEPORTS, the filter table...)
// out of the restore when they would be rewritten unchanged, so an endpoint
// change costs iptables-restore that service's chains only (they are still
// rewritten at least once per syncPeriod). Full syncs (first, after a
// failure, canary-triggered, drift-triggered, hourly) write everything.
//
// Drift (drift.go): once per syncPeriod the Shell asks the proxier to
// compare one iptables-save of nat and filter with the view: every chain
// the view holds must exist with the number of rules last written, a
// chain a previous check saw as written must still hash the same (the
// kernel spells rules its own way, so the first check after a write takes
// that fingerprint), and the jumps from the built-in chains must be there.
// Any difference makes that sync full, which rewrites every chain; the
// Shell logs and counts the repair and backs off from objects another
// writer keeps undoing. The canary Monitor stays beside it: it notices a
// table flushed (a firewall reload) within its poll interval without
// reading the tables, and its chains are part of the state upstream's
// binary expects. A flush between a repair and the canaries' re-creation,
// which the Monitor alone missed until the hourly full sync, is caught by
// the next drift check.
//
// The proxier is a backend of the per-family sync shell (pkg/proxy/syncshell)
// and is built like the nftables one: the generator (generator.go) renders a
// service port's rules from its node-local model and reads no kernel state; the view (view.go) is what the restores put in the kernel, against
// which partial syncs are computed; the syncer (syncer.go) is the only part
// that talks to iptables: jump rules and nfacct counters on full syncs,
// iptables-save to find leftovers on full syncs, and the restore. A dry run
// (WithDryRun) gives the syncer an Interface that writes each restore to an
// io.Writer and reads as an empty kernel (dryrun.go). On iptables-nft a
// large restore is fed as several nat transactions, whole service ports
// each, dispatch last (chunks.go): one big one costs iptables-nft-restore
// time quadratic in its chains. A partial sync that changes only dispatch
// rules (a Service added or removed) edits KUBE-SERVICES and KUBE-NODEPORTS
// in place instead of rewriting them (edits.go). An unsplit restore lists
// the ports' chains and rules in the order iptables-save would, chain by
// chain in byte order, which legacy iptables-restore loads as fast as a
// saved ruleset (generator.go: sortedDecls, sortedRules).
//
// Model: each re-rendered service port is converted into the library's
// node-local model (pkg/proxy/localnode, what third-party backends and the
// nftables backend are handed) with localnode.Computer.ComputeServicePort;
// the drop/reject decision for traffic without endpoints is read from that
// Service, not re-decided. Endpoints keep the brain's "ip:port" order in the
// rules, and SEP chain names hash the model's endpoint as before (backend.go).
// A port whose ServicePort and resolved endpoints are the very same values
// as at its last rendering (every unchanged port of a full sync) reuses that
// conversion, and endpoints that stay keep their strings, so full syncs cost
// what they did before.
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy and its config,
// conntrack, healthcheck, metrics, runner, syncshell, util and apis/config packages),
// the library's node-local model pkg/proxy/localnode, pkg/proxy/metaproxier,
// and k8s.io/net-utils. Never another backend.
package iptables
