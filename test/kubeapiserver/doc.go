// Package kubeapiserver runs a real, unmodified kube-apiserver (with its etcd) on
// loopback for integration tests, with certificates and kubeconfigs for the identities
// kube-proxy tests need: an administrator, kube-proxy itself (CN=system:kube-proxy, which
// the API server's bootstrap RBAC binds to system:node-proxier) and an identity with no
// permissions at all.
//
// The binaries are built outside this module by hack/build-fixtures.sh (from the nested
// fixture modules test/apiserver and test/etcd) and found through KUBE_APISERVER_BIN and
// ETCD_BIN, else in KUBE_PROXY_FIXTURE_CACHE (default /var/cache/kube-proxy-fixtures).
// When they are missing, tests skip with the reason, unless KUBE_PROXY_REQUIRE_APISERVER=1,
// which turns the skip into a failure (CI sets it, so a broken fixture build cannot pass
// silently) and makes the first test wait for a build hack/build-fixtures.sh is still
// running (it holds an flock on .build.lock in the cache), so CI can build in the
// background.
//
// The API server has no controllers: tests write EndpointSlices, load-balancer status and
// the like themselves, which is exactly what a kube-proxy test wants.
//
// This package is part of the root module but only for tests; it imports client-go and
// the standard library, never k8s.io/kubernetes (the API server is a separate process).
// It runs on Linux only: child processes are tied to the test process's lifetime with
// PR_SET_PDEATHSIG so a crashed test leaves no server behind.
package kubeapiserver
