# Shared by .ci/setup and .ci/setup-tests: one line per step with its duration and the total so
# far; a step's own output (Go's `go: downloading …` chatter, pip, apt) goes to a log file that is
# printed only when the step fails.
# shellcheck shell=bash
ci_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ci_logs="${TWC_CI_LOG_DIR:-$ci_root/target/ci-logs}"
mkdir -p "$ci_logs"
: "${TWC_CI_T0:=$SECONDS}"
export TWC_CI_T0

# step PREFIX NAME COMMAND...: runs COMMAND with its output in $ci_logs/NAME.log.
step() {
  local prefix=$1 name=$2
  shift 2
  local log="$ci_logs/$name.log" t=$SECONDS
  if "$@" >"$log" 2>&1; then
    echo "$prefix: $name ready ($((SECONDS - t)) s, total $((SECONDS - TWC_CI_T0)) s)"
  else
    local rc=$?
    echo "$prefix: $name FAILED after $((SECONDS - t)) s (exit $rc); the last lines of $log:" >&2
    tail -n 60 "$log" >&2
    return "$rc"
  fi
}

# apt_install PACKAGE...: Debian packages (quietly; idempotent).
apt_install() {
  [ $# -gt 0 ] || return 0
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "$@"
}

# pip_install PACKAGE...: PyPI packages, then a pyenv rehash for their console scripts.
pip_install() {
  [ $# -gt 0 ] || return 0
  pip install -q --disable-pip-version-check "$@"
  if command -v pyenv >/dev/null 2>&1; then pyenv rehash; fi
}
