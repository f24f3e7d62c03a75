-- Promote the target build now, skipping its remaining steps and gates (once it has ready
-- pollers): the one-shot annotation temporal.io/promote=<target build ID>, acted on once per
-- value. Argo CD's sync leaves an annotation that Git does not set alone.
if type(obj.metadata.annotations) ~= "table" then
  obj.metadata.annotations = {}
end
obj.metadata.annotations["temporal.io/promote"] = obj.status.targetVersion.buildID
return obj
