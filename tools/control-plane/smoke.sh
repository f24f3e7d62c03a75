#!/usr/bin/env bash
# The end-to-end smoke set against each supported Kubernetes minor (docs/kubernetes-versions.md):
# builds (or reuses) each minor's control plane with tools/control-plane/build.sh, then runs
#   - a Progressive rollout to Current and the old version's sunset (e2e rollout::),
#   - a bad build to Stalled, remembered and retried (e2e bad_build::),
#   - `helm upgrade --wait` gating on our status (e2e bad_build::helm_upgrade_wait_…),
#   - every refusal of the webhook and the CRDs' CEL rules (bad_inputs),
#   - the chart installed with `helm install --wait`, the controller as its Pod (upgrade),
#   - the namespaced install with the chart's roles (namespaced_install),
# with TWC_CONTROL_PLANE_BIN pointing the harness at that minor. Prints a Markdown row per
# minor (its result and how long the set took); exits non-zero if any minor failed.
#
#   bash tools/control-plane/smoke.sh                 # every supported minor
#   bash tools/control-plane/smoke.sh v1.36.3         # one
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
# The supported minors' newest patches the Go module proxy serves (2026-12-02); the last is the
# default of tools/control-plane/versions.env, which the test command runs everything on.
supported=(v1.35.4 v1.36.3 v1.37.2)
[ $# -gt 0 ] && supported=("$@")
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"
logs="$root/target/smoke-logs"
mkdir -p "$logs"
sets=(
  "e2e rollout::progressive_ramps_on_schedule_then_sunsets_the_old_version bad_build::an_unpullable_image_stalls_is_remembered_and_retried_on_request bad_build::helm_upgrade_wait_to_an_unpullable_image_fails_before_its_timeout"
  "bad_inputs every_bad_input_is_refused_with_a_message_naming_the_field"
  "upgrade helm_install_wait_runs_the_controller_as_its_pod"
  "namespaced_install"
)
rows=()
failed=0
for version in "${supported[@]}"; do
  bin="$(TWC_KUBERNETES_VERSION="$version" bash tools/control-plane/build.sh | tail -n 1)"
  start=$SECONDS
  result="passed"
  for set in "${sets[@]}"; do
    read -r binary filters <<<"$set"
    log="$logs/$version-$binary.log"
    # shellcheck disable=SC2086 # the filters are separate words
    if ! TWC_CONTROL_PLANE_BIN="$bin" cargo test --test "$binary" -- $filters >"$log" 2>&1; then
      result="FAILED ($binary; $log)"
      failed=1
    fi
    echo "smoke: $version $binary: $(grep -E '^test result:' "$log" | tail -n 1 || echo 'no result line')" >&2
  done
  rows+=("| $version | $(date -u +%F) | $result | $((SECONDS - start)) s |")
done
echo "| Kubernetes | date | smoke set | time |"
echo "|---|---|---|---|"
printf '%s\n' "${rows[@]}"
exit "$failed"
