#!/usr/bin/env bash
# Fails when the change touches src/, crds/ or charts/ but leaves CHANGELOG.md untouched (run by
# .ci/test; README, "Releases").
#
# "The change" is everything since a base commit, uncommitted and untracked files included:
#   - CHANGELOG_BASE=<rev> when set (a CI system that knows the target branch);
#   - on a branch other than main (or a detached HEAD off main): the merge base with main (the local
#     branch, else origin/main);
#   - on main, or when HEAD is on main already: the previous commit (a merge commit: its first
#     parent, i.e. everything the merge brought in).
# Escape for internal-only changes (refactors, tests, CI): a commit in the change whose message
# has the trailer line `Changelog: none`.
# A clone too shallow to hold the base (e.g. `git clone --depth 1`) cannot say what changed: the
# check says so and passes; deepen the clone or set CHANGELOG_BASE to check.
set -euo pipefail
cd "$(git rev-parse --show-toplevel)"

say() { echo "changelog-check: $*"; }
commit_of() { git rev-parse -q --verify "$1^{commit}" 2>/dev/null; }

base="" how=""
head=$(git rev-parse HEAD)
if [[ -n ${CHANGELOG_BASE:-} ]]; then
  base=$(commit_of "$CHANGELOG_BASE") || {
    echo "changelog-check: CHANGELOG_BASE=$CHANGELOG_BASE is not a commit here" >&2
    exit 1
  }
  how="CHANGELOG_BASE=$CHANGELOG_BASE"
else
  branch=$(git symbolic-ref -q --short HEAD || echo "(detached)")
  main_ref=""
  for ref in refs/heads/main refs/remotes/origin/main; do
    if commit_of "$ref" >/dev/null; then
      main_ref=$ref
      break
    fi
  done
  if [[ -n $main_ref && $branch != main ]]; then
    merge_base=$(git merge-base HEAD "$main_ref" 2>/dev/null || true)
    if [[ -n $merge_base && $merge_base != "$head" ]]; then
      base=$merge_base
      how="the merge base with ${main_ref#refs/*/} (branch $branch)"
    fi
  fi
  if [[ -z $base ]]; then
    if base=$(commit_of HEAD^1); then
      how="the previous commit (first parent of HEAD, branch $branch)"
    elif [[ $(git rev-parse --is-shallow-repository) == true ]]; then
      say "notice: shallow clone without HEAD's parent; cannot tell what changed, so CHANGELOG.md is not checked (deepen the clone or set CHANGELOG_BASE)"
      exit 0
    else
      say "HEAD is the first commit; nothing to compare"
      exit 0
    fi
  fi
fi

changed=$({
  git diff --name-only "$base" --
  git ls-files --others --exclude-standard
} | sort -u)
if grep -qx 'CHANGELOG.md' <<<"$changed"; then
  say "ok: CHANGELOG.md is updated (against $how, ${base:0:12})"
  exit 0
fi
user_visible=$(grep -E '^(src|crds|charts)/' <<<"$changed" || true)
if [[ -z $user_visible ]]; then
  say "ok: nothing under src/, crds/ or charts/ changed (against $how, ${base:0:12})"
  exit 0
fi
if git log --format=%B "$base..HEAD" | grep -qiE '^changelog:[[:space:]]*none[[:space:]]*$'; then
  say "ok: src/, crds/ or charts/ changed without a CHANGELOG.md line, marked internal by a 'Changelog: none' trailer"
  exit 0
fi
{
  echo "changelog-check: this change (against $how, ${base:0:12}) touches src/, crds/ or charts/:"
  head -n 20 <<<"$user_visible" | sed 's/^/  /'
  n=$(wc -l <<<"$user_visible")
  ((n <= 20)) || echo "  ... and $((n - 20)) more"
  echo "but leaves CHANGELOG.md untouched. Add a line under '## [Unreleased]' (Added, Changed, Deprecated,"
  echo "Removed, Fixed or Security) saying what users see, or, if users see nothing, end a commit message"
  echo "of the change with the trailer line:"
  echo "  Changelog: none"
} >&2
exit 1
