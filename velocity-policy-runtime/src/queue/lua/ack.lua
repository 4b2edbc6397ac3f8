-- Acknowledges a finished task and deletes it, if the delivery that ran it still owns it.
-- KEYS[1] the stream, KEYS[2] the errors hash. ARGV: group, entry id, consumer, deliveries.
-- Returns 'ok', 'ok_errors_unwritable' (done; the errors hash is not a hash), or why it did
-- nothing: 'not_pending', 'claimed'.
local why = not_owned(KEYS[1], ARGV[1], ARGV[2], ARGV[3], ARGV[4])
if why then return why end
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[2])
local cleared = redis.pcall('HDEL', KEYS[2], ARGV[2])
if type(cleared) == 'table' and cleared.err then return 'ok_errors_unwritable' end
return 'ok'
