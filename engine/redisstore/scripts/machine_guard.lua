-- Guard: heartbeat machine ID ARGV[2] if instance ARGV[1] still owns it.
-- ARGV[3] last timestamp issued, ARGV[4] now (Unix ms).
-- Returns {1, ''} when refreshed, else {0, current owner ('' when free)}.
local instance, id = ARGV[1], ARGV[2]
local last, stable, owner = load(id)
if owner ~= instance then
  return {0, owner or ''}
end
local keep = math.max(last, tonumber(ARGV[3]), tonumber(ARGV[4]))
save(id, keep, stable, instance)
if stable == '0' then
  redis.call('ZADD', reclaim, keep, id)
end
return {1, ''}
