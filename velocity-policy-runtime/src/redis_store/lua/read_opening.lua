-- One breaker's opening: remaining ms on the server's clock (0 when it is closed) and the
-- message that opened it ('' when the state holds none). The message's size is checked here,
-- before anything crosses the wire: one longer than ARGV[1] bytes is not sent, and the third
-- element says so.
--
-- KEYS: the breaker's state hash
-- ARGV: the longest message accepted (bytes)
-- Returns {remaining ms as text, message, 1 when the message was too large to send else 0}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local key = KEYS[1]
if redis.call('TYPE', key)['ok'] ~= 'hash' then return {'0', '', 0} end
-- An `until` is at most 20 digits: a longer one is no time.
if redis.call('HSTRLEN', key, 'until') > 24 then return {'0', '', 0} end
local u = tonumber(redis.call('HGET', key, 'until') or '0') or 0
if u ~= u or u <= now then return {'0', '', 0} end
-- Whole milliseconds a double holds exactly; the instance bounds it by its own configuration.
local remaining = string.format('%d', math.min(u - now, 9007199254740991))
if redis.call('HSTRLEN', key, 'message') > tonumber(ARGV[1]) then
  return {remaining, '', 1}
end
return {remaining, redis.call('HGET', key, 'message') or '', 0}
