-- End the step in effect now: the one-shot annotation
-- temporal.io/skip-step=<target build ID>/<step number, from 1>, acted on once per value.
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end
local target = obj.status.targetVersion
obj.metadata.annotations["temporal.io/skip-step"] = target.buildID .. "/" .. tostring(target.currentStep)
return obj
