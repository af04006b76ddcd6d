// Package ipvs is kube-proxy's IPVS proxy mode: upstream Kubernetes v1.37's
// pkg/proxy/ipvs, with the same exported API and the same kernel state
// (virtual and real servers, the kube-ipvs0 dummy interface, ip sets and
// iptables chains), built on the shared per-family sync shell
// (pkg/proxy/syncshell).
//
// Upstream re-lists every virtual server, its real servers and every ip set
// on every sync. Here the backend keeps an authoritative view of what it
// programmed: a full sync lists the kernel and reconciles everything (or,
// where the kernel holds exactly what the previous, successful, sync left,
// only what the ports changed since want), a partial sync reconciles only the
// virtual servers, ip set entries and addresses of the service ports that
// changed, so a one-endpoint change costs O(1) IPVS netlink operations and one
// "ipset restore". Once per syncPeriod the Shell asks Drift (check.go) to
// compare that view with the kernel, one read of each kind: kube-ipvs0's
// addresses, every set's entries (one "ipset list"), the virtual servers
// with their real servers and weights, and one iptables-save per table
// against the last restore input (each chain's rule count, then a
// fingerprint of the kernel's spelling of its rules). Anything changed
// behind the proxier's back makes that sync full, which re-reads and
// repairs everything within one syncPeriod, as upstream's every-sync
// rewrite did; the Shell logs and counts each repair. Traffic policy,
// topology and the terminating-endpoint fallback are the brain's
// (syncshell.Update.Policy); this package only programs them.
//
// Import paths, upstream to here:
//
//	k8s.io/kubernetes/pkg/proxy/ipvs          -> k8s.io/kube-proxy/pkg/proxy/ipvs
//	k8s.io/kubernetes/pkg/proxy/ipvs/testing  -> k8s.io/kube-proxy/pkg/proxy/ipvs/testing
//	k8s.io/kubernetes/pkg/proxy/ipvs/util     -> k8s.io/net-utils/ipvs (package ipvs)
//	k8s.io/kubernetes/pkg/proxy/ipvs/ipset    -> k8s.io/net-utils/ipset
//	k8s.io/kubernetes/pkg/util/iptables       -> k8s.io/net-utils/iptables
//	k8s.io/component-helpers/node/util/sysctl -> k8s.io/net-utils/sysctl (same method set)
//
// Allowed imports: the brain (k8s.io/kube-proxy/pkg/proxy and its apis/config,
// conntrack, healthcheck, metrics, syncshell and util packages), metaproxier,
// k8s.io/net-utils, github.com/vishvananda/netlink and golang.org/x/sys. Never
// another backend. The proxier is Linux-only; the testing subpackage builds
// everywhere.
package ipvs
