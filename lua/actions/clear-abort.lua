-- Clear an abort: spec.rollout.abort=false; the rollout starts again from its first step.
-- Set to false rather than removed, for the reason resume.lua gives.
obj.spec.rollout.abort = false
return obj
