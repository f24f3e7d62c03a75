#!/usr/bin/env bash
# Builds kube-apiserver, kube-controller-manager and etcd from the Go module proxy into a cache
# outside the repository, keyed by version, and prints the bin directory on the last line.
# Reuses cached binaries; prints what it built and how long it took (on stderr).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=versions.env
source "$here/versions.env"
cache_root="${TWC_CONTROL_PLANE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/temporal-worker-controller/control-plane}"
bin_dir="$cache_root/k8s-$KUBERNETES_VERSION-etcd-$ETCD_VERSION/bin"
work="$cache_root/work"
mkdir -p "$bin_dir" "$work"
export GOFLAGS="-mod=mod -buildvcs=false"
export CGO_ENABLED=0

log() { echo "control-plane: $*" >&2; }

# The wrapper module pins k8s.io/kubernetes and replaces every staging module (required at v0.0.0
# and resolved by local replaces upstream, which Go ignores in a dependency) with its published
# v0.<minor>.<patch>.
build_kubernetes() {
  local dir="$work/kubernetes-$KUBERNETES_VERSION" staging="v0.${KUBERNETES_VERSION#v1.}"
  mkdir -p "$dir"
  if [ ! -f "$dir/go.sum" ]; then
    local upstream
    upstream="$(cd "$dir" && go mod download -json "k8s.io/kubernetes@$KUBERNETES_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module twc.local/control-plane"
      echo
      grep -E '^go [0-9]' "$upstream"
      echo
      echo "require k8s.io/kubernetes $KUBERNETES_VERSION"
      echo
      echo "replace ("
      sed -n '/^replace (/,/^)/p' "$upstream" | grep -E '=> \./staging/' \
        | awk -v v="$staging" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } > "$dir/go.mod"
    cat > "$dir/tools.go" <<'GO'
//go:build tools

package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
)
GO
    (cd "$dir" && go mod tidy -e >&2)
  fi
  for cmd in kube-apiserver kube-controller-manager; do
    if [ ! -x "$bin_dir/$cmd" ]; then
      local start=$SECONDS
      log "building $cmd $KUBERNETES_VERSION"
      (cd "$dir" && go build -trimpath -ldflags "-s -w -X k8s.io/component-base/version.gitVersion=$KUBERNETES_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$(echo "$KUBERNETES_VERSION" | cut -d. -f2)" -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd")
      mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
      log "built $cmd in $((SECONDS - start)) s"
    fi
  done
}

build_etcd() {
  local dir="$work/etcd-$ETCD_VERSION"
  [ -x "$bin_dir/etcd" ] && return 0
  mkdir -p "$dir"
  if [ ! -f "$dir/go.sum" ]; then
    local upstream
    upstream="$(cd "$dir" && go mod download -json "go.etcd.io/etcd/server/v3@$ETCD_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')"
    {
      echo "module twc.local/etcd"
      echo
      grep -E '^go [0-9]' "$upstream"
      echo
      echo "require go.etcd.io/etcd/server/v3 $ETCD_VERSION"
      echo
      echo "replace ("
      sed -n '/^replace (/,/^)/p' "$upstream" | grep -E '=> \.\./' \
        | awk -v v="$ETCD_VERSION" '{print "\t" $1 " => " $1 " " v}'
      echo ")"
    } > "$dir/go.mod"
    cat > "$dir/tools.go" <<'GO'
//go:build tools

package tools

import _ "go.etcd.io/etcd/server/v3"
GO
    (cd "$dir" && go mod tidy -e >&2)
  fi
  local start=$SECONDS
  log "building etcd $ETCD_VERSION"
  (cd "$dir" && go build -trimpath -ldflags "-s -w" -o "$bin_dir/etcd.tmp" go.etcd.io/etcd/server/v3)
  mv "$bin_dir/etcd.tmp" "$bin_dir/etcd"
  log "built etcd in $((SECONDS - start)) s"
}

total=$SECONDS
build_etcd
build_kubernetes
log "binaries ready in $bin_dir ($((SECONDS - total)) s)"
echo "$bin_dir"
