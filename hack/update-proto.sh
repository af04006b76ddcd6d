#!/usr/bin/env bash
# Regenerates the Go code of every .proto under pkg/ with protoc (Debian's
# protobuf-compiler) and the Go plugins at the versions pinned here, installed into a
# private GOBIN so a developer's own plugins never leak into the output.
#
# With OUT_ROOT set, the generated files are written under OUT_ROOT (same layout)
# instead of into the tree; --verify regenerates into a temporary directory and fails
# if the committed files differ.
set -euo pipefail

PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.2

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

if ! command -v protoc >/dev/null 2>&1; then
  echo "update-proto: protoc not found; install Debian's protobuf-compiler" >&2
  exit 1
fi

bin=${PROTO_GOBIN:-${XDG_CACHE_HOME:-$HOME/.cache}/kube-proxy-proto/$PROTOC_GEN_GO_VERSION-$PROTOC_GEN_GO_GRPC_VERSION}
if [ ! -x "$bin/protoc-gen-go" ] || [ ! -x "$bin/protoc-gen-go-grpc" ]; then
  mkdir -p "$bin"
  GOBIN=$bin GOFLAGS=-mod=mod go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
  GOBIN=$bin GOFLAGS=-mod=mod go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

verify=false
[ "${1:-}" = "--verify" ] && verify=true
out=${OUT_ROOT:-$root}
if $verify; then
  out=$(mktemp -d)
  trap 'rm -rf "$out"' EXIT
fi

mapfile -t protos < <(git ls-files -co --exclude-standard 'pkg/**/*.proto' | LC_ALL=C sort)
for p in "${protos[@]}"; do
  d=$(dirname "$p")
  mkdir -p "$out/$d"
  PATH="$bin:$PATH" protoc -I "$d" \
    --go_out="$out/$d" --go_opt=paths=source_relative \
    --go-grpc_out="$out/$d" --go-grpc_opt=paths=source_relative \
    "$p"
done

if $verify; then
  rc=0
  for p in "${protos[@]}"; do
    d=$(dirname "$p")
    for f in "$out/$d"/*.pb.go; do
      if ! diff -u "$d/$(basename "$f")" "$f"; then rc=1; fi
    done
  done
  if [ $rc -ne 0 ]; then
    echo "generated protobuf code is stale: run hack/update-proto.sh" >&2
    exit 1
  fi
  echo "generated protobuf code is up to date"
fi
