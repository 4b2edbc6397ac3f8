-- The stream's figures for the snapshot, with the consumer list cut to its bound here, so a
-- group of a million consumers (or one with a huge name) costs the instance nothing.
-- KEYS[1] the stream, KEYS[2] the dead-letter stream.
-- ARGV: group, most consumers listed, longest consumer name (bytes).
-- Returns {length, dead letters, oldest entry id or '', server seconds, microseconds,
-- pending, consumers in all, {{name, pending}, ...} for at most the bound}.
local length = redis.call('XLEN', KEYS[1])
local dead = redis.call('XLEN', KEYS[2])
local first = redis.call('XRANGE', KEYS[1], '-', '+', 'COUNT', 1)[1]
local oldest = ''
if first then oldest = first[1] end
local now = redis.call('TIME')
local pending, total, consumers = 0, 0, {}
-- A stream without its group (never worked on, or emptied by a restart without persistence)
-- has nothing pending.
local summary = redis.pcall('XPENDING', KEYS[1], ARGV[1])
if type(summary) == 'table' and not summary.err then
  pending = summary[1]
  local list = summary[4]
  if type(list) == 'table' then
    total = #list
    for i = 1, math.min(#list, tonumber(ARGV[2])) do
      consumers[#consumers + 1] = { string.sub(list[i][1], 1, tonumber(ARGV[3])), list[i][2] }
    end
  end
end
return { length, dead, oldest, now[1], now[2], pending, total, consumers }
