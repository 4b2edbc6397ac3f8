-- The names of the breakers open now, from the open-breakers index (a sorted set scored by when
-- each opening ends, server ms); drops the ones that have ended.
--
-- KEYS: the index
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
return redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf')
