-- One breaker's opening: remaining ms on the server's clock (0 when it is closed) and the
-- message that opened it ('' when the state holds none).
--
-- KEYS: the breaker's state hash
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local st = redis.call('HMGET', KEYS[1], 'until', 'message')
local u = tonumber(st[1] or '0') or 0
if u > now then return {tostring(u - now), st[2] or ''} end
return {'0', ''}
