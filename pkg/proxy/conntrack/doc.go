// Package conntrack holds kube-proxy's use of the kernel connection tracking
// table: deciding which UDP flows went stale after a sync and deleting them
// (CleanStaleEntries), and the nf_conntrack sysctls kube-proxy tunes at
// startup (SetSysctls). The netlink access itself lives in
// k8s.io/net-utils/conntrack; this package adds the kube-proxy policy.
//
// Allowed imports: the standard library, k8s.io/{api,apimachinery,klog,utils},
// github.com/vishvananda/netlink, golang.org/x/sys, k8s.io/net-utils/{conntrack,sysctl},
// and from this module pkg/proxy, pkg/proxy/metrics and pkg/proxy/apis/config.
package conntrack
