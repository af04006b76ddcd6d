#!/usr/bin/env bash
# Builds test/bench against upstream Kubernetes v1.37.2, outside this repository,
# so the upstream column of side-by-side.sh measures exactly what ours does.
#
#   test/bench/upstream/build.sh OUT     writes the upstream bench binary to OUT
#
# It copies test/bench's non-test Go files into a scratch module (WORK, default
# a temp dir), switches their imports from our packages to upstream's, drops
# the one option upstream does not have (iptables.WithoutMonitor: upstream's
# iptables proxier always runs its canary monitor, and that is what is
# measured), and builds with go.mod.txt/go.sum.txt from this directory (the
# staging replaces pin every k8s.io/* module to v0.37.2). This repository never
# imports k8s.io/kubernetes: the .txt files are not Go to the go command.
set -euo pipefail

out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$(dirname "$here")
work=${WORK:-$(mktemp -d /tmp/kube-proxy-bench-upstream.XXXXXX)}
mkdir -p "$work"

cp "$here/go.mod.txt" "$work/go.mod"
cp "$here/go.sum.txt" "$work/go.sum"
rm -f "$work"/*.go
for f in "$bench"/*.go; do
	case $f in *_test.go) continue ;; esac
	sed -e 's#"k8s\.io/kube-proxy/pkg/#"k8s.io/kubernetes/pkg/#' \
		-e 's#"k8s\.io/net-utils/iptables"#"k8s.io/kubernetes/pkg/util/iptables"#' \
		-e 's#"k8s\.io/net-utils/sysctl"#"k8s.io/component-helpers/node/util/sysctl"#' \
		-e 's#iptables\.NewProxierWithOptions(#iptables.NewProxier(#' \
		-e 's#, iptables\.WithoutMonitor())#)#' \
		"$f" >"$work/$(basename "$f")"
done
# A rewrite that no longer matches (test/bench changed) must fail here, not
# build something that measures a different thing.
if leftover=$(grep -nE 'k8s\.io/(kube-proxy|net-utils)|WithoutMonitor|NewProxierWithOptions' "$work"/*.go); then
	echo "build.sh: these lines were not rewritten for upstream; update build.sh:" >&2
	echo "$leftover" >&2
	exit 1
fi
(cd "$work" && gofmt -w ./*.go && go build -o "$out" .)
echo "upstream bench: $out (sources in $work)" >&2
