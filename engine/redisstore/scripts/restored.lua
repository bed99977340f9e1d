-- Declare the store restored: KEYS[1] the epoch becomes ARGV[1], and every
-- counter becomes untrusted. KEYS[2] counts the declarations; KEYS[3], the
-- trusted hash, maps a segment name to the count under which its counter
-- was last vouched for (created, re-seeded or raised to a Floor). A counter
-- is trusted while no declaration was made (KEYS[2] missing) or while its
-- entry equals the count: one INCR and one DEL untrust them all, however
-- many there are. With ARGV[2] not '', only while the epoch is ARGV[2] (a
-- process that caught the store going back: one of them declares it).
-- Replies with the epoch now stored.
if ARGV[2] == '' or redis.call('GET', KEYS[1]) == ARGV[2] then
  redis.call('SET', KEYS[1], ARGV[1])
  redis.call('INCR', KEYS[2])
  redis.call('DEL', KEYS[3])
end
return redis.call('GET', KEYS[1])
