-- Revert: instance ARGV[2] gives machine ID ARGV[3], held under the secret
-- ARGV[5], back, storing ARGV[4] as the last timestamp for the next holder,
-- even below what Guard stored: the owner's last word covers every ID it
-- issued. The holding ends. A stable instance (ARGV[6] = '1') keeps the ID;
-- an unstable one frees it.
-- Replies {'ok'}, else {'lost', current owner ('' when free), its holding
-- ('' when none)}.
local instance, id = ARGV[2], ARGV[3]
local ok, owner, holding = owns(id, instance, ARGV[5])
if not ok then
  return {'lost', owner, holding}
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
