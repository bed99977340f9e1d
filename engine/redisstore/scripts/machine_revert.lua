-- Revert: instance ARGV[2] gives machine ID ARGV[3], held under the secret
-- ARGV[5], back, storing ARGV[4] as the last timestamp for the next holder,
-- even below what Guard stored: the owner's last word covers every ID it
-- issued. The holding ends. A stable instance (ARGV[6] = '1') keeps the ID;
-- an unstable one frees it.
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
local keep = tonumber(ARGV[4])
if ARGV[6] == '1' then
  local _, stable = load(id)
  redis.call('HDEL', holders, id)
  hold(id, keep, stable, instance)
else
  release(id, keep, instance)
end
return {'ok'}
