# Sourced by the tools/*/build.sh scripts that build a Go module from the module proxy.
#
# go_module_copy MODULE VERSION DEST: puts a writable copy of exactly MODULE@VERSION at DEST.
# `go install module@version` would need the proxy's version list, which is refused here;
# downloading the exact version does not. The module cache is read-only and `go build` writes
# go.sum updates under -mod=mod, hence a copy.
go_module_copy() {
  local module=$1 version=$2 dest=$3 scratch extracted
  scratch="$(mktemp -d)"
  extracted="$(cd "$scratch" && go mod download -json "$module@$version" \
    | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')"
  rmdir "$scratch"
  if [ ! -f "$extracted/go.mod" ]; then
    echo "go mod download of $module@$version gave no module directory" >&2
    return 1
  fi
  cp -r "$extracted" "$dest"
  chmod -R u+w "$dest"
}

# go_module_binary NAME MODULE VERSION PACKAGE BIN CHECK: builds PACKAGE (e.g. ./cmd/server) of
# MODULE@VERSION into BIN (a cache path keyed by version) unless BIN is already there, and prints
# BIN's path on the last line. CHECK is a string the built binary's `--help` must print: a binary
# that cannot even print its flags is not worth caching. Says what it did on stderr, prefixed
# with NAME.
go_module_binary() {
  local name=$1 module=$2 version=$3 package=$4 bin=$5 check=$6
  if [ -x "$bin" ]; then
    echo "$bin"
    return 0
  fi
  command -v go >/dev/null 2>&1 || { echo "$name: Go is required to build it" >&2; return 1; }
  local start=$SECONDS scratch
  # -mod=mod: the copy's go.sum may need entries; no VCS stamping of a copied module; no cgo.
  export GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0
  # A module's go directive older than the local toolchain: no toolchain download.
  export GOTOOLCHAIN=local
  mkdir -p "$(dirname "$bin")"
  scratch="$(mktemp -d)"
  go_module_copy "$module" "$version" "$scratch/module" || { rm -rf "$scratch"; return 1; }
  echo "$name: downloaded $module@$version in $((SECONDS - start)) s; building $package" >&2
  # Two shared cores: stay out of the way of interactive work (and, in CI, of the test build).
  if ! (cd "$scratch/module" && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$bin.tmp" "$package"); then
    rm -rf "$scratch" "$bin.tmp"
    return 1
  fi
  rm -rf "$scratch"
  if ! { "$bin.tmp" --help 2>&1 || true; } | grep -q -- "$check"; then
    echo "$name: the built binary does not run" >&2
    rm -f "$bin.tmp"
    return 1
  fi
  mv "$bin.tmp" "$bin"
  echo "$name: built in $((SECONDS - start)) s" >&2
  echo "$bin"
}
