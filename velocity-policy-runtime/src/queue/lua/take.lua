-- Hands tasks to a worker: claims entries idle past the visibility timeout (ARGV[4] set), or
-- reads new ones, and returns each with how often it was delivered and its fields, or, for
-- an entry past the bounds, why (its fields stay in Redis).
-- KEYS[1] the stream, KEYS[2] the errors hash.
-- ARGV: group, consumer, count, min idle ms ('' to read new entries), cursor, field bound,
-- arguments bound, most fields.
-- Returns {next cursor, entries}.
local group, consumer, count = ARGV[1], ARGV[2], ARGV[3]
local max_field, max_args, max_fields = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])

if ARGV[4] == '' then
  local reply = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', count,
    'STREAMS', KEYS[1], '>')
  local raw = {}
  if reply and reply[1] then raw = reply[1][2] end
  return { '0-0', checked(raw, function() return 1 end, max_field, max_args, max_fields) }
end

local reply = redis.call('XAUTOCLAIM', KEYS[1], group, consumer, ARGV[4], ARGV[5],
  'COUNT', count)
local deleted = reply[3]
if deleted and #deleted > 0 then
  redis.pcall('HDEL', KEYS[2], unpack(deleted))
end
local function deliveries_of(id)
  local pending = redis.call('XPENDING', KEYS[1], group, id, id, 1)[1]
  if pending then return pending[4] end
  return 1
end
return { reply[1], checked(reply[2], deliveries_of, max_field, max_args, max_fields) }
