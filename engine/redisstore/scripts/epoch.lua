-- Prepended by Go to every script but create_epoch.lua: the epoch check.
-- KEYS[1] is the store's epoch key, ARGV[1] the epoch the caller works
-- under. A missing or different epoch means the store forgot what it handed
-- out: the script changes nothing and replies {'reset', current epoch or ''}.
local epoch = redis.call('GET', KEYS[1])
if epoch ~= ARGV[1] then
  return {'reset', epoch or ''}
end
