// Package jumprules keeps the rules in the kernel's built-in iptables chains
// (INPUT, FORWARD, OUTPUT, PREROUTING, POSTROUTING) that jump to a proxier's
// own KUBE-* chains, and the chains those jumps lead to.
//
// The built-in chains are shared with other software, so a proxier never
// flushes and rewrites them; on a full sync it adds the jumps it finds
// missing. Doing that with one EnsureChain and one EnsureRule per jump costs
// two or three iptables executions each, 30-40 per full sync, which on a
// slow or loaded node held a restarted kube-proxy's first sync for over a
// minute. Ensure instead reads the filter and nat tables with two
// iptables-save runs and writes only what is missing in one
// iptables-restore, falling back to the one-by-one calls when that fails.
// The iptables and the ipvs proxiers both use it; this is that one
// implementation.
//
// It is part of the brain layer. Allowed imports: the standard library,
// k8s.io/apimachinery's sets, k8s.io/klog/v2 and k8s.io/net-utils/iptables.
// It must not import any proxier (pkg/proxy/{iptables,ipvs,nftables,
// winkernel,metaproxier}) nor pkg/proxy/syncshell: proxiers import it, not
// the other way round.
package jumprules
