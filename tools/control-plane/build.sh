#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the bin directory on the last line.
# Reuses cached binaries; prints what it built and how long it took (on stderr).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
# Another minor for the smoke command (tools/control-plane/smoke.sh), cached beside the default.
KUBERNETES_VERSION="${TWC_KUBERNETES_VERSION:-$KUBERNETES_VERSION}"
cache_root="${TWC_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/control-plane}"
bin_dir="$cache_root/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION/bin"
work="$cache_root/work"
mkdir -p "$bin_dir" "$work"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

log() { echo "control-plane: $*" >&2; }

# A throw-away module in DIR that requires MODULE@VERSION and replaces each module upstream
# resolves through a local replace matching REPLACE_PATTERN (Go ignores replaces in a dependency)
# with its published REPLACE_VERSION; tools.go imports PACKAGES so `go mod tidy` keeps them.
wrapper_module() {
  local dir=$1 module=$2 version=$3 replace_pattern=$4 replace_version=$5
  shift 5
  mkdir -p "$dir"
  [ -f "$dir/go.sum" ] && return 0
  local upstream
  upstream="$(cd "$dir" && go mod download -json "$module@$version" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
  {
    echo "module twc.local/$(basename "$dir")"
    echo
    grep -E '^go [0-9]' "$upstream"
    echo
    echo "require $module $version"
    echo
    echo "replace ("
    sed -n '/^replace (/,/^)/p' "$upstream" | grep -E "$replace_pattern" \
      | awk -v v="$replace_version" '{print "\t" $1 " => " $1 " " v}'
    echo ")"
  } > "$dir/go.mod"
  {
    printf '//go:build tools\n\npackage tools\n\nimport (\n'
    printf '\t_ "%s"\n' "$@"
    printf ')\n'
  } > "$dir/tools.go"
  (cd "$dir" && go mod tidy -e >&2)
}

# Builds PACKAGE in module DIR into the bin dir as NAME (unless already there), with LDFLAGS.
build_binary() {
  local dir=$1 package=$2 name=$3 ldflags=$4
  [ -x "$bin_dir/$name" ] && return 0
  local start=$SECONDS
  log "building $name"
  (cd "$dir" && go build -trimpath -ldflags "$ldflags" -o "$bin_dir/$name.tmp" "$package")
  mv "$bin_dir/$name.tmp" "$bin_dir/$name"
  log "built $name in $((SECONDS - start)) s"
}

# k8s.io/kubernetes requires every staging module at v0.0.0 and resolves it through a local
# replace; the wrapper uses the published v0.<minor>.<patch> of each instead.
build_kubernetes() {
  local dir="$work/kubernetes-$KUBERNETES_VERSION"
  local minor version_flags
  minor="$(echo "$KUBERNETES_VERSION" | cut -d. -f2)"
  version_flags="-X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
  [ -x "$bin_dir/kube-apiserver" ] && [ -x "$bin_dir/kube-controller-manager" ] && return 0
  wrapper_module "$dir" k8s.io/kubernetes "$KUBERNETES_VERSION" '=> \./staging/' "v0.${KUBERNETES_VERSION#v1.}" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager
  for cmd in kube-apiserver kube-controller-manager; do
    build_binary "$dir" "k8s.io/kubernetes/cmd/$cmd" "$cmd" "-s -w $version_flags"
  done
}

# etcd's server module resolves its sibling modules through local replaces too.
build_etcd() {
  local dir="$work/etcd-$ETCD_VERSION"
  [ -x "$bin_dir/etcd" ] && return 0
  wrapper_module "$dir" go.etcd.io/etcd/server/v3 "$ETCD_VERSION" '=> \.\./' "$ETCD_VERSION" \
    go.etcd.io/etcd/server/v3
  build_binary "$dir" go.etcd.io/etcd/server/v3 etcd "-s -w"
}

total=$SECONDS
build_etcd
build_kubernetes
log "binaries ready in $bin_dir ($((SECONDS - total)) s)"
echo "$bin_dir"
