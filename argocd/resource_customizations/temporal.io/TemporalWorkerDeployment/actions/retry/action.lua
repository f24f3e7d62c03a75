-- Retry the build that missed its progress deadline: the one-shot annotation
-- temporal.io/retry=<build ID>/<now, Unix seconds>, a new value each time, acted on once.
local os = require("os")
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["temporal.io/retry"] = obj.status.rolloutControl.aborted.buildID .. "/" .. tostring(os.time())
return obj
