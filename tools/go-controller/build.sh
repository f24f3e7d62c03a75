#!/usr/bin/env bash
# Builds the real Go temporal-worker-controller (tools/go-controller/versions.env) from the Go
# module proxy into a cache outside the repository, keyed by version, and prints the binary's
# path on the last line. Reuses a cached build; says what it built and how long it took on stderr.
#
# Layout under $cache_root/<version>/ (tests/harness/src/go_controller.rs relies on it):
#   bin/temporal-worker-controller  the manager (./cmd)
#   crds/*.yaml                      its CRDs (helm/temporal-worker-controller-crds/templates)
#   module/                          a writable copy of the module (examples/, docs/ are read by tests)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_GO_CONTROLLER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/go-controller}"
root="$cache_root/$GO_CONTROLLER_VERSION"
bin="$root/bin/temporal-worker-controller"
log() { echo "go-controller: $*" >&2; }

if [ -x "$bin" ] && [ -d "$root/crds" ] && [ -f "$root/module/go.mod" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { log "Go is required to build the Go controller"; exit 1; }
start=$SECONDS
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# The module asks for go 1.26.2; the local toolchain is newer, so no toolchain download.
export GOTOOLCHAIN=local
mkdir -p "$root/bin"
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
rm -rf "$root/module" "$root/module.tmp" "$root/crds"
go_module_copy "$GO_CONTROLLER_MODULE" "$GO_CONTROLLER_VERSION" "$root/module.tmp"
mv "$root/module.tmp" "$root/module"
log "downloaded $GO_CONTROLLER_MODULE@$GO_CONTROLLER_VERSION in $((SECONDS - start)) s"
# The CRD chart's templates are plain CRDs (no Helm templating in this version); refuse to copy
# them if a later version adds some, since kubectl would then get unrendered text.
crd_src="$root/module/helm/temporal-worker-controller-crds/templates"
if grep -l '{{' "$crd_src"/*.yaml >&2; then
  log "the CRD templates above use Helm templating: render them before installing"
  exit 1
fi
mkdir -p "$root/crds.tmp"
cp "$crd_src"/*.yaml "$root/crds.tmp/"
mv "$root/crds.tmp" "$root/crds"
build_start=$SECONDS
log "building ./cmd (dependencies from the proxy)"
# Two shared cores: stay out of the way of interactive work.
(cd "$root/module" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" ./cmd)
mv "$bin.tmp" "$bin"
log "built in $((SECONDS - build_start)) s (total $((SECONDS - start)) s)"
echo "$bin"
