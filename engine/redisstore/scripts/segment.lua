-- Advance a segment whose fresh name starts at a non-zero offset.
-- KEYS[1] segment key; ARGV[1] step, ARGV[2] start.
-- Returns the new max ID as a string: Lua numbers are doubles, exact only up
-- to 2^53, so INCRBY's integer reply must not travel through one.
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SET', KEYS[1], ARGV[2])
end
redis.call('INCRBY', KEYS[1], ARGV[1])
return redis.call('GET', KEYS[1])
