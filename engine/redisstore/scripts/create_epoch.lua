-- Create the store's epoch KEYS[1] as ARGV[1] unless one exists; reply with
-- the epoch now stored. A store found without an epoch may have lost it
-- alone (the key deleted, a snapshot restored without it), so every counter
-- it still holds may be older than what was handed out: the new epoch comes
-- with them all marked untrusted (see restored.lua: KEYS[2] the restore
-- count, KEYS[3] the trusted hash), brand-new or not, since a store that
-- holds counters never was.
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  redis.call('INCR', KEYS[2])
  redis.call('DEL', KEYS[3])
end
return redis.call('GET', KEYS[1])
