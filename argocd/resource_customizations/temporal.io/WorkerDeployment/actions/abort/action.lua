-- Abort the rollout: spec.rollout.abort=true; the target's ramp goes back to 0% and the
-- Current version keeps serving. Survives a self-heal sync as long as Git does not set
-- spec.rollout.abort.
if type(obj.spec.rollout) ~= "table" then
  obj.spec.rollout = {}
end
obj.spec.rollout.abort = true
return obj
