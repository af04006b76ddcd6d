// Package chaincheck compares the iptables chains a proxier wrote through
// iptables-restore with what iptables-save shows the kernel holds: that each
// chain exists, holds as many rules as were written, and (once a check has
// seen it as written) still holds the same rules. The iptables and the ipvs
// proxiers both own KUBE-* chains and check them for drift the same way;
// this is that one implementation. It reports Differences, which each
// proxier turns into its own drift values (and metric labels).
//
// It also remembers the nf_tables generation (Generation), with which a
// check on iptables-nft skips reading tables that nothing has committed to.
//
// It is part of the brain layer. Allowed imports: the standard library,
// k8s.io/klog/v2 and k8s.io/net-utils/iptables. It must not import any
// proxier (pkg/proxy/{iptables,ipvs,nftables,winkernel,metaproxier}) nor
// pkg/proxy/syncshell: proxiers import it, not the other way round.
package chaincheck
