-- Advance a segment. KEYS[2] segment key; ARGV[2] step, ARGV[3] start of a
-- fresh name, ARGV[4] floor: the highest max ID the caller ever got for this
-- name, ARGV[5] a new epoch token, ARGV[6] '1' to fetch, '0' only to raise
-- the counter to the floor (re-seeding after a reset), ARGV[7] '1' when a
-- missing counter may start at ARGV[3] (the epoch is brand-new); otherwise
-- a fetch of a missing counter with no floor replies {'nofloor'}.
--
-- A counter below the caller's floor means the store went back without
-- changing its epoch (restored from an old snapshot, a crash that lost
-- acknowledged writes, a failover to a replica that had not received them):
-- ranges above the counter may already be in use. The script then raises the
-- counter to the floor, replaces the epoch with ARGV[5], so every process
-- stops and waits the reset grace, and replies {'behind', counter}.
-- Otherwise it replies {'ok', new max ID}. Values are compared and returned
-- as decimal strings: Lua numbers are doubles, exact only up to 2^53.
local function greater(a, b) -- decimal strings of integers >= 0
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local key, step, floor = KEYS[2], ARGV[2], ARGV[4]
local cur = redis.call('GET', key)
local base = cur or ARGV[3]
if greater(floor, base) then
  redis.call('SET', key, floor)
  if ARGV[6] == '1' then
    redis.call('SET', KEYS[1], ARGV[5])
    return {'behind', base}
  end
  return {'ok', floor}
end
if ARGV[6] == '0' then
  if not cur then
    redis.call('SET', key, base)
  end
  return {'ok', base}
end
if not cur then
  if ARGV[7] ~= '1' then
    return {'nofloor'}
  end
  redis.call('SET', key, base)
end
redis.call('INCRBY', key, step)
return {'ok', redis.call('GET', key)}
