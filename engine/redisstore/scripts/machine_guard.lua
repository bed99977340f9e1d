-- Guard: instance ARGV[1] still holds machine ID ARGV[2]; raise the stored
-- last timestamp to ARGV[3] (the heartbeat time), never lowering it.
-- Returns {1, ''} when done, else {0, current holder ('' when free)}.
local instance, id = ARGV[1], ARGV[2]
local last, stable, owner = load(id)
if owner ~= instance then
  return {0, owner or ''}
end
local keep = math.max(last, tonumber(ARGV[3]))
hold(id, keep, stable, instance)
return {1, ''}
