#!/usr/bin/env bash
# Builds prometheus-adapter (tools/prometheus-adapter/versions.env) from the Go module proxy into
# a cache outside the repository, keyed by version, and prints the binary's path on the last line.
# Reuses a cached build; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_PROMETHEUS_ADAPTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/prometheus-adapter}"
root="$cache_root/$PROMETHEUS_ADAPTER_VERSION"
bin="$root/bin/prometheus-adapter"
log() { echo "prometheus-adapter: $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { log "Go is required to build prometheus-adapter"; exit 1; }
start=$SECONDS
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
# The module's go directive is older than the local toolchain: no toolchain download.
export GOTOOLCHAIN=local
mkdir -p "$root/bin"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
go_module_copy "$PROMETHEUS_ADAPTER_MODULE" "$PROMETHEUS_ADAPTER_VERSION" "$scratch/module"
log "downloaded $PROMETHEUS_ADAPTER_MODULE@$PROMETHEUS_ADAPTER_VERSION in $((SECONDS - start)) s; building ./cmd/adapter"
build_start=$SECONDS
# Two shared cores: stay out of the way of interactive work.
(cd "$scratch/module" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" ./cmd/adapter)
# A binary that cannot even print its flags is not worth caching (its --help exits non-zero).
if ! { "$bin.tmp" --help 2>&1 || true; } | grep -q -- --prometheus-url; then
  log "the built adapter does not run"
  rm -f "$bin.tmp"
  exit 1
fi
mv "$bin.tmp" "$bin"
log "built in $((SECONDS - build_start)) s (total $((SECONDS - start)) s)"
echo "$bin"
