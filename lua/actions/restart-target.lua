-- Restart the Pods of the target build (during a rollout) in place: the one-shot annotation
-- temporal.io/restart=<target build ID>/<now, Unix seconds>, a new value each time.
local os = require("os")
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["temporal.io/restart"] = obj.status.targetVersion.buildID .. "/" .. tostring(os.time())
return obj
