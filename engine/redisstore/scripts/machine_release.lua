-- Release: an operator gives machine ID ARGV[2] back, keeping its last
-- timestamp for the next holder. It runs without epoch.lua (an operator
-- acts on the store as it is), so ARGV[1], the other scripts' epoch, is
-- unused. ARGV[3] now (Unix ms), ARGV[4] the live window (ms), ARGV[5] '1'
-- to release even a live holding.
-- Replies {'ok'}; {'unknown'} for an ID never handed out; or {'live',
-- owner, stable, last timestamp} when, not forced, the ID's holding stored
-- a last timestamp within the live window of now.
local id = ARGV[2]
local last, stable, owner = load(id)
if not last then
  return {'unknown'}
end
local held = redis.call('HEXISTS', holders, id) == 1
if ARGV[5] ~= '1' and held and last > tonumber(ARGV[3]) - tonumber(ARGV[4]) then
  return {'live', owner, stable, last}
end
-- release() drops the owner's reverse mapping: keep one that points at
-- another ID.
if owner ~= '' and redis.call('HGET', instances, owner) ~= id then
  owner = ''
end
release(id, last, owner)
return {'ok'}
