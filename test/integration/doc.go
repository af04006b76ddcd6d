// Package integration runs kube-proxy against a real kube-apiserver (started by
// k8s.io/kube-proxy/test/kubeapiserver): the built cmd/kube-proxy binary with its real
// RBAC identity in private network namespaces, in iptables and nftables modes, through
// API server restarts and RBAC denial.
//
// Everything here is in _test.go files and needs root (network namespaces), iproute2,
// iptables and nft, and the API server fixtures of hack/build-fixtures.sh; tests skip
// with the reason when something is missing (see README.md). No test touches the host
// network namespace's rules or interfaces: the proxy reaches the API server through a
// TCP relay whose listening socket lives inside the proxy's namespace.
//
// As a test package it may import anything in the root module, but never
// k8s.io/kubernetes.
package integration
