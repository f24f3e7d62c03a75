#!/usr/bin/env bash
# Builds the real Helm 4 CLI (tools/helm/versions.env) from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the binary's path on the last line.
# Reuses a cached build; says what it built and how long it took on stderr.
#
# Helm's Makefile stamps the release version into the binary with -ldflags; without that stamp
# `helm version` prints only the major.minor of internal/version, so the same stamp is applied
# here and `helm version --template '{{.Version}}'` prints the pinned version exactly.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_HELM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/helm}"
root="$cache_root/$HELM_VERSION"
bin="$root/bin/helm"
log() { echo "helm: $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { log "Go is required to build helm"; exit 1; }
start=$SECONDS
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# The module asks for go 1.26.0; the local toolchain is at least that, so no toolchain download.
export GOTOOLCHAIN=local
mkdir -p "$root/bin"
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
rm -rf "$root/module"
go_module_copy "$HELM_MODULE" "$HELM_VERSION" "$root/module"
log "downloaded $HELM_MODULE@$HELM_VERSION in $((SECONDS - start)) s; building ./cmd/helm"
build_start=$SECONDS
ldflags="-s -w -X $HELM_MODULE/internal/version.version=$HELM_VERSION"
ldflags+=" -X $HELM_MODULE/internal/version.gitTreeState=clean"
# Two shared cores: stay out of the way of interactive work.
(cd "$root/module" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin.tmp" ./cmd/helm)
got="$("$bin.tmp" version --template '{{.Version}}')"
if [ "$got" != "$HELM_VERSION" ]; then
  log "the built helm says $got, pinned $HELM_VERSION"
  rm -f "$bin.tmp"
  exit 1
fi
mv "$bin.tmp" "$bin"
rm -rf "$root/module"
log "built in $((SECONDS - build_start)) s (total $((SECONDS - start)) s)"
echo "$bin"
