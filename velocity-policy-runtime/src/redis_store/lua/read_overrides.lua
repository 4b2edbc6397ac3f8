-- The fleet's override set, size-checked before anything crosses the wire: a set longer than
-- ARGV[1] bytes is not sent.
--
-- KEYS: the fleet's overrides hash
-- ARGV: the longest set accepted (bytes)
-- Returns {0} when there is none, {1, set} when it fits, {2, its length} when it does not.
local key = KEYS[1]
if redis.call('TYPE', key)['ok'] ~= 'hash' then return {0} end
local len = redis.call('HSTRLEN', key, 'set')
if len == 0 then return {0} end
if len > tonumber(ARGV[1]) then return {2, len} end
return {1, redis.call('HGET', key, 'set')}
