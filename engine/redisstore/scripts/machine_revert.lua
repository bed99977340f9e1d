-- Revert: instance ARGV[1] gives machine ID ARGV[2] back, raising the stored
-- last timestamp to ARGV[3] for the next holder. A stable instance
-- (ARGV[4] = '1') keeps holding it; an unstable one frees it.
-- Returns {1, ''} when done, else {0, current holder ('' when free)}.
local instance, id = ARGV[1], ARGV[2]
local last, stable, owner = load(id)
if owner ~= instance then
  return {0, owner or ''}
end
local keep = math.max(last, tonumber(ARGV[3]))
if ARGV[4] == '1' then
  hold(id, keep, stable, instance)
else
  release(id, keep, instance)
end
return {1, ''}
