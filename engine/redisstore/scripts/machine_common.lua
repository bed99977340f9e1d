-- Shared by the machine scripts, which Go prepends to each (after epoch.lua).
-- KEYS[1] the epoch (checked by epoch.lua), ARGV[1] the caller's epoch
-- KEYS[2] instances hash: instance ID -> machine ID
-- KEYS[3] machines hash:  machine ID -> "lastTimestamp|stable|instance" ("" instance when free)
-- KEYS[4] reclaim zset:   unstable holders' IDs at their last timestamp
-- KEYS[5] free zset:      free IDs at their last timestamp
-- KEYS[6] holders hash:   machine ID -> the secret of its live holding (none once reverted)
local instances, machines, reclaim, free, holders = KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- load returns the stored last timestamp, stable flag ('1'/'0') and owner of
-- id, or nil if id was never handed out.
local function load(id)
  local v = redis.call('HGET', machines, id)
  if not v then
    return nil
  end
  local last, stable, owner = string.match(v, '^(%-?%d+)|([01])|(.*)$')
  return tonumber(last), stable, owner
end

local function save(id, last, stable, owner)
  redis.call('HSET', machines, id, string.format('%d|%s|%s', last, stable, owner))
end

-- hold records owner as the holder of id with last timestamp last. Only IDs
-- of unstable holders are candidates for reclaim.
local function hold(id, last, stable, owner)
  save(id, last, stable, owner)
  if stable == '1' then
    redis.call('ZREM', reclaim, id)
  else
    redis.call('ZADD', reclaim, last, id)
  end
end

-- release frees id, keeping its last timestamp for the next owner.
local function release(id, last, owner)
  redis.call('HDEL', instances, owner)
  redis.call('HDEL', holders, id)
  save(id, last, '0', '')
  redis.call('ZREM', reclaim, id)
  redis.call('ZADD', free, last, id)
end

-- owns reports whether instance holds id under the secret holder (never
-- empty: an ID without a recorded holding is nobody's to guard); it also
-- returns the owner and the holding found.
local function owns(id, instance, holder)
  local _, _, owner = load(id)
  local found = redis.call('HGET', holders, id) or ''
  return owner == instance and found ~= '' and found == holder, owner or '', found
end
