#!/usr/bin/env bash
# Builds every artifact of the checked-out release into an output directory (README, "Releases").
# Run through `tools/release/release.sh --artifacts <dir> [options]`, which the release workflow
# (.github/workflows/release.yml) calls on a tag and tests/release.rs on a scratch copy.
#
#   --binary <path>          package this controller binary instead of running `cargo build --release`
#   --push-registry <reg>    push the image to <reg>/temporal-worker-controller-rs:<image tag> and both
#                            charts to oci://<reg>/charts; the charts' default image then points there
#   --image-tag <tag>        the image tag pushed (default: the version)
#   --arch <amd64|arm64>     the architecture, which must be this machine's (default: this machine's)
#   --plain-http             the registry speaks plain HTTP (a registry on loopback)
#
# The version is Cargo.toml's, after `release.sh --check` (so on a tag, the tag's); the CHANGELOG
# must have its section (cut the release first). Every time stamp is the commit's
# (SOURCE_DATE_EPOCH overrides), so one commit and one binary give the same files.
set -euo pipefail
export LC_ALL=C

IMAGE_NAME=temporal-worker-controller-rs
here="$(cd "$(dirname "$0")" && pwd)"

die() {
  echo "release: $*" >&2
  exit 1
}
note() { echo "release: $*" >&2; }

usage() {
  echo "usage: tools/release/release.sh --artifacts <out-dir> [--binary <path>] [--push-registry <registry/namespace>] [--image-tag <tag>] [--arch <amd64|arm64>] [--plain-http]" >&2
  exit 2
}

# Debian/Go names of this machine's architecture.
host_arch() {
  case "$(uname -m)" in
    x86_64) echo amd64 ;;
    aarch64 | arm64) echo arm64 ;;
    *) die "unsupported architecture $(uname -m): give --arch" ;;
  esac
}

parse_args() {
  OUT="" BINARY="" REGISTRY="" IMAGE_TAG="" ARCH="" PLAIN_HTTP=""
  [[ $# -ge 1 && $1 != -* ]] || usage
  OUT=$1
  shift
  while [[ $# -gt 0 ]]; do
    case $1 in
      --binary | --push-registry | --image-tag | --arch)
        [[ $# -ge 2 && -n $2 ]] || die "$1 needs a value"
        case $1 in
          --binary) BINARY=$2 ;;
          --push-registry) REGISTRY=${2%/} ;;
          --image-tag) IMAGE_TAG=$2 ;;
          --arch) ARCH=$2 ;;
        esac
        shift 2
        ;;
      --plain-http) PLAIN_HTTP=1 && shift ;;
      *) die "unknown option $1 (try --help)" ;;
    esac
  done
  [[ -z $ARCH ]] && ARCH=$(host_arch)
  [[ $ARCH == amd64 || $ARCH == arm64 ]] || die "--arch must be amd64 or arm64, not '$ARCH'"
  # tools/image/package.sh makes an image of this machine's architecture (its Debian base).
  [[ $ARCH == "$(host_arch)" ]] || die "--arch $ARCH: this machine builds $(host_arch) (run it on $ARCH)"
  [[ -z $REGISTRY || $REGISTRY =~ ^[A-Za-z0-9.:-]+(/[a-z0-9._-]+)*$ ]] ||
    die "--push-registry '$REGISTRY' is not <host[:port]>[/namespace]"
  if [[ -n $BINARY ]]; then
    [[ -f $BINARY && -x $BINARY ]] || die "--binary $BINARY is not an executable file"
    BINARY=$(cd "$(dirname "$BINARY")" && pwd)/$(basename "$BINARY")
  fi
}

# The lines of CHANGELOG.md's section for version $1 (without its heading).
changelog_section() {
  awk -v v="$1" '
    /^## / { if (in_s) exit; in_s = index($0, "## [" v "] - ") == 1; next }
    in_s' CHANGELOG.md
}

# The controller binary: the given one, or a release build of this checkout.
controller_binary() {
  if [[ -n $BINARY ]]; then
    echo "$BINARY"
    return
  fi
  note "building the release binary (cargo build --release --locked)"
  cargo build --release --locked --bin temporal-worker-controller >&2
  local target
  target=$(cargo metadata --format-version 1 --no-deps | sed -E 's/.*"target_directory":"([^"]+)".*/\1/')
  echo "$target/release/temporal-worker-controller"
}

# A tool from its cached build script (tools/<name>/build.sh), unless it is on PATH.
tool() {
  local name=$1 script=$2
  if command -v "$name" >/dev/null 2>&1; then
    command -v "$name"
  else
    bash "$script" | tail -n 1
  fi
}

# The CLI and kubectl plugin: the binary, the plugin name as a link to it, LICENSE and README.
cli_tarball() {
  local bin=$1 tarball=$2 stage
  stage=$(mktemp -d)
  local dir="$stage/temporal-worker-controller-$VERSION-linux-$ARCH"
  mkdir -p "$dir"
  cp "$bin" "$dir/temporal-worker-controller"
  chmod 0755 "$dir/temporal-worker-controller"
  ln -s temporal-worker-controller "$dir/kubectl-temporal_workers"
  cp LICENSE README.md "$dir/"
  # Reproducible: fixed order, owner and time; gzip without a name or time stamp.
  tar -C "$stage" --sort=name --mtime="@$EPOCH" --owner=0 --group=0 --numeric-owner \
    -cf - "$(basename "$dir")" | gzip -9 -n >"$tarball"
  rm -rf "$stage"
}

# Both charts as .tgz. With a registry, the controller chart's default image is the one pushed
# there, so a chart pulled from a registry pulls its image from the same place.
charts() {
  local helm=$1 stage chart
  stage=$(mktemp -d)
  while read -r chart; do
    chart=$(dirname "$chart")
    # -L: the chart links files/dashboards to the repository's dashboards/.
    cp -rL "$chart" "$stage/"
    if [[ -n $REGISTRY && -f $chart/values.yaml ]]; then
      sed -i -E "s#^(  repository: ).*/$IMAGE_NAME\$#\1$REGISTRY/$IMAGE_NAME#" \
        "$stage/$(basename "$chart")/values.yaml"
    fi
    # Helm 4 dates the archive's entries by SOURCE_DATE_EPOCH: reproducible charts.
    SOURCE_DATE_EPOCH=$EPOCH "$helm" package "$stage/$(basename "$chart")" --destination "$OUT" >&2
  done < <(git ls-files -- ':(glob)charts/*/Chart.yaml')
  rm -rf "$stage"
}

# The SBOM of the controller and every crate Cargo.lock pins for it (SPDX 2.3 JSON, from
# cargo-sbom: tools/sbom/build.sh). Its creation time and document namespace (a random UUID) are
# set from the commit, and its package and relationship lists (in hash-map order, different on
# each run) are sorted, so the SBOM is as reproducible as the rest.
sbom() {
  local cargo_sbom created namespace
  cargo_sbom=$(tool cargo-sbom "$here/../sbom/build.sh")
  created=$(date -u -d "@$EPOCH" +%Y-%m-%dT%H:%M:%SZ)
  namespace="https://github.com/temporalio/temporal-worker-controller-rs/releases/v$VERSION/sbom-$REVISION"
  "$cargo_sbom" --cargo-package temporal-worker-controller --output-format spdx_json_2_3 |
    CREATED=$created NAMESPACE=$namespace python3 -c '
import json, os, sys
doc = json.load(sys.stdin)
if "creationInfo" not in doc:
    sys.exit("cargo-sbom wrote no creationInfo")
doc["creationInfo"]["created"] = os.environ["CREATED"]
doc["documentNamespace"] = os.environ["NAMESPACE"]
for key in ("packages", "files", "relationships"):
    if isinstance(doc.get(key), list):
        doc[key].sort(key=lambda item: json.dumps(item, sort_keys=True))
json.dump(doc, sys.stdout, indent=2, sort_keys=True)
print()
' >"$1" || die "could not pin the SBOM's creation time, namespace and order"
  grep -q "\"created\": \"$created\"" "$1" || die "cargo-sbom wrote no creation time to set"
}

# The image (tools/image/package.sh), pushed when a registry is given; prints its digest.
image() {
  local bin=$1 archive=$2 args=()
  args=(--binary "$bin" --version "$VERSION" --revision "$REVISION" --out "$archive" --timestamp "$EPOCH")
  [[ -n $REGISTRY ]] && args+=(--push "$REGISTRY/$IMAGE_NAME:$IMAGE_TAG")
  bash tools/image/package.sh "${args[@]}" | tail -n 1
}

push_charts() {
  local helm=$1 tgz args=()
  [[ -n $PLAIN_HTTP ]] && args+=(--plain-http)
  for tgz in "$OUT"/*.tgz; do
    "$helm" push "$tgz" "oci://$REGISTRY/charts" "${args[@]}" >&2
  done
}

main() {
  parse_args "$@"
  cd "$(git rev-parse --show-toplevel)"
  bash "$here/release.sh" --check >&2
  VERSION=$(awk -F'"' '/^\[/ { p = ($0 == "[package]") } p && /^version *=/ { print $2; exit }' Cargo.toml)
  REVISION=$(git rev-parse HEAD)
  EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
  IMAGE_TAG=${IMAGE_TAG:-$VERSION}
  local notes
  notes=$(changelog_section "$VERSION")
  [[ -n $notes ]] || die "CHANGELOG.md has no [$VERSION] section: cut the release first (tools/release/release.sh $VERSION)"
  [[ ! -e $OUT ]] || [[ -d $OUT && -z $(ls -A "$OUT") ]] || die "$OUT exists and is not empty"
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)

  local bin helm digest
  bin=$(controller_binary)
  helm=$(tool helm tools/helm/build.sh)
  printf '%s\n' "$notes" | sed -e '/./,$!d' >"$OUT/RELEASE_NOTES.md"
  cli_tarball "$bin" "$OUT/temporal-worker-controller-$VERSION-linux-$ARCH.tar.gz"
  charts "$helm"
  sbom "$OUT/temporal-worker-controller-$VERSION.spdx.json"
  digest=$(image "$bin" "$OUT/$IMAGE_NAME-$VERSION-linux-$ARCH.oci.tar")
  [[ $digest =~ ^sha256:[0-9a-f]{64}$ ]] || die "tools/image/package.sh printed no digest (last line: '$digest')"
  echo "$digest" >"$OUT/$IMAGE_NAME-$VERSION-linux-$ARCH.digest"
  [[ -n $REGISTRY ]] && push_charts "$helm"
  (cd "$OUT" && find . -maxdepth 1 -type f ! -name SHA256SUMS -printf '%f\n' | sort | xargs sha256sum >SHA256SUMS)
  note "v$VERSION ($ARCH): $(($(wc -l <"$OUT/SHA256SUMS"))) artifacts in $OUT, image $digest"
  [[ -n $REGISTRY ]] && note "pushed $REGISTRY/$IMAGE_NAME:$IMAGE_TAG and oci://$REGISTRY/charts"
  echo "$digest"
}

main "$@"
