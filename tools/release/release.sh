#!/usr/bin/env bash
# Cuts a release, or checks that the version is the same everywhere.
#
#   tools/release/release.sh <version>   bump to <version>, move CHANGELOG's Unreleased into a dated
#                                        section, commit "Release v<version>" and tag v<version>
#   tools/release/release.sh --check     Cargo.toml, Cargo.lock, every charts/*/Chart.yaml (version
#                                        and appVersion), CHANGELOG.md, docs/quickstart.md's
#                                        TWC_VERSION and the tag agree
#   tools/release/release.sh --artifacts <dir> [...]   every artifact of the checked-out release
#                                        (tools/release/artifacts.sh; its header lists the options)
#
# The first release may be the current version: with no tag v* and no release in CHANGELOG.md,
# `release.sh <current version>` cuts it (0.1.0 was never published, so it is not skipped).
#
# Works on the repository of the current directory (so a test can run it on a scratch copy). One
# version for the binary, the image tag and every chart: users upgrade them together. Nothing is
# pushed; the script prints the push command. RELEASE_DATE (YYYY-MM-DD) overrides today's date (UTC).
set -euo pipefail
# Pre-release identifiers compare in ASCII order (SemVer 11.4.2), whatever the user's locale.
export LC_ALL=C

die() {
  echo "release: $*" >&2
  exit 1
}
note() { echo "release: $*"; }

usage() {
  echo "usage: tools/release/release.sh <version> | --check | --artifacts <dir> [options]" >&2
  sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

# Semantic Versioning 2.0.0 without build metadata (`+...` has no precedence, so it cannot order
# releases).
SEMVER_ID='(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)'
SEMVER_RE="^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-${SEMVER_ID}(\.${SEMVER_ID})*)?$"

is_semver() { [[ $1 =~ $SEMVER_RE ]]; }

# Compares two identifiers of a pre-release: numeric ones numerically and below alphanumeric ones.
# Prints -1, 0 or 1.
cmp_ident() {
  local a=$1 b=$2
  if [[ $a =~ ^[0-9]+$ && $b =~ ^[0-9]+$ ]]; then
    if ((10#$a < 10#$b)); then echo -1; elif ((10#$a > 10#$b)); then echo 1; else echo 0; fi
  elif [[ $a =~ ^[0-9]+$ ]]; then
    echo -1
  elif [[ $b =~ ^[0-9]+$ ]]; then
    echo 1
  elif [[ $a < $b ]]; then
    echo -1
  elif [[ $a > $b ]]; then
    echo 1
  else
    echo 0
  fi
}

# Semver precedence: true when $1 > $2.
semver_gt() {
  local a=$1 b=$2 a_core=${1%%-*} b_core=${2%%-*} a_pre="" b_pre="" i c
  [[ $a == *-* ]] && a_pre=${a#*-}
  [[ $b == *-* ]] && b_pre=${b#*-}
  local -a x y
  IFS=. read -r -a x <<<"$a_core"
  IFS=. read -r -a y <<<"$b_core"
  for i in 0 1 2; do
    ((10#${x[i]} > 10#${y[i]})) && return 0
    ((10#${x[i]} < 10#${y[i]})) && return 1
  done
  # Same core: a release outranks any of its pre-releases.
  [[ -z $a_pre && -z $b_pre ]] && return 1
  [[ -z $a_pre ]] && return 0
  [[ -z $b_pre ]] && return 1
  IFS=. read -r -a x <<<"$a_pre"
  IFS=. read -r -a y <<<"$b_pre"
  for ((i = 0; i < ${#x[@]} && i < ${#y[@]}; i++)); do
    c=$(cmp_ident "${x[i]}" "${y[i]}")
    [[ $c == 1 ]] && return 0
    [[ $c == -1 ]] && return 1
  done
  ((${#x[@]} > ${#y[@]}))
}

# The first `key = "value"` of the [package] table of a Cargo.toml read from stdin.
package_field() {
  awk -v key="$1" '
    /^\[/ { in_pkg = ($0 == "[package]") }
    in_pkg && $0 ~ "^" key "[[:space:]]*=" {
      sub(/^[^=]*=[[:space:]]*"/, ""); sub(/".*$/, ""); print; exit
    }'
}

# The version Cargo.lock records for package $1.
lock_version() {
  awk -v name="$1" '
    $0 == "name = \"" name "\"" { found = 1; next }
    found && /^version = / { gsub(/^version = "|"$/, ""); print; exit }
    /^\[\[package\]\]/ { found = 0 }' Cargo.lock
}

# A top-level scalar of a Chart.yaml, quotes and trailing comment removed.
chart_field() {
  sed -n -E "s/^$2:[[:space:]]*[\"']?([^\"'[:space:]#]+)[\"']?[[:space:]]*(#.*)?$/\1/p" "$1" | head -n 1
}

# The charts git tracks (an untracked one would be bumped but not committed).
charts() {
  git ls-files -- ':(glob)charts/*/Chart.yaml'
}

# The lines of CHANGELOG.md's Unreleased section (without its heading).
unreleased_body() {
  awk '/^## / { if (in_u) exit; in_u = ($0 == "## [Unreleased]"); next } in_u' CHANGELOG.md
}

# Release headings, newest first: one `version date` line each.
released_versions() {
  sed -n -E 's/^## \[([^]]+)\] - ([0-9]{4}-[0-9]{2}-[0-9]{2})$/\1 \2/p' CHANGELOG.md
}

QUICKSTART=docs/quickstart.md

tag_exists() { git rev-parse -q --verify "refs/tags/$1" >/dev/null; }

# Nothing has been released: no tag v* and no release section in CHANGELOG.md.
first_release() {
  [[ -z $(git tag --list 'v*') && -z $(released_versions) ]]
}

# Every place that carries the version agrees with Cargo.toml; prints what it checked. $1 = "cut"
# skips the tag checks (the release about to be cut has no tag yet).
check() {
  local mode=${1:-check} name version problems=() f v heading_count=0 prev="" line
  [[ -f Cargo.toml && -f Cargo.lock ]] || die "no Cargo.toml/Cargo.lock here: run from the repository"
  name=$(package_field name <Cargo.toml)
  version=$(package_field version <Cargo.toml)
  [[ -n $version ]] || die "Cargo.toml: no version in [package]"
  is_semver "$version" || problems+=("Cargo.toml: version '$version' is not a semantic version")
  v=$(lock_version "$name")
  [[ $v == "$version" ]] || problems+=("Cargo.lock: $name is at '${v:-missing}', Cargo.toml says $version")
  while read -r f; do
    [[ -n $f ]] || continue
    v=$(chart_field "$f" version)
    [[ $v == "$version" ]] || problems+=("$f: version is '${v:-missing}', Cargo.toml says $version")
    v=$(chart_field "$f" appVersion)
    [[ $v == "$version" ]] || problems+=("$f: appVersion is '${v:-missing}', Cargo.toml says $version")
  done < <(charts)
  # The quickstart installs the release it names.
  if [[ -f $QUICKSTART ]]; then
    v=$(sed -n -E 's/^export TWC_VERSION=([^[:space:]]+)$/\1/p' "$QUICKSTART")
    [[ $v == "$version" ]] || problems+=("$QUICKSTART: TWC_VERSION is '${v:-missing}', Cargo.toml says $version")
  fi
  if [[ ! -f CHANGELOG.md ]]; then
    problems+=("CHANGELOG.md is missing")
  else
    grep -qx '## \[Unreleased\]' CHANGELOG.md || problems+=("CHANGELOG.md: no '## [Unreleased]' section")
    while read -r line; do
      v=${line%% *}
      heading_count=$((heading_count + 1))
      is_semver "$v" || problems+=("CHANGELOG.md: [$v] is not a semantic version")
      if [[ -z $prev ]]; then
        [[ $v == "$version" ]] || problems+=("CHANGELOG.md: newest release is [$v], Cargo.toml says $version")
      elif is_semver "$v" && is_semver "$prev" && ! semver_gt "$prev" "$v"; then
        problems+=("CHANGELOG.md: [$prev] is above [$v] but not newer (newest first)")
      fi
      prev=$v
    done < <(released_versions)
  fi
  if [[ $mode == check ]]; then
    if tag_exists "v$version"; then
      v=$(git show "v$version:Cargo.toml" | package_field version)
      [[ $v == "$version" ]] || problems+=("tag v$version: its Cargo.toml says '$v'")
      ((heading_count > 0)) || problems+=("tag v$version exists but CHANGELOG.md has no [$version] section")
    fi
    while read -r f; do
      [[ -z $f || $f == "v$version" ]] || problems+=("HEAD is tagged $f, Cargo.toml says $version")
    done < <(git tag --points-at HEAD --list 'v*')
  fi
  if ((${#problems[@]} > 0)); then
    printf 'release: %s\n' "${problems[@]}" >&2
    die "versions disagree (${#problems[@]} problem(s))"
  fi
  CHECKED_VERSION=$version
  CHECKED_NAME=$name
  CHECKED_CHARTS=$(charts | wc -l)
}

set_versions() {
  local new=$1 name=$2 f tmp
  tmp=$(mktemp)
  awk -v new="$new" '
    /^\[/ { in_pkg = ($0 == "[package]") }
    in_pkg && !done && /^version[[:space:]]*=/ { print "version = \"" new "\""; done = 1; next }
    { print }' Cargo.toml >"$tmp" && cat "$tmp" >Cargo.toml
  awk -v name="$name" -v new="$new" '
    $0 == "name = \"" name "\"" { found = 1; print; next }
    found && /^version = / { print "version = \"" new "\""; found = 0; next }
    { print }' Cargo.lock >"$tmp" && cat "$tmp" >Cargo.lock
  while read -r f; do
    [[ -n $f ]] || continue
    # The Artifact Hub `images` annotation names the default image, whose tag is the appVersion.
    sed -E -e "s/^version:.*/version: $new/" -e "s/^appVersion:.*/appVersion: \"$new\"/" \
      -e "s#^( +image: ([^[:space:]]+/)?temporal-worker-controller[a-z-]*):[^[:space:]]+\$#\1:$new#" \
      "$f" >"$tmp"
    cat "$tmp" >"$f"
  done < <(charts)
  if [[ -f $QUICKSTART ]]; then
    sed -E "s/^export TWC_VERSION=.*/export TWC_VERSION=$new/" "$QUICKSTART" >"$tmp" && cat "$tmp" >"$QUICKSTART"
  fi
  awk -v heading="## [$new] - $RELEASE_DATE" '
    { print }
    $0 == "## [Unreleased]" { print ""; print heading }' CHANGELOG.md >"$tmp" && cat "$tmp" >CHANGELOG.md
  rm -f "$tmp"
}

cut() {
  local new=$1 current dirty files
  [[ $new != v* ]] || die "give the version without the leading v: ${new#v}"
  [[ $new != *+* ]] || die "'$new': build metadata (+...) is not supported: it does not order releases"
  is_semver "$new" || die "'$new' is not a semantic version (MAJOR.MINOR.PATCH[-PRERELEASE], e.g. 1.2.3 or 1.2.3-rc.1)"
  [[ $RELEASE_DATE =~ ^[0-9]{4}-[0-9]{2}-[0-9]{2}$ ]] || die "RELEASE_DATE '$RELEASE_DATE' is not YYYY-MM-DD"
  dirty=$(git status --porcelain --untracked-files=no)
  [[ -z $dirty ]] || die "the working tree has uncommitted changes; commit or stash them first:
$dirty"
  check cut
  current=$CHECKED_VERSION
  if [[ $new == "$current" ]] && first_release; then
    note "first release: cutting the current version $current"
  else
    semver_gt "$new" "$current" || die "$new is not greater than the current version $current"
  fi
  ! tag_exists "v$new" || die "tag v$new already exists"
  grep -qE '^[[:space:]]*[-*] ' < <(unreleased_body) ||
    die "CHANGELOG.md: Unreleased has no entries; list the release's changes there first"

  files=(Cargo.toml Cargo.lock CHANGELOG.md)
  [[ -f $QUICKSTART ]] && files+=("$QUICKSTART")
  mapfile -t -O ${#files[@]} files < <(charts)
  # Leave the tree as it was if any step fails before the release commit exists.
  trap 'git checkout -q HEAD -- "${files[@]}"; echo "release: nothing released; files restored" >&2' EXIT
  set_versions "$new" "$CHECKED_NAME"
  check cut >/dev/null
  git commit -q -m "Release v$new" -- "${files[@]}"
  trap - EXIT
  git tag -a "v$new" -m "Release v$new"
  check
  note "v$new: Cargo.toml, Cargo.lock, $CHECKED_CHARTS chart(s) and CHANGELOG.md ($RELEASE_DATE) committed and tagged"
  note "publish with: git push origin HEAD v$new"
}

main() {
  [[ ${1:-} == --artifacts ]] && exec bash "$(dirname "$0")/artifacts.sh" "${@:2}"
  [[ $# -eq 1 ]] || usage
  local root
  root=$(git rev-parse --show-toplevel 2>/dev/null) || die "not inside a git repository"
  cd "$root"
  RELEASE_DATE=${RELEASE_DATE:-$(date -u +%F)}
  case $1 in
    -h | --help) usage ;;
    --check)
      check
      local tag="no tag v$CHECKED_VERSION"
      tag_exists "v$CHECKED_VERSION" && tag="tag v$CHECKED_VERSION"
      note "ok: version $CHECKED_VERSION in Cargo.toml, Cargo.lock, $CHECKED_CHARTS chart(s), CHANGELOG.md; $tag"
      ;;
    -*) die "unknown option $1 (try --help)" ;;
    *) cut "$1" ;;
  esac
}

main "$@"
