-- Machines: every machine ID of the namespace, for an operator. It runs
-- without epoch.lua: an operator reads the store as it is.
-- Replies {id, "lastTimestamp|stable|instance", '1' when a holding is
-- live else '0', ...} for each ID of the machines hash.
local out = {}
local all = redis.call('HGETALL', machines)
for i = 1, #all, 2 do
  local id = all[i]
  local held = '0'
  if redis.call('HEXISTS', holders, id) == 1 then
    held = '1'
  end
  out[#out + 1] = id
  out[#out + 1] = all[i + 1]
  out[#out + 1] = held
end
return out
