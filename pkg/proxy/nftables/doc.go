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
//   - A policy chain of a Service without session affinity balances with one
//     rule, "dnat to numgen random mod N offset B map @endpoints-G-P-SS",
//     over N slots of a shared endpoint map holding "ip . port" (slots.go),
//     instead of a numgen vmap to one chain per endpoint. Replacing an
//     endpoint is then a data element update, which the kernel commits
//     without re-validating the table; any rule with a dnat, jump or goto
//     makes it walk every rule reachable from the base chains (measured on
//     kernel 6.18, nft 1.0.6, 10k Services x 10 endpoints: ~100 ms per
//     commit with one rule per endpoint). The maps are sharded (256 per
//     protocol) and rewritten under a fresh generation number on every full
//     sync, so slot assignments never have to be read back from the kernel
//     and no intermediate state shows a chain another Service's endpoints.
//     An nft that cannot declare such a map (checked once at construction
//     with nft --check) gets upstream's anonymous map per chain instead.
//   - With session affinity, endpoint chains exist as upstream's; up to 64
//     endpoints are balanced with one rule each ("numgen random mod K 0 goto
//     endpoint-...", K = n-i, which picks each endpoint with probability 1/n)
//     instead of an anonymous vmap: the kernel finds a free anonymous set
//     name by walking the table's set list, so thousands of them make loading
//     quadratic.
//   - A ServiceCIDR change rewrites the cluster-ips-check chain in the next
//     partial sync instead of waiting for a full sync.
//
// Other differences in when work is done: the per-service health check
// server is only told about services with a health check node port, and
// only when the service set or one of those services' endpoints changed
// (upstream recounts every endpoint on every sync).
//
// Drift (drift.go, nldump.go): anything changed in our table behind
// kube-proxy's back is repaired within one syncPeriod. Once per syncPeriod
// the Shell asks the backend (syncshell.DriftChecker) to compare the kernel
// with the view: the kernel's ruleset generation (NFT_MSG_GETGEN, moved by
// every commit to any table) is compared with the one recorded after our own
// last commit, and only when it moved is our table dumped over netlink and
// compared: every chain (its rules' count, comments and expression
// fingerprints), set, map and element, both families. Each difference is
// returned with a kind (table, chain, rule, set, map, set element, map
// element), the object, and what was expected and found; the Shell logs and
// counts it and makes that sync full, which reads the kernel back rather
// than trusting the view (chains are rewritten, elements diffed against a
// fresh listing, endpoint maps replaced by a new generation), and backs off
// an object another writer keeps undoing. A change to another table moves
// the generation and costs one comparison that finds nothing; the two
// families of a dual-stack proxier share a ledger of their own commits, so
// that one family's writes are not taken for another program's. Upstream
// rewrites its table only at its hourly full sync (its partial syncs rewrite
// what changed in the API).
//
// Elements over netlink (nlbatch.go): nft 1.0.6 dumps every chain of the
// ruleset into its cache before any change, and parses one command per
// element. So on the host's own table (not dry runs or a caller's
// knftables.Interface; gate NFTablesNetlink, as knftables' netlink listing)
// a sync that only replaces endpoints sends its endpoint map and hairpin
// elements as one netlink batch over a socket kept open (1 ms at 1k
// Services, 5 ms at 10k, against 21 and 40 ms through nft), and a full sync
// sends those and the dispatch elements (cluster-ips, service-ips,
// service-nodeports) between its nft transactions, which keep the chains,
// rules and rarer elements: at 10k Services the full sync then takes less
// than nft alone needs to load the same final ruleset. A failed batch is
// retried through nft.
//
// Model: the backend is handed the service ports that changed and converts
// each into the library's node-local model (pkg/proxy/localnode, the same
// values third-party backends get), then into the rule generator's model; it
// takes the no-endpoint drop/reject decision from that Service and does not
// re-decide policy. Endpoints keep the brain's "ip:port" order in the rules.
//
// Files, in the order a change goes down them: backend.go (the shell's
// backend, the port's model, and the syncer that owns the table), generator.go
// (the pure rule generator), view.go (what is programmed, and the diff),
// plan.go (the operations, cut into bounded units) and nlbatch.go (element
// batches over netlink). fixed.go is the part of the table no service port
// owns; drift.go and nldump.go are the drift check and its netlink reader.
//
// Dry run: NewDryRunProxier returns a Proxier that writes every transaction
// it would run (nft -f syntax) to an io.Writer instead of the kernel.
// DryRunInterface (dryrun.go) is the wrapper that does this and can wrap any
// knftables.Interface; NewDryRunInterface puts it over an in-memory table
// that applies a transaction in time linear in its size (knftables' Fake
// scans per element, which made a dry run of 5k Services take 39 s) and
// refuses what nft would refuse, so full syncs read back what was "applied".
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy and its
// config, conntrack, healthcheck, metrics, runner, util, apis/config),
// pkg/features, the library's node-local model pkg/proxy/localnode,
// pkg/proxy/localnodeportproxy, pkg/proxy/metaproxier,
// sigs.k8s.io/knftables, golang.org/x/sys/unix (the element batches,
// nlbatch.go, are encoded by hand), and the usual k8s.io staging libraries;
// tests also import github.com/google/nftables and mdlayher/netlink, to
// check those batches byte for byte against the library knftables itself
// lists with, and go-logr's funcr, to read what a proxier logs. No other
// backend.
package nftables
