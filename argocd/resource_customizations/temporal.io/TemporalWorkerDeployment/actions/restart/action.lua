-- Restart the Pods of the Current version (the target when nothing is Current yet) in place,
-- as kubectl rollout restart does, keeping its build ID and routing: the one-shot annotation
-- temporal.io/restart=<build ID>/<now, Unix seconds>, a new value each time, acted on once.
local os = require("os")
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end
local build = nil
if type(obj.status.currentVersion) == "table" then
  build = obj.status.currentVersion.buildID
end
if build == nil then
  build = obj.status.targetVersion.buildID
end
obj.metadata.annotations["temporal.io/restart"] = build .. "/" .. tostring(os.time())
return obj
