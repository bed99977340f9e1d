-- Create the store's epoch KEYS[1] as ARGV[1] unless one exists; reply with
-- the epoch now stored.
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
