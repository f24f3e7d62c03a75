#!/usr/bin/env bash
# Builds the controller of an earlier commit of this repository (tools/old-controller/versions.env,
# or the commit given as $1) once, into a cache outside the repository keyed by commit, and prints
# the cache directory on the last line. Says what it built and how long it took on stderr.
#
# Layout under $cache_root/<commit>/ (tests/upgrade.rs relies on it):
#   bin/temporal-worker-controller  the old controller (debug build)
#   charts/                          the old commit's charts/ directory
#   crds/                            the old commit's generated CRDs
#
# Cost: the old tree is built with the *same* Cargo target directory as the working tree
# ($CARGO_TARGET_DIR, else <repo>/target), so the dependencies compiled for the working tree
# (or, in .ci/setup-tests, compiled here first and reused by the test build) are shared; only the old
# crate itself and dependencies whose feature set differs are compiled. The old package is
# renamed (temporal-worker-controller-old, binary temporal-worker-controller-old-<commit>) so
# that none of its artifacts overwrites the working tree's: Cargo hashes path packages by
# name and relative path, which the two trees share otherwise.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
want="${1:-$OLD_CONTROLLER_COMMIT}"
cache_root="${TWC_OLD_CONTROLLER_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/old-controller}"
log() { echo "old-controller: $*" >&2; }
commit="$(git -C "$repo" rev-parse --verify "$want^{commit}" 2>/dev/null || true)"
if [ -z "$commit" ] && git -C "$repo" remote get-url origin >/dev/null 2>&1; then
  # A shallow clone: ask the remote for just that commit (a full id, as versions.env pins).
  log "commit $want is not in this clone; fetching it from origin"
  git -C "$repo" fetch --quiet --depth=1 origin "$want" 2>/dev/null || true
  commit="$(git -C "$repo" rev-parse --verify "$want^{commit}" 2>/dev/null || true)"
fi
if [ -z "$commit" ]; then
  # A shallow clone may lack the commit; a cached build keyed by the short id still serves.
  for dir in "$cache_root"/"$want"*; do
    if [ -x "$dir/bin/temporal-worker-controller" ]; then echo "$dir"; exit 0; fi
  done
  log "commit $want is not in this clone (shallow?): git fetch --unshallow, or fetch that commit"
  exit 1
fi
root="$cache_root/$commit"
bin="$root/bin/temporal-worker-controller"
if [ -x "$bin" ] && [ -d "$root/charts" ] && [ -d "$root/crds" ]; then
  echo "$root"
  exit 0
fi
start=$SECONDS
target="${CARGO_TARGET_DIR:-$repo/target}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
git -C "$repo" archive "$commit" | tar -x -C "$scratch"
short="${commit:0:7}"
python3 - "$scratch/Cargo.toml" "$short" <<'PY'
import re, sys
path, short = sys.argv[1], sys.argv[2]
text = open(path).read()
head, sep, rest = text.partition("\n[package]\n")
assert sep, "no [package] section"
body, nxt, tail = rest.partition("\n[")
body = body.replace('name = "temporal-worker-controller"', 'name = "temporal-worker-controller-old"', 1)
body = re.sub(r'\ndefault-run = "[^"]*"', "", "\n" + body)[1:]
body += "\nautobins = false\n"
extra = (
    '\n[lib]\nname = "temporal_worker_controller"\npath = "src/lib.rs"\n'
    f'\n[[bin]]\nname = "temporal-worker-controller-old-{short}"\npath = "src/main.rs"\n'
)
open(path, "w").write(head + sep + body + extra + nxt + tail)
PY
log "building $short (debug) with target dir $target"
(cd "$scratch" && CARGO_TARGET_DIR="$target" cargo build --quiet -p temporal-worker-controller-old \
  --bin "temporal-worker-controller-old-$short")
rm -rf "$root.tmp"
mkdir -p "$root.tmp/bin"
cp "$target/debug/temporal-worker-controller-old-$short" "$root.tmp/bin/temporal-worker-controller"
cp -r "$scratch/charts" "$scratch/crds" "$root.tmp/"
rm -rf "$root"
mv "$root.tmp" "$root"
log "built $short in $((SECONDS - start)) s: $root"
echo "$root"
