-- Continue a paused rollout for the time its step had left: spec.rollout.paused=false. Set
-- to false rather than removed: Argo CD turns a table the script leaves empty back into the
-- live one (its cleanReturnedObj), which would undo the removal of a lone field.
obj.spec.rollout.paused = false
return obj
