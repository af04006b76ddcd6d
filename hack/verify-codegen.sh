#!/usr/bin/env bash
# Fails when a generated file of the configuration API is stale: regenerates into
# a scratch copy of the tree and compares every zz_generated.*.go with the
# checked-in one (content, and files that should or should not exist).
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

# The generators load packages, so the copy must be a buildable module.
tar -C "$root" --exclude=./.git -cf - . | tar -C "$scratch" -xf -
OUT_ROOT="$scratch" "$root/hack/update-codegen.sh" >/dev/null

status=0
for dir in config pkg/proxy/apis/config; do
  [ -d "$root/$dir" ] || continue
  if ! diff -ru \
      <(cd "$root" && find "$dir" -name 'zz_generated.*.go' | LC_ALL=C sort) \
      <(cd "$scratch" && find "$dir" -name 'zz_generated.*.go' | LC_ALL=C sort) >/dev/null; then
    echo "generated files added or removed under $dir:" >&2
    diff <(cd "$root" && find "$dir" -name 'zz_generated.*.go' | LC_ALL=C sort) \
         <(cd "$scratch" && find "$dir" -name 'zz_generated.*.go' | LC_ALL=C sort) >&2 || true
    status=1
  fi
  while read -r f; do
    if ! diff -u "$root/$f" "$scratch/$f" >&2; then
      status=1
    fi
  done < <(cd "$scratch" && find "$dir" -name 'zz_generated.*.go' | LC_ALL=C sort)
done

if [ $status -ne 0 ]; then
  echo "generated code is out of date: run hack/update-codegen.sh" >&2
  exit 1
fi
echo "generated code is up to date"
