-- Distribute: reuse own -> reclaim free or expired, not stamped ahead of
-- now -> take next -> a free ID stamped ahead, the least far ahead first ->
-- overflow.
-- ARGV[2] instance, ARGV[3] stable ('1'/'0'), ARGV[4] limit (2^machineBits),
-- ARGV[5] now (Unix ms), ARGV[6] safe guard (ms), ARGV[7] the new holding's
-- secret, ARGV[8] the live window (ms): a holding whose last timestamp is
-- within it of now is live.
-- Replies {'ok', machineID, previous last timestamp}; {'live', machineID,
-- its last timestamp, its holding} when another process holds a stable
-- instance's own ID live; or {'full', IDs in use}.
local instance, stable, holder = ARGV[2], ARGV[3], ARGV[7]
local limit, now, safeGuard = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local cutoff = now - safeGuard
local liveCutoff = now - tonumber(ARGV[8])

local function take(id, last)
  local keep = math.max(last, now)
  redis.call('HSET', instances, instance, id)
  redis.call('HSET', holders, id, holder)
  redis.call('ZREM', free, id)
  hold(id, keep, stable, instance)
  return {'ok', tonumber(id), last}
end

-- A store written before the free set kept its free IDs in reclaim at -inf.
for _, id in ipairs(redis.call('ZRANGEBYSCORE', reclaim, '-inf', '-inf')) do
  redis.call('ZREM', reclaim, id)
  redis.call('ZADD', free, (load(id)), id)
end

local own = redis.call('HGET', instances, instance)
if own then
  local last = load(own)
  local live = redis.call('HGET', holders, own)
  if stable == '1' and live and last > liveCutoff then
    return {'live', tonumber(own), last, live}
  end
  if tonumber(own) < limit then
    return take(own, last)
  end
  -- Held under a wider layout than this call's: give it back, pick anew.
  release(own, last, instance)
end

-- first returns the lowest-scored ID below the limit in zset key with a
-- score in [lo, hi], or nil.
local function first(key, lo, hi)
  local offset = 0
  repeat
    local ids = redis.call('ZRANGEBYSCORE', key, lo, hi, 'LIMIT', offset, 100)
    for _, id in ipairs(ids) do
      if tonumber(id) < limit then
        return id
      end
    end
    offset = offset + #ids
  until #ids < 100
  return nil
end

local id = first(free, '-inf', ARGV[5])
if not id then
  id = first(reclaim, '-inf', cutoff)
  if id then
    local _, _, owner = load(id)
    redis.call('HDEL', instances, owner)
  end
end
if id then
  return take(id, (load(id)))
end

local used = redis.call('HLEN', machines)
if used < limit then
  return take(used, 0)
end
id = first(free, '(' .. ARGV[5], '+inf')
if id then
  return take(id, (load(id)))
end
return {'full', used}
