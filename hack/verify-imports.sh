#!/usr/bin/env bash
# Enforces the import boundaries of CONTRIBUTING.md ("Boundaries") over both
# modules, using `go list` so build tags and test files are seen the way the compiler sees them.
#
#   hack/verify-imports.sh              check the tree; print `importer -> imported (rule)` per violation
#   hack/verify-imports.sh --self-test  plant one violation per rule in a throwaway copy of the
#                                       tree and fail unless every one of them is reported
#
# Rules:
#   no-k8s-kubernetes   nothing imports k8s.io/kubernetes/... (directly or transitively). The nested
#                       modules test/apiserver and test/bench/upstream are the only exception: they
#                       only build upstream binaries (for integration tests, the conformance
#                       cluster and the side-by-side benchmark) and are not part of either module's
#                       package graph. Every other nested module is checked too, by source: no Go
#                       file outside test/apiserver may import k8s.io/kubernetes (test/bench/upstream
#                       generates its driver at build time and keeps none), and no go.mod outside
#                       those two may require it.
#   netutils-standalone k8s.io/net-utils imports nothing from k8s.io/kube-proxy.
#   brain-no-backend    brain, features, config API and library packages import no backend
#                       (pkg/proxy/{iptables,nftables,ipvs,winkernel,metaproxier}).
#   backend-no-backend  a backend imports no other backend, metaproxier excepted.
#   only-cmd-imports-cmd
#   cilium-ebpf-only-in-pkg/proxy/ebpf
#                       github.com/cilium/ebpf is imported by pkg/proxy/ebpf (the socket load
#                       balancer) and nothing else, tests included.
#   layer-allowlist     non-test imports of a layer stay within what CONTRIBUTING.md allows it; gRPC and
#                       protobuf only in pkg/proxy/localnodegrpc/{api/v1,server,client}.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

# list_imports prints "importer<TAB>imported<TAB>kind" for every import of every package
# of the module in the current directory; kind is "test" for _test.go imports.
list_imports() {
  go list -e -f '{{$p := .ImportPath}}{{range .Imports}}{{$p}}	{{.}}	prod
{{end}}{{range .TestImports}}{{$p}}	{{.}}	test
{{end}}{{range .XTestImports}}{{$p}}	{{.}}	test
{{end}}' ./... 2>/dev/null
}

# nested_kubernetes prints "file<TAB>k8s.io/kubernetes...<TAB>nested" for every Go file outside
# test/apiserver that imports k8s.io/kubernetes, and every go.mod outside test/apiserver and
# test/bench/upstream that requires it. It reads sources rather than asking go list, so build
# tags (such as a suite's "conformance" tag) cannot hide an import.
nested_kubernetes() {
  local dir=$1
  (cd "$dir" && find . -path ./.git -prune -o -path ./test/apiserver -prune -o -name '*.go' -print |
    xargs -r grep -HnE '^[[:space:]]*(import[[:space:]]+)?([A-Za-z_.][A-Za-z0-9_]*[[:space:]]+)?"k8s\.io/kubernetes[/"]' |
    sed -E 's|^\./([^:]*):[0-9]+:.*"(k8s\.io/kubernetes[^"]*)".*|\1\t\2\tnested|')
  (cd "$dir" && find . -path ./.git -prune -o -path ./test/apiserver -prune -o -path ./test/bench/upstream -prune -o -name go.mod -print |
    xargs -r grep -HnE '^[[:space:]]*(require[[:space:]]+)?k8s\.io/kubernetes[[:space:]]+v' |
    sed -E 's|^\./([^:]*):[0-9]+:.*|\1\tk8s.io/kubernetes\tnested|')
}

check_tree() {
  local dir=$1
  local out status=0
  out=$(
    {
      (cd "$dir" && list_imports)
      (cd "$dir/netutils" && list_imports)
      # Transitive check: a dependency could drag k/k in even when no file of ours names it.
      (cd "$dir" && go list -e -deps -test ./... 2>/dev/null | sed -n 's|^\(k8s.io/kubernetes.*\)$|(transitive)	\1	prod|p')
      (cd "$dir/netutils" && go list -e -deps -test ./... 2>/dev/null | sed -n 's|^\(k8s.io/kubernetes.*\)$|(transitive)	\1	prod|p')
      nested_kubernetes "$dir"
    } | awk -F '\t' -f "$root/hack/verify-imports.awk" | sort -u
  )
  if [ -n "$out" ]; then
    printf '%s\n' "$out"
    status=1
  fi
  return $status
}

self_test() {
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  (cd "$root" && tar --exclude=.git -cf - .) | (cd "$tmp" && tar -xf -)

  plant() { # dir package import
    mkdir -p "$tmp/$1"
    printf 'package %s\n\nimport _ "%s"\n' "$2" "$3" >"$tmp/$1/zz_planted.go"
  }
  plant netutils/zzplanted zzplanted k8s.io/kube-proxy/pkg/proxy
  plant pkg/proxy/zzplantedbrain zzplantedbrain k8s.io/kube-proxy/pkg/proxy/iptables
  plant pkg/proxy/iptables/zzplantedproxier zzplantedproxier k8s.io/kube-proxy/pkg/proxy/nftables
  plant pkg/proxy/localnode/zzplantedup zzplantedup k8s.io/kube-proxy/pkg/proxy/proxyrun
  plant pkg/proxy/syncshell/zzplantedpeer zzplantedpeer k8s.io/kube-proxy/pkg/proxy/localnode
  plant config/zzplantedk8s zzplantedk8s k8s.io/kubernetes/pkg/features
  plant pkg/proxy/zzplantedcmd zzplantedcmd k8s.io/kube-proxy/cmd/kube-proxy/app
  plant config/zzplantedallow zzplantedallow sigs.k8s.io/knftables
  plant pkg/proxy/zzplantedgrpc zzplantedgrpc google.golang.org/grpc
  plant pkg/proxy/nftables/zzplantedebpf zzplantedebpf github.com/cilium/ebpf
  # A nested module's file behind a build tag, as a conformance suite's entry point would be.
  mkdir -p "$tmp/test/zzplantednested"
  printf '//go:build zzplanted\n\npackage zzplantednested\n\nimport (\n\t"testing"\n\n\tupstream "k8s.io/kubernetes/test/e2e"\n)\n' >"$tmp/test/zzplantednested/zz_planted_test.go"
  printf 'module example.com/zzplanted\n\nrequire k8s.io/kubernetes v1.37.2\n' >"$tmp/test/zzplantednested/go.mod"

  local out
  out=$(check_tree "$tmp" || true)
  local want=(
    "k8s.io/net-utils/zzplanted -> k8s.io/kube-proxy/pkg/proxy (netutils-standalone)"
    "k8s.io/kube-proxy/pkg/proxy/zzplantedbrain -> k8s.io/kube-proxy/pkg/proxy/iptables (library-no-proxier)"
    "k8s.io/kube-proxy/pkg/proxy/iptables/zzplantedproxier -> k8s.io/kube-proxy/pkg/proxy/nftables (proxier-no-proxier)"
    "k8s.io/kube-proxy/pkg/proxy/localnode/zzplantedup -> k8s.io/kube-proxy/pkg/proxy/proxyrun (library-layers-point-down)"
    "k8s.io/kube-proxy/pkg/proxy/syncshell/zzplantedpeer -> k8s.io/kube-proxy/pkg/proxy/localnode (library-layers-point-down)"
    "k8s.io/kube-proxy/config/zzplantedk8s -> k8s.io/kubernetes/pkg/features (no-k8s-kubernetes)"
    "k8s.io/kube-proxy/pkg/proxy/zzplantedcmd -> k8s.io/kube-proxy/cmd/kube-proxy/app (only-cmd-imports-cmd)"
    "k8s.io/kube-proxy/config/zzplantedallow -> sigs.k8s.io/knftables (layer-allowlist)"
    "k8s.io/kube-proxy/pkg/proxy/zzplantedgrpc -> google.golang.org/grpc (layer-allowlist)"
    "k8s.io/kube-proxy/pkg/proxy/nftables/zzplantedebpf -> github.com/cilium/ebpf (cilium-ebpf-only-in-pkg/proxy/ebpf)"
    "test/zzplantednested/zz_planted_test.go -> k8s.io/kubernetes/test/e2e (no-k8s-kubernetes)"
    "test/zzplantednested/go.mod -> k8s.io/kubernetes (no-k8s-kubernetes)"
  )
  local missing=0
  for w in "${want[@]}"; do
    if ! grep -qxF -- "$w" <<<"$out"; then
      echo "self-test: planted violation not reported: $w" >&2
      missing=1
    fi
  done
  # Nothing but the planted files may be reported: the real tree must be clean.
  local extra
  extra=$(grep -v -e zzplanted -e '^(transitive) -> k8s.io/kubernetes/pkg/features ' <<<"$out" || true)
  if [ -n "$extra" ]; then
    echo "self-test: unexpected violations in the tree:" >&2
    printf '%s\n' "$extra" >&2
    missing=1
  fi
  if [ $missing -ne 0 ]; then
    echo "self-test: FAILED" >&2
    return 1
  fi
  echo "self-test: all ${#want[@]} planted violations caught"
}

case "${1:-}" in
--self-test) self_test ;;
"")
  if ! check_tree "$root"; then
    echo "import boundaries violated (see CONTRIBUTING.md, "Boundaries")" >&2
    exit 1
  fi
  echo "import boundaries: ok"
  ;;
*)
  echo "usage: $0 [--self-test]" >&2
  exit 2
  ;;
esac
