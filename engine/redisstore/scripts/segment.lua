-- Advance a segment. KEYS[2] segment key, KEYS[3] the restore count and
-- KEYS[4] the trusted hash (see restored.lua); ARGV[2] step, ARGV[3] start
-- of a fresh name, ARGV[4] floor: the highest max ID the caller ever got
-- for this name, ARGV[5] a new epoch token, ARGV[6] '1' to fetch, '0' only
-- to raise the counter to the floor (a re-seed after a reset, a Floor's
-- answer, an operator's raise), ARGV[7] '1' when a missing counter may
-- start at ARGV[3] (the epoch is brand-new); otherwise a fetch of a missing
-- counter with no floor replies {'nofloor'}. ARGV[8] the segment's name.
--
-- An untrusted counter (the store was declared restored, or found without
-- its epoch, since it was last vouched for) may be older than what was
-- handed out: a fetch leaves it alone and replies {'untrusted', counter};
-- a raise counts its value as a lower bound and vouches for the result.
--
-- A counter below the caller's floor means the store went back without
-- changing its epoch (restored from an old snapshot, a crash that lost
-- acknowledged writes, a failover to a replica that had not received them):
-- ranges above any counter may already be in use. The script then raises
-- the counter to the floor, replaces the epoch with ARGV[5] and marks every
-- counter untrusted, so every process stops, waits the reset grace and
-- re-seeds, and replies {'behind', counter}. Otherwise it replies {'ok',
-- new max ID}. Values are compared and returned as decimal strings: Lua
-- numbers are doubles, exact only up to 2^53.
local function greater(a, b) -- decimal strings of integers >= 0
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local key, step, floor, name = KEYS[2], ARGV[2], ARGV[4], ARGV[8]
local restores = redis.call('GET', KEYS[3])

-- vouch records the counter as trusted under the current restore count.
local function vouch()
  if restores then
    redis.call('HSET', KEYS[4], name, restores)
  end
end

local cur = redis.call('GET', key)
local base = cur or ARGV[3]
if ARGV[6] == '0' then
  if greater(floor, base) then
    base = floor
  end
  redis.call('SET', key, base)
  vouch()
  return {'ok', base}
end
if cur and restores and redis.call('HGET', KEYS[4], name) ~= restores then
  return {'untrusted', cur}
end
if greater(floor, base) then
  redis.call('SET', key, floor)
  redis.call('SET', KEYS[1], ARGV[5])
  redis.call('INCR', KEYS[3])
  redis.call('DEL', KEYS[4])
  return {'behind', base}
end
if not cur then
  if ARGV[7] ~= '1' then
    return {'nofloor'}
  end
  redis.call('SET', key, base)
  vouch()
end
redis.call('INCRBY', key, step)
return {'ok', redis.call('GET', key)}
