-- Every open breaker, as triples: name, remaining ms (server clock), the message that opened it
-- ('' when the state holds none).
--
-- KEYS: index set
-- ARGV: key prefix
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local out = {}
for _, name in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local st = redis.call('HMGET', ARGV[1] .. ':breaker:' .. name, 'until', 'message')
  local u = tonumber(st[1] or '0') or 0
  if u > now then
    table.insert(out, name)
    table.insert(out, tostring(u - now))
    table.insert(out, st[2] or '')
  end
end
return out
