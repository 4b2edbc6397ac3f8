-- Stores an opening: a trip (set exactly, force = 1) or a local opening pushed on re-sync
-- (kept only when it ends later than what Redis holds). Times come from the server's clock.
--
-- One key, the breaker's state hash; the caller announces the opening (the open-breakers
-- index and the events channel) when it was stored.
--
-- KEYS: state hash, and optionally the failures sorted set (emptied when the opening is stored:
--       an opening decided by the reporting instance from signed reports)
-- ARGV: instance, remaining ms, kind, cause, window ms, force, the message announcing it
--       (written and, with a secret, signed by the pushing instance)
-- Returns {1, until (server ms)} when stored, {0, 0} when Redis already holds a longer opening.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state = KEYS[1]
local instance, remaining = ARGV[1], tonumber(ARGV[2])
local kind, cause, window, force = ARGV[3], ARGV[4], tonumber(ARGV[5]), ARGV[6]
local message = ARGV[7]
local u = now + remaining
-- A key of another type is corrupt: dropped, as the write would fail on it.
local state_type = redis.call('TYPE', state)['ok']
if state_type ~= 'hash' and state_type ~= 'none' then redis.call('DEL', state) end
if force ~= '1' and state_type == 'hash' and redis.call('HSTRLEN', state, 'until') <= 24 then
  local current = tonumber(redis.call('HGET', state, 'until') or '0') or 0
  if u <= current then return {0, 0} end
end
redis.call('HSET', state, 'until', u, 'probation', u + window, 'kind', kind, 'cause', cause,
  'by', instance, 'message', message)
redis.call('PEXPIRE', state, remaining + window + 1000)
if KEYS[2] then redis.call('DEL', KEYS[2]) end
return {1, u}
