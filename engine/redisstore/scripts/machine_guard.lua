-- Guard: instance ARGV[2] still holds machine ID ARGV[3] under the secret
-- ARGV[5]; raise the stored last timestamp to ARGV[4] (the heartbeat time),
-- never lowering it.
-- Replies {'ok'}, else {'lost', current owner ('' when free), its holding
-- ('' when none)}.
local instance, id = ARGV[2], ARGV[3]
local ok, owner, holding = owns(id, instance, ARGV[5])
if not ok then
  return {'lost', owner, holding}
end
local last, stable = load(id)
hold(id, math.max(last, tonumber(ARGV[4])), stable, instance)
return {'ok'}
