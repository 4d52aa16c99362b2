/**
 * The Lua scripts of `RedisEventBroker`. A run has two keys sharing one hash tag (one cluster
 * slot): a stream `…:{runId}:events` whose entry ids are `<seq>-1` (fields `s` seq, `e` event,
 * `d` data JSON, in that order) and a hash `…:{runId}:meta` (`next` counter, `ended` mark). Scripts
 * run atomically, so sequence numbers are gap-free and ordered whatever the number of
 * publishers, and the wake-up PUBLISH goes out after the entries exist.
 *
 * Wake-up messages on `…:{runId}:wake` (parsed by `parseWake`): `{"s":first,"n":count,"i":[…]|null}`,
 * `{"e":next}`, `{"d":1}`.
 */
import { createHash } from 'node:crypto';

/** A script and its SHA1, for EVALSHA with an EVAL fallback. */
export interface LuaScript {
  source: string;
  sha: string;
}

function script(source: string): LuaScript {
  return { source, sha: createHash('sha1').update(source).digest('hex') };
}

/**
 * KEYS: stream, meta. ARGV: ttl seconds, wake channel, count, inline JSON ('' for none), first
 * sequence number of a new stream, then event name and data JSON of each event. Returns the
 * first sequence number, or nil when ended.
 */
export const APPEND = script(`
if redis.call('HEXISTS', KEYS[2], 'ended') == 1 then return false end
local n = tonumber(ARGV[3])
redis.call('HSETNX', KEYS[2], 'next', ARGV[5])
local first = redis.call('HINCRBY', KEYS[2], 'next', n) - n
for k = 0, n - 1 do
  local seq = first + k
  redis.call('XADD', KEYS[1], seq .. '-1', 's', seq, 'e', ARGV[6 + 2 * k], 'd', ARGV[7 + 2 * k])
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('EXPIRE', KEYS[2], ARGV[1])
local inline = ARGV[4]
if inline == '' then inline = 'null' end
redis.call('PUBLISH', ARGV[2], '{"s":' .. first .. ',"n":' .. n .. ',"i":' .. inline .. '}')
return first
`);

/** KEYS: stream, meta. ARGV: ttl seconds, wake channel. Marks the stream ended. */
export const END = script(`
redis.call('HSET', KEYS[2], 'ended', '1')
local nxt = tonumber(redis.call('HGET', KEYS[2], 'next') or '0')
redis.call('EXPIRE', KEYS[2], ARGV[1])
redis.call('EXPIRE', KEYS[1], ARGV[1])
redis.call('PUBLISH', ARGV[2], '{"e":' .. nxt .. '}')
return nxt
`);

/**
 * KEYS: stream, meta. ARGV: first seq wanted, max events, max bytes. Returns
 * `[next|nil, ended|nil, [seq, event, data, seq, event, data, …]]`: a batch that stops before
 * exceeding max bytes (but holds at least one event), with the counter of the same snapshot.
 */
export const READ = script(`
local meta = redis.call('HMGET', KEYS[2], 'next', 'ended')
local limit, cap = tonumber(ARGV[2]), tonumber(ARGV[3])
local start = ARGV[1] .. '-1'
local out, count, bytes = {}, 0, 0
while count < limit do
  local batch = redis.call('XRANGE', KEYS[1], start, '+', 'COUNT', math.min(16, limit - count))
  if #batch == 0 then break end
  for _, entry in ipairs(batch) do
    local f = entry[2]
    local size = string.len(f[6])
    if count > 0 and bytes + size > cap then return {meta[1], meta[2], out} end
    out[#out + 1] = f[2]
    out[#out + 1] = f[4]
    out[#out + 1] = f[6]
    count = count + 1
    bytes = bytes + size
    start = (tonumber(f[2]) + 1) .. '-1'
  end
end
return {meta[1], meta[2], out}
`);

/** KEYS: stream, meta. ARGV: wake channel. Deletes the run and wakes its subscribers. */
export const DELETE = script(`
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('PUBLISH', ARGV[1], '{"d":1}')
return 1
`);
