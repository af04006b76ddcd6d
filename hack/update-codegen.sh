#!/usr/bin/env bash
# Regenerates every zz_generated.*.go of the configuration API with
# k8s.io/code-generator at the version pinned in go.mod (run through `go run`, so
# nothing needs installing and the version cannot drift from go.mod).
#
# Packages are found by their generator tags, as upstream's kube_codegen.sh does:
#   +k8s:deepcopy-gen=   → zz_generated.deepcopy.go
#   +k8s:defaulter-gen=  → zz_generated.defaults.go
#   +k8s:conversion-gen= → zz_generated.conversion.go
#   +k8s:openapi-model-package= → zz_generated.model_name.go (openapi-gen from
#                                 k8s.io/kube-openapi, also pinned by go.mod)
#
# With OUT_ROOT set, the tree at OUT_ROOT (a copy of this repository) is regenerated
# instead; hack/verify-codegen.sh uses that.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
work=${OUT_ROOT:-$root}
cd "$work"

boilerplate="$work/hack/boilerplate.go.txt"
# The API lives under these roots; only they are scanned.
dirs=()
for d in config pkg/proxy/apis/config; do [ -d "$d" ] && dirs+=("$d"); done

# tagged_pkgs TAG prints the import paths of packages holding a "// +TAG=" comment.
tagged_pkgs() {
  local tag=$1
  { grep -rlE --include='*.go' "^\s*//\s*\+${tag}=" "${dirs[@]}" 2>/dev/null || true; } |
    xargs -r -n1 dirname | LC_ALL=C sort -u |
    while read -r d; do (cd "$d" && go list -find .); done
}

gen() {
  local tool=$1 tag=$2 out=$3
  shift 3
  local pkgs
  mapfile -t pkgs < <(tagged_pkgs "$tag")
  [ ${#pkgs[@]} -eq 0 ] && return 0
  find "${dirs[@]}" -name "$out" -type f -delete
  echo "$tool: ${pkgs[*]}"
  go run "k8s.io/code-generator/cmd/$tool" \
    --output-file "$out" \
    --go-header-file "$boilerplate" \
    "$@" \
    "${pkgs[@]}"
}

gen deepcopy-gen k8s:deepcopy-gen zz_generated.deepcopy.go

# OpenAPIModelName() accessors, which upstream's external types carry. openapi-gen
# also writes an OpenAPI definitions file; nothing here serves OpenAPI, so that
# file goes to a scratch directory and is thrown away.
mapfile -t model_pkgs < <(tagged_pkgs k8s:openapi-model-package)
if [ ${#model_pkgs[@]} -ne 0 ]; then
  find "${dirs[@]}" -name zz_generated.model_name.go -type f -delete
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
  echo "openapi-gen (model names): ${model_pkgs[*]}"
  go run k8s.io/kube-openapi/cmd/openapi-gen \
    --output-dir "$scratch" \
    --output-pkg k8s.io/kube-proxy/hack/openapiscratch \
    --output-file zz_generated.openapi.go \
    --output-model-name-file zz_generated.model_name.go \
    --go-header-file "$boilerplate" \
    --report-filename /dev/null \
    --readonly-pkg k8s.io/apimachinery/pkg/apis/meta/v1 \
    --readonly-pkg k8s.io/apimachinery/pkg/runtime \
    --readonly-pkg k8s.io/component-base/config/v1alpha1 \
    --readonly-pkg k8s.io/component-base/logs/api/v1 \
    k8s.io/apimachinery/pkg/apis/meta/v1 \
    k8s.io/apimachinery/pkg/runtime \
    "${model_pkgs[@]}"
fi
gen defaulter-gen k8s:defaulter-gen zz_generated.defaults.go
# component-base's ClientConnectionConfiguration has its own versions and
# conversions; the extra peers let the generated code call them.
gen conversion-gen k8s:conversion-gen zz_generated.conversion.go \
  --extra-peer-dirs k8s.io/component-base/config,k8s.io/component-base/config/v1alpha1
gofmt -w $(find "${dirs[@]}" -name 'zz_generated.*.go')
