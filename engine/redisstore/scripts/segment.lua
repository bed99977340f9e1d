-- Advance a segment. KEYS[2] segment key; ARGV[2] step (0 only raises to the
-- floor), ARGV[3] start of a fresh name, ARGV[4] floor: the highest max ID
-- the caller ever got for this name. The counter is first raised to the
-- floor, so a store that went back (emptied, restored from an old snapshot)
-- never hands out a range below what this caller already holds.
-- Replies {'ok', new max ID as a string}: Lua numbers are doubles, exact only
-- up to 2^53, so values are compared and returned as decimal strings.
local function greater(a, b) -- decimal strings of integers >= 0
  if #a ~= #b then
    return #a > #b
  end
  return a > b
end

local key, step = KEYS[2], ARGV[2]
local cur = redis.call('GET', key)
local target = cur or ARGV[3]
if greater(ARGV[4], target) then
  target = ARGV[4]
end
if target ~= cur then
  redis.call('SET', key, target)
end
if step ~= '0' then
  redis.call('INCRBY', key, step)
end
return {'ok', redis.call('GET', key)}
