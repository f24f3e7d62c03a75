-- Hold the rollout at its step: spec.rollout.paused=true (as Argo Rollouts' pause sets
-- spec.paused). It survives a self-heal sync as long as Git does not set spec.rollout.paused.
if type(obj.spec.rollout) ~= "table" then
  obj.spec.rollout = {}
end
obj.spec.rollout.paused = true
return obj
