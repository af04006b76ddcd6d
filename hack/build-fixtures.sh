#!/usr/bin/env bash
# Builds the upstream kube-apiserver and etcd binaries the API-server integration tests run,
# and upstream's kube-proxy, which test/integration's outage test runs beside ours,
# from the nested fixture modules test/apiserver and test/etcd (the only place k8s.io/kubernetes
# may appear). Binaries are cached by version outside the repo and rebuilt only when missing.
# Prints the cache directory on success.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cache=${KUBE_PROXY_FIXTURE_CACHE:-/var/cache/kube-proxy-fixtures}
k8s_version=v1.37.2
etcd_version=v3.6.16
mkdir -p "$cache"

apiserver="$cache/kube-apiserver-$k8s_version"
etcd="$cache/etcd-$etcd_version"
kubeproxy="$cache/kube-proxy-$k8s_version"

if [ -x "$apiserver" ] && [ -x "$etcd" ] && [ -x "$kubeproxy" ]; then
  echo "$cache"
  exit 0
fi

# One build at a time. The lock is held until the script exits; while it is held, the
# test harness (test/kubeapiserver) knows a build is in progress, and under
# KUBE_PROXY_REQUIRE_APISERVER=1 waits for it instead of failing, so CI can start this
# script in the background and run the unit tests meanwhile.
exec 9>"$cache/.build.lock"
flock 9
if [ -x "$apiserver" ] && [ -x "$etcd" ] && [ -x "$kubeproxy" ]; then
  echo "$cache"
  exit 0
fi

# A tmpfs build cache makes the cold build ~15 min instead of ~24 min (it is I/O bound). It is a
# throwaway: ~3 GB of RAM that nothing else reuses, so it is removed when the build ends.
if [ -z "${FIXTURE_GOCACHE:-}" ] && [ -d /dev/shm ]; then
  FIXTURE_GOCACHE=$(mktemp -d /dev/shm/kube-proxy-fixture-gocache.XXXXXX)
  trap 'rm -rf "$FIXTURE_GOCACHE"' EXIT
fi
export GOCACHE=${FIXTURE_GOCACHE:-$(go env GOCACHE)}
# Static, as upstream's release builds these, and the same flags as hack/conformance.sh's
# build of the cluster binaries (CGO_ENABLED=0, -trimpath): cgo changes the standard
# library's net package and with it the cache key of every package above it, so with cgo
# here CI compiled the shared part of k8s.io/kubernetes twice, once per script.
export CGO_ENABLED=0

if [ ! -x "$apiserver" ]; then
  v=k8s.io/component-base/version
  (cd "$root/test/apiserver" && go build -trimpath \
    -ldflags "-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean -X $v.buildDate=2026-01-01T00:00:00Z" \
    -o "$apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver)
  mv "$apiserver.tmp" "$apiserver"
fi
if [ ! -x "$kubeproxy" ]; then
  # hack/conformance.sh builds kube-proxy from the same module, version and ldflags; reuse it.
  conformance_kp=${KUBE_PROXY_CONFORMANCE_CACHE:-/var/cache/kube-proxy-conformance}/$k8s_version/kube-proxy
  if [ -x "$conformance_kp" ]; then
    cp "$conformance_kp" "$kubeproxy.tmp"
  else
    # Built with kube-apiserver's settings (cgo as the toolchain defaults) so that most of
    # it comes from the build cache that build just filled (not timed cold; kube-proxy is a
    # small part of what kube-apiserver compiles).
    v=k8s.io/component-base/version
    (cd "$root/test/apiserver" && go build -trimpath \
      -ldflags "-s -w -X $v.gitVersion=$k8s_version -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean -X $v.buildDate=2026-01-01T00:00:00Z" \
      -o "$kubeproxy.tmp" k8s.io/kubernetes/cmd/kube-proxy)
  fi
  mv "$kubeproxy.tmp" "$kubeproxy"
fi
if [ ! -x "$etcd" ]; then
  (cd "$root/test/etcd" && go build -trimpath -ldflags "-s -w" -o "$etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$etcd.tmp" "$etcd"
fi
echo "$cache"
