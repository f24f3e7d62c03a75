-- Argo CD health check for temporal.io/Connection and its alias kind temporal.io/TemporalConnection
-- (temporal-worker-controller). Both kinds have one status shape, so this one script is
-- installed under both.
--
-- It gives the answer kstatus gives (Flux healthChecks, Helm 4 --wait): a Connection whose
-- status carries no conditions has nothing to wait for and is Healthy; once the controller
-- writes status.observedGeneration with Ready, Reconciling and Stalled conditions, those decide,
-- as for a WorkerDeployment. Without this script Argo CD gives a Connection no health at all.
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
  if type(status) ~= "table" then
    status = {}
  end
  -- Only a status that records a generation can be behind the spec (kstatus' rule too).
  local observed = status.observedGeneration
  local generation = metadata.generation
  if observed ~= nil and generation ~= nil and tonumber(observed) ~= tonumber(generation) then
    return { status = "Progressing", message = "Waiting for controller to observe generation " .. tostring(generation) }
  end

  local conditions = status.conditions
  local stalled = findCondition(conditions, "Stalled")
  if isTrue(stalled) then
    return { status = "Degraded", message = messageOf(stalled, "Connection is stalled") }
  end
  local ready = findCondition(conditions, "Ready")
  local reconciling = findCondition(conditions, "Reconciling")
  if isTrue(reconciling) then
    return { status = "Progressing", message = messageOf(ready, messageOf(reconciling, "Checking the connection")) }
  end
  if ready == nil then
    return { status = "Healthy", message = "No Ready condition to wait for" }
  end
  if isTrue(ready) then
    return { status = "Healthy", message = messageOf(ready, "Connection ready") }
  end
  return { status = "Progressing", message = messageOf(ready, "Connection not ready") }
end

return health(obj)
