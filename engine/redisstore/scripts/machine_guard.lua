-- Guard: instance ARGV[2] still holds machine ID ARGV[3] under the secret
-- ARGV[5]; raise the stored last timestamp to ARGV[4] (the heartbeat time),
-- never lowering it.
-- Replies {'ok'}, else {'lost', current owner ('' when free), its holding
-- ('' when none), '0' when the ID is not in the store at all (IDs are never
-- deleted: the store went back) else '1'}.
local instance, id = ARGV[2], ARGV[3]
local ok, owner, holding = owns(id, instance, ARGV[5])
if not ok then
  local known = '1'
  if not load(id) then
    known = '0'
  end
  return {'lost', owner, holding, known}
end
local last, stable = load(id)
hold(id, math.max(last, tonumber(ARGV[4])), stable, instance)
return {'ok'}
