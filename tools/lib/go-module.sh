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
