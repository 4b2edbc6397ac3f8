-- The fleet rate limiter, GCRA: admits when the theoretical arrival time minus the burst
-- tolerance has passed. Times are the server's clock, in microseconds.
--
-- What the key holds is input, not truth: a genuine state is a number no further ahead than
-- now plus the period (the burst tolerance plus one interval: the most an admission can add).
-- Anything else (not a string, longer than a number can be, not a number, or further ahead) is
-- corrupt: deleted, decided as if the key were empty, and reported, so a stored far-future
-- value cannot hold the limiter shut and no wait is ever longer than the period.
--
-- KEYS: the limiter's key
-- ARGV: emission interval µs, burst tolerance µs
-- Returns {1, 0, reset} to admit, {0, wait µs, reset} to refuse; reset is 1 when a corrupt
-- state was found and reset.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval, tolerance = tonumber(ARGV[1]), tonumber(ARGV[2])
local period = interval + tolerance
local tat, reset = now, 0
local kind = redis.call('TYPE', KEYS[1])['ok']
if kind == 'string' then
  -- A state is at most 20 digits; a longer value is never read, and never leaves the server.
  local stored = nil
  if redis.call('STRLEN', KEYS[1]) <= 24 then stored = tonumber(redis.call('GET', KEYS[1])) end
  if stored == nil or stored ~= stored or stored > now + period then
    reset = 1
  elseif stored > now then
    tat = stored
  end
elseif kind ~= 'none' then
  reset = 1
end
if reset == 1 then redis.call('DEL', KEYS[1]) end
local allow_at = tat - tolerance
if now < allow_at then return {0, allow_at - now, reset} end
local new_tat = tat + interval
redis.call('SET', KEYS[1], string.format('%d', new_tat), 'PX', math.floor((new_tat - now) / 1000) + 1)
return {1, 0, reset}
