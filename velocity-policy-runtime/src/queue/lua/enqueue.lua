-- Adds a task, unless the stream holds its bound of unfinished tasks: a full stream refuses
-- instead of letting MAXLEN trim a task nobody ran.
-- KEYS[1] the stream. ARGV: bound, id, operation, arguments, enqueue time (ms), signature
-- ('' when the store has no secret).
-- Returns {1, entry id} or {0, length}.
local len = redis.call('XLEN', KEYS[1])
if len >= tonumber(ARGV[1]) then
  return { 0, len }
end
local fields = { 'v', '1', 'id', ARGV[2], 'op', ARGV[3], 'args', ARGV[4], 'at', ARGV[5] }
if ARGV[6] ~= '' then
  fields[#fields + 1] = 'sig'
  fields[#fields + 1] = ARGV[6]
end
local entry = redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', unpack(fields))
return { 1, entry }
