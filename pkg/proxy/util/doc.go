// Package util holds the small, backend-neutral helpers every kube-proxy
// proxier needs: IP-family bookkeeping, node-port address selection,
// local-traffic detection rule fragments, a line buffer for building rule
// files, sysctl/EINTR helpers, and HeapPacer, which keeps a large full
// sync's heap near what it holds live.
//
// It is part of the "brain" layer. It may import the standard library,
// k8s.io/{api,apimachinery,klog,utils}, golang.org/x/sys and
// k8s.io/net-utils; it must never import a backend package
// (pkg/proxy/{iptables,nftables,ipvs,winkernel,metaproxier}) nor anything
// from k8s.io/kubernetes.
package util
