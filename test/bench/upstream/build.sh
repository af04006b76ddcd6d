#!/usr/bin/env bash
# Builds test/bench against upstream Kubernetes v1.37.2 in this nested module
# (k8s.io/kube-proxy/test/bench/upstream), so the upstream column of
# side-by-side.sh measures exactly what ours does.
#
#   test/bench/upstream/build.sh OUT     writes the upstream bench binary to OUT
#
# Like the kube-apiserver and etcd fixture modules (test/apiserver, test/etcd),
# this module is the only kind of place that may require k8s.io/kubernetes, and
# it is outside both of the repository's modules' package graphs. Its go.mod
# pins every k8s.io/* staging module at v0.37.2. It holds no hand-written Go:
# the driver is generated into driver/ (ignored by git, removed once built) from test/bench's
# non-test Go files, with the imports switched from our packages to
# upstream's and the one option upstream does not have dropped
# (iptables.WithoutMonitor: upstream's iptables proxier always runs its canary
# monitor, and that is what is measured). One driver, two builds: both columns
# run the same cluster, steps and measurements. Two builds at once would share
# driver/; side-by-side.sh runs one.
set -euo pipefail

out=${1:?usage: build.sh OUT}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bench=$(dirname "$here")
driver="$here/driver"
rm -rf "$driver"
mkdir -p "$driver"
for f in "$bench"/*.go; do
	case $f in *_test.go) continue ;; esac
	sed -e 's#"k8s\.io/kube-proxy/pkg/#"k8s.io/kubernetes/pkg/#' \
		-e 's#"k8s\.io/net-utils/iptables"#"k8s.io/kubernetes/pkg/util/iptables"#' \
		-e 's#"k8s\.io/net-utils/sysctl"#"k8s.io/component-helpers/node/util/sysctl"#' \
		-e 's#iptables\.NewProxierWithOptions(#iptables.NewProxier(#' \
		-e 's#, iptables\.WithoutMonitor())#)#' \
		"$f" >"$driver/$(basename "$f")"
done
# A rewrite that no longer matches (test/bench changed) must fail here, not
# build something that measures a different thing.
if leftover=$(grep -nE 'k8s\.io/(kube-proxy|net-utils)|WithoutMonitor|NewProxierWithOptions' "$driver"/*.go); then
	echo "build.sh: these lines were not rewritten for upstream; update build.sh:" >&2
	echo "$leftover" >&2
	exit 1
fi
gofmt -w "$driver"/*.go
case $out in /*) ;; *) out="$PWD/$out" ;; esac
(cd "$here" && go build -o "$out" ./driver)
# The generated Go imports k8s.io/kubernetes; it does not stay in the tree once built
# (after a failed build it does, to be read). KEEP_DRIVER=1 keeps it.
if [ -z "${KEEP_DRIVER:-}" ]; then
	rm -rf "$driver"
fi
echo "upstream bench: $out" >&2
