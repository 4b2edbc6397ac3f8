-- The names of the breakers open now, from the open-breakers index (a sorted set scored by when
-- each opening ends, server ms); drops the ones that have ended. Sizes are checked here, before
-- anything crosses the wire: at most ARGV[1] names besides this instance's own, none longer
-- than ARGV[2] bytes (a longer member is removed from the index and counted, never sent).
--
-- KEYS: the index
-- ARGV: the most other names to return, the longest name accepted (bytes), then the names of
--       the breakers this instance has built (found whatever else the index holds)
-- Returns {oversized members removed, {names}}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local most, longest = tonumber(ARGV[1]), tonumber(ARGV[2])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local names, seen, oversized = {}, {}, 0
for i = 3, #ARGV do
  local score = tonumber(redis.call('ZSCORE', KEYS[1], ARGV[i]))
  if score and score > now and not seen[ARGV[i]] then
    seen[ARGV[i]] = true
    names[#names + 1] = ARGV[i]
  end
end
local others = 0
for _, name in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'LIMIT', 0,
    most + #names)) do
  if string.len(name) > longest then
    redis.call('ZREM', KEYS[1], name)
    oversized = oversized + 1
  elseif not seen[name] and others < most then
    seen[name] = true
    others = others + 1
    names[#names + 1] = name
  end
end
return {oversized, names}
