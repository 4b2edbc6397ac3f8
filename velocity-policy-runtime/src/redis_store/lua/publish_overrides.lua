-- Stores an override set under the fleet's key when its version is newer than the one stored:
-- a publisher signs the set with its version inside, so it first learns the version stored
-- (proposing 0), then proposes the next. A key of another type, or a version field that is no
-- number, is corrupt and replaced.
--
-- KEYS: the fleet's overrides hash
-- ARGV: the set (JSON), its version
-- Returns {1, version} when stored, {0, the version stored} otherwise.
local key = KEYS[1]
local kind = redis.call('TYPE', key)['ok']
if kind ~= 'hash' and kind ~= 'none' then redis.call('DEL', key) end
local current = 0
if kind == 'hash' and redis.call('HSTRLEN', key, 'version') <= 20 then
  current = tonumber(redis.call('HGET', key, 'version') or '0') or 0
end
local proposed = tonumber(ARGV[2]) or 0
if proposed <= current then return {0, current} end
redis.call('HSET', key, 'set', ARGV[1], 'version', ARGV[2])
return {1, proposed}
