// Package metrics defines every Prometheus metric kube-proxy exposes (same
// names, types, labels and buckets as upstream Kubernetes v1.37) and
// registers the subset that belongs to a proxy mode.
//
// It is a brain package: it may import the standard library,
// k8s.io/{api,component-base,klog}, pkg/features, pkg/proxy/apis/config and
// pkg/proxy/util/nfacct. It must not import a backend; the nftables proxier
// feeds its named-counter readings in through SetNFTablesCounterReader.
package metrics
