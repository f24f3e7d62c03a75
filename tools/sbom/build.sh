#!/usr/bin/env bash
# Installs cargo-sbom (tools/sbom/versions.env) from crates.io with `cargo install --locked` into
# a cache outside the repository, keyed by version, and prints the binary's path on the last line.
# Reuses a cached install; says what it built and how long it took on stderr.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_SBOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/cargo-sbom}"
root="$cache_root/$CARGO_SBOM_VERSION"
bin="$root/bin/cargo-sbom"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
start=$SECONDS
# Its own target dir (removed after), never the repository's; two shared cores: stay out of the way.
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
CARGO_TARGET_DIR="$scratch" nice -n 10 cargo install --locked --quiet \
  --version "$CARGO_SBOM_VERSION" --root "$root" cargo-sbom >&2
"$bin" --version >&2
echo "cargo-sbom: built in $((SECONDS - start)) s" >&2
echo "$bin"
