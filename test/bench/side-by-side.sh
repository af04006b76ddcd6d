#!/usr/bin/env bash
# Ours and upstream v1.37.2 side by side on the real kernel (as root), interleaved
# in one run: each configuration runs -rounds times, ours and upstream's worker
# back to back, each in its own private network namespace, and one Markdown
# table of medians is printed (ours / upstream in every cell). Example:
#
#   test/bench/side-by-side.sh -modes nftables -services 1000,10000 -rounds 3
#   test/bench/side-by-side.sh -configs nftables:1000,nftables:10000,iptables:1000 -timeout 8m
#
# Every flag goes to `go run ./test/bench` (see README.md): -modes, -services,
# -endpoints, -changes, -timeout (per configuration and side; a side that
# exceeds it shows "did not finish in X" and is not retried in later rounds),
# -rounds, and -configs mode:services,... (instead of -modes × -services). The
# upstream worker is test/bench itself, built against k8s.io/kubernetes@v1.37.2
# in the nested module upstream/ by upstream/build.sh, so both sides run the same
# cluster, steps and measurements. Progress goes to stderr, with the load
# average before and after, since the figures are wall times.
set -euo pipefail

root=$(git -C "$(dirname "${BASH_SOURCE[0]}")" rev-parse --show-toplevel)
if [ -n "${BIN:-}" ]; then
	bin=$BIN
	mkdir -p "$bin"
else
	bin=$(mktemp -d /tmp/kube-proxy-side-by-side.XXXXXX)
	trap 'rm -rf "$bin"' EXIT
fi
"$root/test/bench/upstream/build.sh" "$bin/bench-upstream"
(cd "$root" && go build -o "$bin/bench-ours" ./test/bench)
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) CPUs" >&2
"$bin/bench-ours" -upstream "$bin/bench-upstream" "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
