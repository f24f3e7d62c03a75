#!/usr/bin/env bash
# Packages a built controller binary as an OCI image, without a container daemon (docs/image.md).
#
#   tools/image/package.sh --binary <controller binary> --version <v> --revision <git sha>
#                          --out <image.oci.tar> [--push <registry/repo:tag>]
#                          [--timestamp <unix seconds>] [--omit-package <debian package>]
#                          [--name <binary name>] [--cmd <JSON array>]
#
# The root file system is a distroless-equivalent base assembled from Debian packages (glibc,
# libgcc, CA certificates, time zone data; /etc/passwd and /etc/group with nonroot 65532; no
# shell, no package manager), the binary at /usr/local/bin/<name> (default
# temporal-worker-controller), USER 65532:65532, ENTRYPOINT the binary, CMD --cmd (default
# ["run"]), OCI labels source/version/revision/licenses/title. --name and --cmd package another
# binary the same way (the quickstart's sample worker: --name hello-worker --cmd '[]').
# buildah (vfs storage, chroot isolation, a private storage root) commits it with every file
# and history time set to --timestamp (default: SOURCE_DATE_EPOCH, else the revision's commit
# time, else 0), so packaging one binary twice gives one digest. The .debs are downloaded with
# `apt-get download` once per set of versions into ~/.cache/temporal-worker-controller/image-base.
# --push copies the archive to a registry with its digest preserved (TLS verification is off
# only for a registry on 127.0.0.1 or localhost). --omit-package leaves one base package out
# (the mutation test: a base without libgcc-s1). The image digest (sha256:...) is the last line
# of stdout; everything else goes to stderr.
set -euo pipefail
export LC_ALL=C

die() {
  echo "package: $*" >&2
  exit 1
}
usage() {
  sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

SOURCE_URL=https://github.com/temporalio/temporal-worker-controller-rs
LICENSE_ID=Apache-2.0
BASE_PACKAGES=(libc6 libgcc-s1 ca-certificates tzdata)
NONROOT=65532

binary="" version="" revision="" out="" push="" timestamp="${SOURCE_DATE_EPOCH:-}" omit=""
name=temporal-worker-controller cmd='["run"]'
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=${2:?}; shift 2 ;;
    --version) version=${2:?}; shift 2 ;;
    --revision) revision=${2:?}; shift 2 ;;
    --out) out=${2:?}; shift 2 ;;
    --push) push=${2:?}; shift 2 ;;
    --timestamp) timestamp=${2:?}; shift 2 ;;
    --omit-package) omit=${2:?}; shift 2 ;;
    --name) name=${2:?}; shift 2 ;;
    --cmd) cmd=${2:?}; shift 2 ;;
    -h | --help) usage ;;
    *) echo "package: unknown argument $1" >&2; usage ;;
  esac
done
[ -n "$binary" ] && [ -n "$version" ] && [ -n "$revision" ] && [ -n "$out" ] || usage
[ -f "$binary" ] && [ -x "$binary" ] || die "--binary $binary is not an executable file"
[[ $name =~ ^[a-z0-9][a-z0-9._-]*$ ]] || die "--name $name is not a plain file name"
[[ $cmd =~ ^\[.*\]$ ]] || die "--cmd must be a JSON array, e.g. '[\"run\"]' or '[]'"
BINARY_PATH=/usr/local/bin/$name
for tool in buildah skopeo apt-get dpkg-deb; do
  command -v "$tool" >/dev/null 2>&1 || die "$tool not found (bash .ci/setup-tests checks installs it)"
done
if [ -z "$timestamp" ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  timestamp=$(git -C "$here" show -s --format=%ct "$revision" 2>/dev/null || echo 0)
fi
[[ $timestamp =~ ^[0-9]+$ ]] || die "--timestamp must be seconds since the epoch, got $timestamp"

work=$(mktemp -d "${TMPDIR:-/tmp}/twc-image.XXXXXX")
cleanup() {
  # buildah's vfs layers are plain directories, some read-only: make them removable first.
  chmod -R u+w "$work" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The .debs of the base, cached per set of versions (apt's candidates on this machine).
base_debs() {
  local spec="" pkg ver
  for pkg in "${BASE_PACKAGES[@]}"; do
    ver=$(apt-cache policy "$pkg" | awk '/Candidate:/ {print $2}')
    [ -n "$ver" ] && [ "$ver" != "(none)" ] || die "no Debian candidate for $pkg (apt-get update?)"
    spec+="$pkg=$ver "
  done
  local key dir
  key=$(printf '%s' "$spec $(dpkg --print-architecture)" | sha256sum | cut -c1-16)
  dir="${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/image-base/$key"
  if [ ! -f "$dir/.complete" ]; then
    mkdir -p "$dir"
    # shellcheck disable=SC2086 # one word per package=version
    (cd "$dir" && apt-get download $spec >&2 2>/dev/null) || (cd "$dir" && apt-get download $spec >&2)
    printf '%s\n' "$spec" >"$dir/.complete"
  fi
  echo "$dir"
}

# The root file system: the packages' files without their scripts, docs and maintainer tools.
assemble_root() {
  local debs=$1 root=$2 deb pkg
  mkdir -p "$root"
  for deb in "$debs"/*.deb; do
    pkg=$(dpkg-deb -f "$deb" Package)
    [ "$pkg" = "$omit" ] && { echo "package: leaving out $pkg (--omit-package)" >&2; continue; }
    dpkg-deb -x "$deb" "$root"
  done
  # ca-certificates ships the Mozilla roots and a shell script that concatenates them at install
  # time; the bundle is made here instead (sorted: reproducible) and the script is not kept.
  mkdir -p "$root/etc/ssl/certs"
  if [ -d "$root/usr/share/ca-certificates/mozilla" ]; then
    find "$root/usr/share/ca-certificates/mozilla" -name '*.crt' | sort |
      while read -r crt; do cat "$crt"; done >"$root/etc/ssl/certs/ca-certificates.crt"
  fi
  rm -rf "$root/usr/sbin" "$root/usr/share/doc" "$root/usr/share/man" "$root/usr/share/lintian" \
    "$root/usr/share/ca-certificates" "$root/etc/ca-certificates" \
    "$root"/usr/lib/*/gconv "$root/usr/share/locale"
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n' \
    "$NONROOT" "$NONROOT" >"$root/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:%s:\n' "$NONROOT" >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  mkdir -p "$root/tmp" "$root/root" "$root/home" "$root/usr/local/bin" "$work/homes/nonroot"
  chmod 1777 "$root/tmp"
  chmod 0700 "$root/root"
  chmod 0755 "$work/homes/nonroot"
  install -m 0755 "$binary" "$root$BINARY_PATH"
}

debs=$(base_debs)
root="$work/root"
assemble_root "$debs" "$root"
# What could make a shell or package manager reach the image: refuse rather than ship it.
for forbidden in bin/sh bin/bash usr/bin/sh usr/bin/bash bin/busybox usr/bin/dpkg usr/bin/apt; do
  [ ! -e "$root/$forbidden" ] || die "the base holds /$forbidden"
done

store=(--root "$work/storage" --runroot "$work/run" --storage-driver vfs)
export BUILDAH_ISOLATION=chroot
ctr=$(buildah "${store[@]}" from --isolation chroot --quiet scratch)
buildah "${store[@]}" copy --quiet "$ctr" "$root" / >/dev/null
# The nonroot home belongs to the user (copied files are root's).
buildah "${store[@]}" copy --quiet --chown "$NONROOT:$NONROOT" "$ctr" "$work/homes" /home >/dev/null
buildah "${store[@]}" config \
  --os linux --arch "$(dpkg --print-architecture)" \
  --user "$NONROOT:$NONROOT" --workingdir / \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --entrypoint "[\"$BINARY_PATH\"]" --cmd "$cmd" --port 8080 \
  --label "org.opencontainers.image.source=$SOURCE_URL" \
  --label "org.opencontainers.image.version=$version" \
  --label "org.opencontainers.image.revision=$revision" \
  --label "org.opencontainers.image.licenses=$LICENSE_ID" \
  --label "org.opencontainers.image.title=$name" \
  --created-by "tools/image/package.sh" \
  "$ctr"
mkdir -p "$(dirname "$out")"
rm -f "$out"
buildah "${store[@]}" commit --quiet --format oci --disable-compression=false --timestamp "$timestamp" --rm \
  "$ctr" "oci:$work/layout:$name:$version" >/dev/null
# The archive byte for byte, not only the image: an `oci-archive:` that buildah writes carries the
# packing time, so the layout is tarred here in name order with the image's time and owner.
tar --sort=name --mtime="@$timestamp" --owner=0 --group=0 --numeric-owner --format=posix \
  --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$work/layout" -cf "$out" .
digest="sha256:$(skopeo inspect --raw "oci-archive:$out" | sha256sum | cut -d' ' -f1)"
echo "package: $out ($(du -h "$out" | cut -f1)), $digest" >&2

if [ -n "$push" ]; then
  tls=()
  case "$push" in 127.0.0.1:* | localhost:* | localhost/*) tls=(--dest-tls-verify=false) ;; esac
  skopeo copy --quiet --preserve-digests "${tls[@]}" "oci-archive:$out" "docker://$push" >&2
  echo "package: pushed $push@$digest" >&2
fi
echo "$digest"
