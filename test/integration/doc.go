// Package integration runs kube-proxy against a real kube-apiserver (started by
// k8s.io/kube-proxy/test/kubeapiserver):
//
//   - the built cmd/kube-proxy binary with its real RBAC identity (system:kube-proxy,
//     bound to system:node-proxier) in private network namespaces, in iptables and
//     nftables modes, with real traffic through the Services it programs;
//   - the same binary beside upstream's v1.37.2 through API server outages (a crash, a
//     kube-proxy restart while the server is down, a partition with an etcd compaction,
//     a Service deleted while kube-proxy is stopped) with real traffic throughout, and
//     running as an identity without permissions;
//   - the library's Kubernetes source and proxyrun driving an example backend.
//
// The tests need the API server fixtures of hack/build-fixtures.sh (which also provides
// upstream's kube-proxy); those running kube-proxy also need root, iproute2, iptables and
// nft. Tests skip with the reason when
// something is missing (see README.md), except that KUBE_PROXY_REQUIRE_APISERVER=1 turns
// missing fixtures into a failure. No test touches the host network namespace's rules or
// interfaces: the proxy reaches the API server on the host's loopback through a TCP relay
// whose listening socket lives inside the proxy's namespace.
//
// As a test package it may import anything in the root module, but never
// k8s.io/kubernetes.
package integration
