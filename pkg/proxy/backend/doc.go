// Package backend defines the two ways a service proxy built on this library can receive
// the node-local state, and adapters between them.
//
//   - FullState: Sync is handed the complete localnode.State of one IP family, and only when
//     it differs from the last State that was synced successfully (or to retry a failed
//     Sync). Easiest to write: render everything, or diff it yourself with diffstore.
//   - Incremental: set/delete callbacks per service port and per endpoint, closed by a Sync
//     barrier. For backends that keep their own model (eBPF maps, a hardware load
//     balancer's API) and want to hear only what changed.
//
// NewDiffer presents an Incremental backend as a FullState one: it diffs successive States
// with diffstore and makes the minimal calls. NewCollector does the reverse, gathering
// incremental calls into States for a FullState backend.
//
// Allowed imports: pkg/proxy/localnode, pkg/proxy/diffstore, the standard library and
// k8s.io/klog. No backend and no Kubernetes API types.
package backend
