-- Argo CD health check for temporal.io/WorkerDeployment and its alias kind
-- temporal.io/TemporalWorkerDeployment (temporal-worker-controller). Both kinds have one status
-- shape, so this one script is installed under both.
--
-- The resource is kstatus-compliant: the controller writes status.observedGeneration in the
-- same status update as the Ready, Progressing, Reconciling and Stalled conditions (each of
-- which also carries observedGeneration). Ready=True (reason RolloutComplete) only once the
-- target version is Current in Temporal. Condition types and reasons: src/api/conditions.rs;
-- the contract is described in docs/cd-rollouts.md.
--
-- Written for Argo CD's default argocd-cm sandbox: Lua 5.1 with only the base, table and
-- package libraries. No string, math, io or os functions are used, and numbers are turned
-- into text with tostring before concatenation.

-- Reasons that need a spec change or a human. The controller also sets Stalled=True for
-- them; checking the reason as well keeps such an object Degraded if Stalled is missing.
local terminalReasons = {
  InvalidSpec = true,
  GateWorkflowFailed = true,
  ClusterConnectionUnsupported = true,
  ConnectionRolloutStalled = true,
  DuplicateInstall = true,
  RolloutAborted = true,
  ProgressDeadlineExceeded = true,
}

local function findCondition(conditions, conditionType)
  if type(conditions) ~= "table" then
    return nil
  end
  for _, condition in ipairs(conditions) do
    if type(condition) == "table" and condition.type == conditionType then
      return condition
    end
  end
  return nil
end

local function isTrue(condition)
  return condition ~= nil and condition.status == "True"
end

local function messageOf(condition, fallback)
  if condition ~= nil and type(condition.message) == "string" and condition.message ~= "" then
    return condition.message
  end
  return fallback
end

-- A Ready or Progressing condition that is not True and carries a terminal reason.
local function terminalCondition(ready, progressing)
  if ready ~= nil and not isTrue(ready) and terminalReasons[ready.reason] then
    return ready
  end
  if progressing ~= nil and not isTrue(progressing) and terminalReasons[progressing.reason] then
    return progressing
  end
  return nil
end

local function strategyOf(obj)
  if type(obj.spec) == "table" and type(obj.spec.rollout) == "table" then
    return obj.spec.rollout.strategy
  end
  return nil
end

local function health(obj)
  local metadata = obj.metadata
  if type(metadata) ~= "table" then
    metadata = {}
  end

  -- Argo CD answers "Pending deletion" itself before running a script; give the same answer
  -- when the script does run (for example with an Argo hook finalizer on the object).
  if metadata.deletionTimestamp ~= nil then
    return { status = "Progressing", message = "Pending deletion" }
  end

  -- Nothing in status can be trusted until the controller has seen the current spec.
  local status = obj.status
  local observed = nil
  if type(status) == "table" then
    observed = status.observedGeneration
  end
  local generation = metadata.generation
  if observed == nil or (generation ~= nil and tonumber(observed) ~= tonumber(generation)) then
    if generation == nil then
      return { status = "Progressing", message = "Waiting for controller to observe the latest generation" }
    end
    return { status = "Progressing", message = "Waiting for controller to observe generation " .. tostring(generation) }
  end

  local conditions = status.conditions
  local ready = findCondition(conditions, "Ready")
  local progressing = findCondition(conditions, "Progressing")

  local stalled = findCondition(conditions, "Stalled")
  if isTrue(stalled) then
    return { status = "Degraded", message = messageOf(stalled, "Rollout is stalled") }
  end

  local terminal = terminalCondition(ready, progressing)
  if terminal ~= nil then
    return { status = "Degraded", message = messageOf(terminal, "Rollout is blocked") }
  end

  -- Manual strategy: the controller has done its part and waits for a human to promote the
  -- target in Temporal. Suspended holds later sync waves, as a paused Rollout does.
  if strategyOf(obj) == "Manual" and ready ~= nil and ready.reason == "WaitingForPromotion"
      and isTrue(progressing) and progressing.reason == "WaitingForPromotion" then
    return { status = "Suspended", message = messageOf(ready, "Waiting for a manual promotion") }
  end

  -- Paused (spec.rollout.paused): a human holds the rollout at its step until resumed, as a
  -- paused Rollout does.
  if ready ~= nil and not isTrue(ready) and ready.reason == "RolloutPaused" then
    return { status = "Suspended", message = messageOf(ready, "Rollout paused") }
  end

  -- Still moving, or retrying a transient failure (connection, credentials, Temporal API).
  -- Checked before Ready so that Healthy always agrees with kstatus "Current".
  local reconciling = findCondition(conditions, "Reconciling")
  if isTrue(reconciling) then
    return { status = "Progressing", message = messageOf(ready, messageOf(reconciling, "Rollout in progress")) }
  end

  if isTrue(ready) then
    return { status = "Healthy", message = messageOf(ready, "Rollout complete") }
  end

  return { status = "Progressing", message = messageOf(ready, messageOf(progressing, "Waiting for rollout to complete")) }
end

return health(obj)
