-- Distribute: reuse own -> reclaim free or expired -> take next -> overflow.
-- ARGV[2] instance, ARGV[3] stable ('1'/'0'), ARGV[4] limit (2^machineBits),
-- ARGV[5] now (Unix ms), ARGV[6] safe guard (ms).
-- Replies {'ok', machineID, previous last timestamp}, or {'full', IDs in use}.
local instance, stable = ARGV[2], ARGV[3]
local limit, now, safeGuard = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])

local function take(id, last)
  local keep = math.max(last, now)
  redis.call('HSET', instances, instance, id)
  hold(id, keep, stable, instance)
  return {'ok', tonumber(id), last}
end

local own = redis.call('HGET', instances, instance)
if own then
  local last = load(own)
  if tonumber(own) < limit then
    return take(own, last)
  end
  -- Held under a wider layout than this call's: give it back, pick anew.
  release(own, last, instance)
end

local cutoff = now - safeGuard
local offset = 0
repeat
  local ids = redis.call('ZRANGEBYSCORE', reclaim, '-inf', cutoff, 'LIMIT', offset, 100)
  for _, id in ipairs(ids) do
    if tonumber(id) < limit then
      local last, _, owner = load(id)
      if owner ~= '' then
        redis.call('HDEL', instances, owner)
      end
      return take(id, last)
    end
  end
  offset = offset + #ids
until #ids < 100

local used = redis.call('HLEN', machines)
if used >= limit then
  return {'full', used}
end
return take(used, 0)
