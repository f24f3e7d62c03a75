#!/usr/bin/env bash
# Two release builds of one commit give one image digest (docs/image.md, "Reproducible"): builds
# the release artifacts twice from a scratch worktree of the commit, each time from an empty Cargo
# target directory at the same path, and compares the image digests and every artifact's checksum.
# Outside CI (two fat-LTO release builds: tens of minutes on 2 cores).
#
#   tools/release/reproducible.sh [<commit>] [--work <dir>]   (default: HEAD, /tmp/twc-reproducible)
set -euo pipefail
export LC_ALL=C
commit=HEAD work=/tmp/twc-reproducible
while [[ $# -gt 0 ]]; do
  case $1 in
    --work) work=$2 && shift 2 ;;
    -*) echo "usage: $0 [<commit>] [--work <dir>]" >&2 && exit 2 ;;
    *) commit=$1 && shift ;;
  esac
done
repo=$(git rev-parse --show-toplevel)
rev=$(git -C "$repo" rev-parse "$commit^{commit}")
rm -rf "$work" && mkdir -p "$work"
git -C "$repo" worktree add --detach "$work/src" "$rev" >&2
trap 'git -C "$repo" worktree remove --force "$work/src" >/dev/null 2>&1 || true' EXIT
build() {
  local n=$1 t=$SECONDS
  rm -rf "$work/target"
  (cd "$work/src" && CARGO_TARGET_DIR="$work/target" bash tools/release/release.sh --artifacts "$work/out-$n") >&2
  echo "reproducible: build $n took $((SECONDS - t)) s, image $(cat "$work"/out-"$n"/*.digest)" >&2
}
build 1
build 2
if diff "$work/out-1/SHA256SUMS" "$work/out-2/SHA256SUMS" >&2; then
  echo "reproducible: $rev on $(date -u +%F): both builds gave image $(cat "$work"/out-1/*.digest) and identical artifacts"
elif cmp -s "$work"/out-1/*.digest "$work"/out-2/*.digest; then
  echo "reproducible: $rev: one image digest $(cat "$work"/out-1/*.digest); other artifacts differ (above)"
else
  echo "reproducible: $rev: the image digests differ: $(cat "$work"/out-1/*.digest) vs $(cat "$work"/out-2/*.digest)" >&2
  exit 1
fi
