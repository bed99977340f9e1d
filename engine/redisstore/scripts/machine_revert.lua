-- Revert: instance ARGV[2] gives machine ID ARGV[3] back, storing ARGV[4] as
-- the last timestamp for the next holder, even below what Guard stored: the
-- owner's last word covers every ID it issued. A stable instance
-- (ARGV[5] = '1') keeps holding it; an unstable one frees it.
-- Replies {'ok'}, else {'lost', current holder ('' when free)}.
local instance, id = ARGV[2], ARGV[3]
local _, stable, owner = load(id)
if owner ~= instance then
  return {'lost', owner or ''}
end
local keep = tonumber(ARGV[4])
if ARGV[5] == '1' then
  hold(id, keep, stable, instance)
else
  release(id, keep, instance)
end
return {'ok'}
