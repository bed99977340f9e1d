-- Revert: instance ARGV[2] gives machine ID ARGV[3] back, raising the stored
-- last timestamp to ARGV[4] for the next holder. A stable instance
-- (ARGV[5] = '1') keeps holding it; an unstable one frees it.
-- Replies {'ok'}, else {'lost', current holder ('' when free)}.
local instance, id = ARGV[2], ARGV[3]
local last, stable, owner = load(id)
if owner ~= instance then
  return {'lost', owner or ''}
end
local keep = math.max(last, tonumber(ARGV[4]))
if ARGV[5] == '1' then
  hold(id, keep, stable, instance)
else
  release(id, keep, instance)
end
return {'ok'}
