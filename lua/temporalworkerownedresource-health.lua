-- Argo CD health check for temporal.io/WorkerResourceTemplate and its alias kind
-- temporal.io/TemporalWorkerOwnedResource (temporal-worker-controller). Both kinds have one
-- status shape, so this one script is installed under both.
--
-- kstatus-compliant like the WorkerDeployment: status.observedGeneration is written
-- with the Ready, Reconciling and Stalled conditions. Ready=True (reason AllVersionsApplied)
-- once every live worker version has its copy applied; ApplyFailed (Stalled=True) names the
-- versions whose copy was refused; WorkerDeploymentNotFound (Reconciling=True) waits for the
-- worker. Reasons: src/api/conditions.rs (OWNED_ALL) and docs/owned-resources.md.
--
-- Written for Argo CD's default argocd-cm sandbox: Lua 5.1 with only base, table and package.

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

local function health(obj)
  local metadata = obj.metadata
  if type(metadata) ~= "table" then
    metadata = {}
  end
  if metadata.deletionTimestamp ~= nil then
    return { status = "Progressing", message = "Pending deletion" }
  end

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
  local stalled = findCondition(conditions, "Stalled")
  if isTrue(stalled) then
    return { status = "Degraded", message = messageOf(stalled, "Copies were refused") }
  end
  -- Degraded on the reason too, should Stalled be missing.
  if ready ~= nil and not isTrue(ready) and ready.reason == "ApplyFailed" then
    return { status = "Degraded", message = messageOf(ready, "Copies were refused") }
  end
  local reconciling = findCondition(conditions, "Reconciling")
  if isTrue(reconciling) then
    return { status = "Progressing", message = messageOf(ready, messageOf(reconciling, "Applying copies")) }
  end
  if isTrue(ready) then
    return { status = "Healthy", message = messageOf(ready, "Every version applied") }
  end
  return { status = "Progressing", message = messageOf(ready, "Applying copies") }
end

return health(obj)
