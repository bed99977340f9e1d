-- Guard: instance ARGV[2] still holds machine ID ARGV[3]; raise the stored
-- last timestamp to ARGV[4] (the heartbeat time), never lowering it.
-- Replies {'ok'}, else {'lost', current holder ('' when free)}.
local instance, id = ARGV[2], ARGV[3]
local last, stable, owner = load(id)
if owner ~= instance then
  return {'lost', owner or ''}
end
local keep = math.max(last, tonumber(ARGV[4]))
hold(id, keep, stable, instance)
return {'ok'}
