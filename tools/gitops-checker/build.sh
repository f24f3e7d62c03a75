#!/usr/bin/env bash
# Builds the GitOps status checker (*.go: real kstatus, Flux's kstatus fork, Flux's CEL
# healthCheckExprs reader, Flux's ssa wait loop, Argo CD's Lua engine: gopher-lua + gopher-json) from the Go module proxy into a cache outside the repository, keyed by
# the pinned versions and the checker's source, and prints the binary's path on the last line.
# Reuses a cached binary; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_GITOPS_CHECKER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/gitops-checker}"
src_hash="$(cat "$here"/*.go "$here/versions.env" | sha256sum | cut -c1-12)"
key="cli-utils-$CLI_UTILS_VERSION-flux-runtime-$FLUX_RUNTIME_VERSION-ssa-$FLUX_SSA_VERSION-gopher-lua-$GOPHER_LUA_VERSION-$src_hash"
bin="$cache_root/$key/bin/gitops-checker"
log() { echo "gitops-checker: $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { log "Go is required to build the checker"; exit 1; }
start=$SECONDS
work="$cache_root/$key/work"
rm -rf "$work"
mkdir -p "$work" "$(dirname "$bin")"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
export GOTOOLCHAIN=local
cp "$here"/*.go "$work/"
cat > "$work/go.mod" <<GOMOD
module twc.local/gitops-checker

go 1.26

require (
	github.com/fluxcd/cli-utils $FLUX_CLI_UTILS_VERSION
	github.com/fluxcd/pkg/apis/kustomize $FLUX_APIS_KUSTOMIZE_VERSION
	github.com/fluxcd/pkg/runtime $FLUX_RUNTIME_VERSION
	github.com/fluxcd/pkg/ssa $FLUX_SSA_VERSION
	github.com/google/cel-go $CEL_GO_VERSION
	github.com/yuin/gopher-lua $GOPHER_LUA_VERSION
	layeh.com/gopher-json $GOPHER_JSON_VERSION
	sigs.k8s.io/cli-utils $CLI_UTILS_VERSION
)
GOMOD
(cd "$work" && go mod tidy >&2)
# Minimal version selection must not have moved a pin: the versions tested are the ones named.
for pin in "sigs.k8s.io/cli-utils $CLI_UTILS_VERSION" \
  "github.com/fluxcd/cli-utils $FLUX_CLI_UTILS_VERSION" \
  "github.com/fluxcd/pkg/runtime $FLUX_RUNTIME_VERSION" \
  "github.com/fluxcd/pkg/apis/kustomize $FLUX_APIS_KUSTOMIZE_VERSION" \
  "github.com/fluxcd/pkg/ssa $FLUX_SSA_VERSION" \
  "github.com/yuin/gopher-lua $GOPHER_LUA_VERSION" \
  "layeh.com/gopher-json $GOPHER_JSON_VERSION" \
  "github.com/google/cel-go $CEL_GO_VERSION"; do
  got="$(cd "$work" && go list -m "${pin% *}")"
  [ "$got" = "$pin" ] || { log "selected $got, pinned $pin"; exit 1; }
done
log "building $key"
(cd "$work" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" .)
mv "$bin.tmp" "$bin"
log "built in $((SECONDS - start)) s"
echo "$bin"
