#!/usr/bin/env bash
# Regenerates the BPF object of pkg/proxy/ebpf from bpf/socketlb.c with bpf2go, at the
# version pinned in the package's //go:generate line, and Debian's clang (clang 14 on
# bookworm; another clang may emit different bytes). hack/bpfobject then turns the object
# into Go source (socketlb_bpfel_object.go) beside bpf2go's loader (socketlb_bpfel.go), so
# no binary file is committed.
#
#   hack/update-bpf.sh           regenerate in place
#   hack/update-bpf.sh --verify  regenerate into a temporary copy and fail if the
#                                committed files differ
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pkg=pkg/proxy/ebpf

for tool in clang llvm-strip; do
  if ! command -v "$tool" >/dev/null 2>&1; then
    echo "update-bpf: $tool not found; install Debian's clang and llvm (and libbpf-dev for the headers)" >&2
    exit 1
  fi
done
if [ ! -f /usr/include/bpf/bpf_helpers.h ]; then
  echo "update-bpf: /usr/include/bpf/bpf_helpers.h not found; install Debian's libbpf-dev" >&2
  exit 1
fi

# The generate command is the package's own //go:generate line, so the two cannot drift.
cmd=$(sed -n 's|^//go:generate ||p' "$root/$pkg/gen.go")
[ -n "$cmd" ] || { echo "update-bpf: no //go:generate line in $pkg/gen.go" >&2; exit 1; }

work=$root/$pkg
if [ "${1:-}" = "--verify" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  cp -r "$root/$pkg/bpf" "$root/$pkg/gen.go" "$tmp/"
  work=$tmp
fi
# bpf2go reads the package name from GOPACKAGE, as go generate sets it.
(cd "$work" && GOPACKAGE=ebpf GOFLAGS=-mod=mod sh -c "$cmd")
(cd "$root" && go run ./hack/bpfobject -dir "$work" -name socketlb -package ebpf)

if [ "${1:-}" = "--verify" ]; then
  status=0
  for f in socketlb_bpfel.go socketlb_bpfel_object.go; do
    if ! cmp -s "$tmp/$f" "$root/$pkg/$f"; then
      echo "update-bpf: $pkg/$f differs from what $pkg/bpf/socketlb.c generates; run hack/update-bpf.sh" >&2
      status=1
    fi
  done
  [ $status -eq 0 ] && echo "update-bpf: generated BPF objects up to date"
  exit $status
fi
