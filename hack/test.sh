#!/usr/bin/env bash
# The one test command. On a fresh Debian machine it installs the kernel tools the
# root-only tests need (when run as root and they are missing), then runs every test of
# both modules with the race detector. Kernel tests skip with a reason when not root.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

"$root/hack/install-deps.sh"

export GOFLAGS="${GOFLAGS:-} -count=1"
timeout_flag=${TEST_TIMEOUT:-30m}

echo "== netutils module (k8s.io/net-utils)"
(cd netutils && go test -race -timeout "$timeout_flag" ./...)

echo "== root module (k8s.io/kube-proxy)"
go test -race -timeout "$timeout_flag" ./...

# Nested modules (test/consumer, ...) each prove something about the product on their own.
# The upstream-building ones hold no Go of their own: test/apiserver and test/etcd build
# the fixture binaries (hack/build-fixtures.sh), test/bench/upstream the upstream side of
# the side-by-side benchmark (test/bench/upstream/build.sh generates its driver).
for mod in $(find test -name go.mod -not -path 'test/apiserver/*' -not -path 'test/etcd/*' -not -path 'test/bench/upstream/*' 2>/dev/null | sort); do
  dir=$(dirname "$mod")
  echo "== nested module $dir"
  (cd "$dir" && go vet ./... && go test -race -timeout "$timeout_flag" ./...)
done
