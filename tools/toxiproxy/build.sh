#!/usr/bin/env bash
# Builds toxiproxy-server (tools/toxiproxy/versions.env) from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the binary's path on the last line.
# Reuses a cached build; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_TOXIPROXY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/toxiproxy}"
root="$cache_root/$TOXIPROXY_VERSION"
bin="$root/bin/toxiproxy-server"
log() { echo "toxiproxy: $*" >&2; }

if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
command -v go >/dev/null 2>&1 || { log "Go is required to build toxiproxy"; exit 1; }
start=$SECONDS
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0
export GOTOOLCHAIN=local
mkdir -p "$root/bin"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
go_module_copy "$TOXIPROXY_MODULE" "$TOXIPROXY_VERSION" "$scratch/module"
log "building $TOXIPROXY_MODULE@$TOXIPROXY_VERSION ./cmd/server"
(cd "$scratch/module" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" ./cmd/server)
mv "$bin.tmp" "$bin"
log "built in $((SECONDS - start)) s"
echo "$bin"
