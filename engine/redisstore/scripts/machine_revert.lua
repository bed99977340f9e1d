-- Revert: instance ARGV[1] gives machine ID ARGV[2] back with last timestamp
-- ARGV[3]; an unstable owner frees it, a stable one keeps it.
-- Returns {1, ''} when done, else {0, current owner ('' when free)}.
local instance, id = ARGV[1], ARGV[2]
local last, stable, owner = load(id)
if owner ~= instance then
  return {0, owner or ''}
end
local keep = math.max(last, tonumber(ARGV[3]))
if stable == '1' then
  save(id, keep, stable, instance)
else
  release(id, keep, instance)
end
return {1, ''}
