-- Moves a task to the dead-letter stream, if the delivery that settles it still owns it: the
-- dead letter is written first (an error there ends the script before anything else changed,
-- and the task stays pending), then the task is acknowledged and deleted.
-- KEYS[1] the stream, KEYS[2] the dead-letter stream, KEYS[3] the errors hash.
-- ARGV: group, entry id, consumer, deliveries, error ('' for the last recorded one), reason,
-- dead letters kept, field bound, arguments bound, error bound, error when none was recorded.
-- Returns 'ok', or why it did nothing: 'not_pending', 'claimed'.
local group, id = ARGV[1], ARGV[2]
local why = not_owned(KEYS[1], group, id, ARGV[3], ARGV[4])
if why then return why end
local max_field, max_args, max_error = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])

local letter = {}
local entry = redis.call('XRANGE', KEYS[1], id, id)[1]
if entry then
  local fields, seen = entry[2], {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    if KNOWN[name] and not seen[name] then
      seen[name] = true
      local bound = max_field
      if name == 'args' then bound = max_args end
      letter[#letter + 1] = name
      letter[#letter + 1] = string.sub(fields[i + 1], 1, bound)
    end
  end
end
local err = ARGV[5]
if err == '' then
  local last = redis.pcall('HGET', KEYS[3], id)
  if type(last) == 'string' then err = last else err = ARGV[11] end
end
for _, pair in ipairs({ { 'error', string.sub(err, 1, max_error) }, { 'reason', ARGV[6] },
    { 'deliveries', ARGV[4] }, { 'entry', id } }) do
  letter[#letter + 1] = pair[1]
  letter[#letter + 1] = pair[2]
end
redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[7], '*', unpack(letter))
redis.call('XACK', KEYS[1], group, id)
redis.call('XDEL', KEYS[1], id)
redis.pcall('HDEL', KEYS[3], id)
return 'ok'
