#!/usr/bin/env bash
# Builds actionlint (tools/actionlint/versions.env) from the Go module proxy into a cache outside
# the repository, keyed by version, and prints the binary's path on the last line. Reuses a
# cached build; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# shellcheck source=../lib/go-module.sh
source "$here/../lib/go-module.sh"
cache_root="${TWC_ACTIONLINT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/actionlint}"
go_module_binary actionlint "$ACTIONLINT_MODULE" "$ACTIONLINT_VERSION" \
  ./cmd/actionlint "$cache_root/$ACTIONLINT_VERSION/bin/actionlint" -shellcheck
