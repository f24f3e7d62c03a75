-- Argo CD resource actions for temporal.io/WorkerDeployment and its alias kind
-- temporal.io/TemporalWorkerDeployment (temporal-worker-controller): which apply now.
--
-- Every action is listed; the ones that do not apply to the object's state are disabled, as
-- Argo CD's own actions for Argo Rollouts do. The rules mirror the controller's
-- (src/planner/control.rs, docs/rollout-control.md): nothing steers a Manual rollout or a
-- target that is already Current; abort wins over everything; a build that missed its
-- progress deadline is held until it is retried (promote does not override that).
--
-- Written for Argo CD's default argocd-cm sandbox (Lua 5.1 with base, table and package).

local function tableOr(value)
  if type(value) == "table" then
    return value
  end
  return {}
end

local spec = tableOr(obj.spec)
local rollout = tableOr(spec.rollout)
local status = tableOr(obj.status)
local targetVersion = tableOr(status.targetVersion)
local currentVersion = tableOr(status.currentVersion)
local control = tableOr(status.rolloutControl)
local failure = tableOr(control.aborted)

local target = targetVersion.buildID
local current = currentVersion.buildID
local rolling = type(target) == "string" and target ~= current
local steerable = rolling and rollout.strategy ~= "Manual"
local paused = rollout.paused == true
local aborted = rollout.abort == true
local failed = failure.reason == "ProgressDeadlineExceeded" and failure.buildID == target
local moving = steerable and not aborted and not failed
local stepInEffect = rollout.strategy == "Progressive" and targetVersion.currentStep ~= nil
  and targetVersion.status == "Ramping"

local function offer(enabled, icon, name)
  return { disabled = not enabled, iconClass = "fa fa-fw " .. icon, displayName = name }
end

local actions = {}
actions["promote"] = offer(moving, "fa-angle-double-right", "Promote the target now")
actions["skip-step"] = offer(moving and stepInEffect, "fa-step-forward", "Skip the current step")
actions["pause"] = offer(steerable and not paused and not aborted, "fa-pause-circle", "Pause")
actions["resume"] = offer(paused, "fa-play-circle", "Resume")
actions["abort"] = offer(steerable and not aborted, "fa-times-circle", "Abort")
actions["clear-abort"] = offer(aborted, "fa-undo", "Clear the abort")
actions["retry"] = offer(failed and not aborted, "fa-redo-alt", "Retry the failed build")
actions["restart"] = offer(type(current) == "string" or type(target) == "string",
  "fa-sync", "Restart the Current version's Pods")
actions["restart-target"] = offer(rolling and type(targetVersion.deploymentName) == "string",
  "fa-sync-alt", "Restart the target's Pods")
return actions
