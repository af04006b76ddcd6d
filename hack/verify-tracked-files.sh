#!/usr/bin/env bash
# Fails when a tracked file is binary or larger than 1 MiB, unless hack/tracked-binaries.txt
# lists it as test data kept on purpose. Build outputs committed by accident (a 112 MB example
# binary once was) make every clone and every CI run pay for them.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
allow=hack/tracked-binaries.txt
limit=$((1024 * 1024))

allowed() {
  [ -f "$allow" ] && grep -v '^#' "$allow" | grep -qxF -- "$1"
}

bad=0
# git's own text detection: "i/-text" is a file whose index content git considers binary.
while read -r eol path; do
  [ "$eol" = "i/-text" ] || continue
  allowed "$path" && continue
  echo "tracked binary file not listed in $allow: $path" >&2
  bad=1
done < <(git ls-files --eol | awk '{print $1 "\t" substr($0, index($0, "\t") + 1)}')

while IFS= read -r -d '' path; do
  [ -f "$path" ] || continue
  size=$(stat -c %s -- "$path")
  [ "$size" -le "$limit" ] && continue
  allowed "$path" && continue
  echo "tracked file over 1 MiB ($size bytes) not listed in $allow: $path" >&2
  bad=1
done < <(git ls-files -z)

if [ "$bad" -ne 0 ]; then
  echo "remove build outputs (and add them to .gitignore), or list real test data in $allow" >&2
  exit 1
fi
