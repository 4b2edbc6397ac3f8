-- Records one failure of a shared breaker. Times come from the server's clock.
--
-- Every key is one breaker's and shares its hash tag, so the script runs on one cluster slot;
-- the caller announces an opening (the open-breakers index and the events channel) itself.
--
-- What the keys hold is input, not truth: anyone who can write to this Redis can add members
-- to the failures set or write the state hash. So:
--
-- - A probation (one failure reopens, with a quorum of 1) counts only when it is what a real
--   opening leaves behind under this instance's own configuration: it started when an opening
--   ended, that opening has ended, and it lasts at most the local window past its end.
-- - Without a secret (ARGV[9] = '0') the script decides, as the members cannot be told apart:
--   it opens when the failures in the window reach the threshold from at least `quorum`
--   distinct instances, or at once on probation.
-- - With a secret (ARGV[9] = '1') every member is a report signed by the instance that made it,
--   which the script cannot check (the secret never reaches Redis). It records this report and
--   hands the decision to the reporting instance: the claimed probation's opening message, and,
--   once the members in the window reach the threshold, the newest of them (at most ARGV[11],
--   none longer than ARGV[12] bytes). The instance counts only the reports whose signatures it
--   checks, and opens the breaker itself.
--
-- KEYS: state hash, failures sorted set, sequence
-- ARGV: instance, window ms, threshold, quorum, cooldown ms, window as text, the message
--       announcing an opening on the count, the message announcing an opening on a failed
--       probe (both written and, with a secret, signed by the reporting instance), signed,
--       this report (signed: the member to add), the most reports returned, the longest
--       report accepted (bytes)
-- Returns {1, remaining ms} when already open; {2, cooldown ms, which message (1: on the
-- count, 2: on the probe), until (server ms)} when this report opened it; {0, failures in the
-- window} otherwise; signed, when there is something to decide, {3, failures in the window,
-- the probation's opening message or '', the reports...}.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local state, failures, seq = KEYS[1], KEYS[2], KEYS[3]
local instance = ARGV[1]
local window, threshold = tonumber(ARGV[2]), tonumber(ARGV[3])
local quorum, cooldown = tonumber(ARGV[4]), tonumber(ARGV[5])
local window_text = ARGV[6]
local on_count, on_probe = ARGV[7], ARGV[8]
local signed, report = ARGV[9] == '1', ARGV[10]
local most, longest = tonumber(ARGV[11]), tonumber(ARGV[12])
-- A key of another type is corrupt: dropped, as a plain write would fail on it.
local state_type = redis.call('TYPE', state)['ok']
if state_type ~= 'hash' and state_type ~= 'none' then redis.call('DEL', state) end
local hash = state_type == 'hash'
local function field(name)
  -- A time is at most 20 digits: a longer field is no time, and is never read.
  if not hash or redis.call('HSTRLEN', state, name) > 24 then return 0 end
  local n = tonumber(redis.call('HGET', state, name) or '0') or 0
  if n ~= n then return 0 end
  return n
end
local open_until = field('until')
if open_until > now then return {1, open_until - now} end
local probation = field('probation')
-- A genuine probation starts when its opening ends and lasts the window: a claimed one that
-- starts before an opening ended, or lasts longer than this instance's window, is not one.
local on_probation = quorum <= 1 and open_until > 0 and probation > now
  and probation <= open_until + window
if redis.call('TYPE', failures)['ok'] ~= 'zset' then redis.call('DEL', failures) end
if signed then
  redis.call('ZREMRANGEBYSCORE', failures, '-inf', now - window)
  if string.len(report) <= longest then redis.call('ZADD', failures, now, report) end
  redis.call('PEXPIRE', failures, window + 1000)
  local count = redis.call('ZCARD', failures)
  local message = ''
  if on_probation and redis.call('HSTRLEN', state, 'message') <= longest * 16 then
    message = redis.call('HGET', state, 'message') or ''
  end
  if message == '' and count < threshold then return {0, count} end
  local reply = {3, count, message}
  if count >= threshold then
    local members = redis.call('ZREVRANGEBYSCORE', failures, '+inf', now - window, 'LIMIT', 0,
      most)
    for _, m in ipairs(members) do
      if string.len(m) <= longest then reply[#reply + 1] = m
      else redis.call('ZREM', failures, m) end
    end
  end
  return reply
end
local cause, message, which = nil, nil, 0
local count = 0
if on_probation then
  cause = 'a probe failed right after the cooldown'
  message, which = on_probe, 2
else
  redis.call('ZREMRANGEBYSCORE', failures, '-inf', now - window)
  local n = redis.pcall('INCR', seq)
  if type(n) ~= 'number' then
    redis.call('DEL', seq)
    n = redis.call('INCR', seq)
  end
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
return {0, count}
