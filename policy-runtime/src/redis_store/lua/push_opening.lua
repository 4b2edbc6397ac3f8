-- Publishes an opening: a trip (set exactly, force = 1) or a local opening pushed on re-sync
-- (kept only when it ends later than what Redis holds). Times come from the server's clock.
--
-- KEYS: state hash, index set
-- ARGV: name, instance, remaining ms, kind, cause, window ms, channel, force, the message
--       announcing it (written and, with a secret, signed by the pushing instance)
-- Returns 1 when stored and published, 0 when Redis already holds a longer opening.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, index = KEYS[1], KEYS[2]
local name, instance, remaining = ARGV[1], ARGV[2], tonumber(ARGV[3])
local kind, cause, window, channel, force = ARGV[4], ARGV[5], tonumber(ARGV[6]), ARGV[7], ARGV[8]
local message = ARGV[9]
redis.call('SADD', index, name)
local u = now + remaining
if force ~= '1' then
  local current = tonumber(redis.call('HGET', state, 'until') or '0') or 0
  if u <= current then return 0 end
end
redis.call('HSET', state, 'until', u, 'probation', u + window, 'kind', kind, 'cause', cause,
  'by', instance, 'message', message)
redis.call('PEXPIRE', state, remaining + window + 1000)
redis.call('PUBLISH', channel, message)
return 1
