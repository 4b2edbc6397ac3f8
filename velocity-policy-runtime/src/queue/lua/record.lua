-- Records a failed delivery's error, if the delivery still owns the task (it stays pending,
-- for a worker to claim after the visibility timeout).
-- KEYS[1] the stream, KEYS[2] the errors hash. ARGV: group, entry id, consumer, deliveries,
-- error. Returns 'ok', 'errors_unwritable', 'not_pending' or 'claimed'.
local why = not_owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if why then return why end
local set = redis.pcall('HSET', KEYS[2], ARGV[2], ARGV[5])
if type(set) == 'table' and set.err then return 'errors_unwritable' end
return 'ok'
