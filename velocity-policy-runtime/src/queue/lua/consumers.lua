-- Removes the group's consumers that have been idle past a bound and hold no pending task
-- (instances that stopped: each instance reads as a consumer of its own), at most a bound per
-- call, never the caller's own.
-- KEYS[1] the stream. ARGV: group, own consumer, idle bound (ms), most removed.
-- Returns {removed, kept}.
local listed = redis.pcall('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])
if type(listed) ~= 'table' or listed.err then return { 0, 0 } end
local bound, most = tonumber(ARGV[3]), tonumber(ARGV[4])
local removed, kept = 0, 0
for _, consumer in ipairs(listed) do
  local info = {}
  for i = 1, #consumer, 2 do info[consumer[i]] = consumer[i + 1] end
  if removed < most and info.name ~= ARGV[2] and tonumber(info.pending) == 0
      and tonumber(info.idle) > bound then
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], info.name)
    removed = removed + 1
  else
    kept = kept + 1
  end
end
return { removed, kept }
