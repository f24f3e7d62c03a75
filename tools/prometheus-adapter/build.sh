#!/usr/bin/env bash
# Builds prometheus-adapter (tools/prometheus-adapter/versions.env) from the Go module proxy into
# a cache outside the repository, keyed by version, and prints the binary's path on the last line.
# Reuses a cached build; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
cache_root="${TWC_PROMETHEUS_ADAPTER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/prometheus-adapter}"
go_module_binary prometheus-adapter "$PROMETHEUS_ADAPTER_MODULE" "$PROMETHEUS_ADAPTER_VERSION" \
  ./cmd/adapter "$cache_root/$PROMETHEUS_ADAPTER_VERSION/bin/prometheus-adapter" --prometheus-url
