-- The fleet rate limiter, GCRA: admits when the theoretical arrival time minus the burst
-- tolerance has passed. Times are the server's clock, in microseconds.
--
-- KEYS: the limiter's key
-- ARGV: emission interval µs, burst tolerance µs
-- Returns {1, 0} to admit, {0, wait µs} to refuse.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0') or 0
if tat < now then tat = now end
local allow_at = tat - tolerance
if now < allow_at then return {0, allow_at - now} end
local new_tat = tat + interval
redis.call('SET', KEYS[1], new_tat, 'PX', math.floor((new_tat - now) / 1000) + 1)
return {1, 0}
