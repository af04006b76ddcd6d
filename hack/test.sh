#!/usr/bin/env bash
# The one test command: every test of both modules and of the nested modules under test/,
# with the race detector, one line per package as it finishes and a heartbeat naming what
# still runs (hack/testreport). README "Testing" gives the durations.
#
#   hack/test.sh            everything but the kernel-scale cases (KUBE_PROXY_TEST_LONG)
#   hack/test.sh --long     everything, as CI runs it
#   hack/test.sh -short     quick: also skips what builds the binary, starts kube-apiserver
#                           or builds namespaces for the datapath e2e
# Extra arguments go to every `go test` (e.g. -run TestX).
#
# Environment: TEST_TIMEOUT (per package, default 30m: a hung package fails with its
# goroutine dump instead of hanging the run; test/vm's QEMU guests need up to ~20 min on
# a loaded 2-core machine); TEST_PARALLEL (packages tested at once,
# default 4: most packages' tests wait on iptables-restore, nft, a network namespace or a
# timer, so two cores are idle with the default of one package per core).
#
# On a fresh Debian machine run as root it first installs the kernel tools the root-only
# tests drive; without root those tests skip with a reason.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

args=()
for a in "$@"; do
  case "$a" in
    --long) export KUBE_PROXY_TEST_LONG=1 ;;
    *) args+=("$a") ;;
  esac
done

"$root/hack/install-deps.sh"

export GOFLAGS="${GOFLAGS:-} -count=1"
timeout_flag=${TEST_TIMEOUT:-30m}
parallel=${TEST_PARALLEL:-4}

report=$(mktemp -d)/testreport
trap 'rm -rf "$(dirname "$report")"' EXIT
go build -o "$report" ./hack/testreport

# gotest DIR [FIRST...]: go test -race of every package under DIR, reported per package.
# FIRST packages are listed first, which makes go test build and start them first: the
# QEMU guests of ./test/vm take minutes on one core, so they run beside the other
# packages instead of alone after them.
gotest() {
  local dir=$1 n
  shift
  n=$(cd "$dir" && go list ./... | wc -l)
  (cd "$dir" && go test -json -race -timeout "$timeout_flag" -p "$parallel" "${args[@]}" "$@" ./...) | "$report" -packages "$n"
}

start=$(date +%s)
status=0
echo "== netutils module (k8s.io/net-utils)"
gotest netutils || status=1

echo "== root module (k8s.io/kube-proxy)"
gotest . ./test/vm || status=1

# Nested modules (test/consumer, ...) each prove something about the product on their own.
# The upstream-building ones are skipped: test/apiserver and test/etcd build
# the fixture binaries (hack/build-fixtures.sh), test/bench/upstream the upstream side of
# the side-by-side benchmark (test/bench/upstream/build.sh generates its driver).
for mod in $(find test -name go.mod -not -path 'test/apiserver/*' -not -path 'test/etcd/*' -not -path 'test/bench/upstream/*' 2>/dev/null | sort); do
  dir=$(dirname "$mod")
  echo "== nested module $dir"
  (cd "$dir" && go vet ./...) || status=1
  gotest "$dir" || status=1
done

mode="default"
[ -n "${KUBE_PROXY_TEST_LONG:-}" ] && mode="--long"
echo "== hack/test.sh ($mode) took $(( ($(date +%s) - start) / 60 ))m$(( ($(date +%s) - start) % 60 ))s; status $status"
exit "$status"
