-- Records one failure of a shared breaker. Opens the breaker fleet-wide when the failures in
-- the window reach the threshold from at least `quorum` distinct instances, or at once for a
-- probe failing on probation (quorum 1). Times come from the server's clock.
--
-- Every key is one breaker's and shares its hash tag, so the script runs on one cluster slot;
-- the caller announces an opening (the open-breakers index and the events channel) itself.
--
-- KEYS: state hash, failures sorted set, sequence
-- ARGV: instance, window ms, threshold, quorum, cooldown ms, window as text, the message
--       announcing an opening on the count, the message announcing an opening on a failed
--       probe (both written and, with a secret, signed by the reporting instance)
-- Returns {1, remaining ms, 0, 0} when already open; {2, cooldown ms, which message (1: on
-- the count, 2: on the probe), until (server ms)} when this report opened it; {0, failures in
-- the window, 0, 0} otherwise.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, failures, seq = KEYS[1], KEYS[2], KEYS[3]
local instance = ARGV[1]
local window, threshold = tonumber(ARGV[2]), tonumber(ARGV[3])
local quorum, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5])
local window_text = ARGV[6]
local on_count, on_probe = ARGV[7], ARGV[8]
local st = redis.call('HMGET', state, 'until', 'probation')
local open_until = tonumber(st[1] or '0') or 0
if open_until > now then return {1, open_until - now, 0, 0} end
local probation = tonumber(st[2] or '0') or 0
local cause, message, which = nil, nil, 0
local count = 0
if quorum <= 1 and probation > now then
  cause = 'a probe failed right after the cooldown'
  message, which = on_probe, 2
else
  redis.call('ZREMRANGEBYSCORE', failures, '-inf', now - window)
  local n = redis.call('INCR', seq)
  redis.call('ZADD', failures, now, instance .. '|' .. n)
  redis.call('PEXPIRE', failures, window + 1000)
  redis.call('PEXPIRE', seq, window + 1000)
  count = redis.call('ZCARD', failures)
  if count >= threshold then
    local seen, distinct = {}, 0
    for _, m in ipairs(redis.call('ZRANGE', failures, 0, -1)) do
      local who = string.match(m, '^(.*)|')
      if who and not seen[who] then seen[who] = true; distinct = distinct + 1 end
    end
    if distinct >= quorum then
      cause = count .. ' failures within ' .. window_text .. ' from ' .. distinct .. ' instance(s)'
      message, which = on_count, 1
    end
  end
end
if cause then
  local u = now + cooldown
  redis.call('HSET', state, 'until', u, 'probation', u + window, 'kind', 'failures',
    'cause', cause, 'by', instance, 'message', message)
  redis.call('PEXPIRE', state, cooldown + window + 1000)
  redis.call('DEL', failures)
  return {2, cooldown, which, u}
end
return {0, count, 0, 0}
