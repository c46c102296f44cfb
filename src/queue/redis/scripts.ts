/**
 * @module
 * The Lua scripts of the `redis` queue driver: each step of a job's life is one script (one round
 * trip, atomic across the fleet). Times are Redis's own (`TIME`), so the hosts' clocks do not matter.
 * Scripts that find a job by id build its key from a prefix (the take pops the id first): the driver
 * runs on one Redis (not a Cluster), as the session pool does.
 */
import type { Redis } from 'ioredis'
import { logChunkLua } from '../redis-common/redis-fence.js'

const NOW = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
`

/**
 * KEYS: job wait done record slots index... ARGV: jobId dataJson submittedAt indexTtlMs trimBefore(''
 * = no trim) refresh (per index key, '1' when its TTL is due) recordField('' = none) recordValue cap(''
 * = none) slotDeadline slotRefresh('1' when the slots key's TTL is due).
 * Adds a job unless one of its id exists (waiting, running or finished within the retention: a
 * resubmission changes nothing), and writes the record that rides along (`HSETNX record field
 * value`: the session's directory entry) either way. Returns `{1}` when added, else the existing job
 * for its idempotency answer: `{0, data, state, result record ('' = none)}`. A new job's hash holds its
 * payload only: no `state` means waiting, no `attempt` means 0.
 * With a cap, a new job takes one of the tenant's job slots: the `slots` set holds the done-record key
 * of each of its jobs queued or running, scored by a deadline (its timeout and a margin). Past the cap,
 * the slots of jobs that ended (their done record exists) or outlived their deadline are freed, oldest
 * deadline first (at most 256 looked at); still past it: `{2, count}` and nothing is added. Slots are
 * freed only so, lazily, so a finish costs nothing more.
 */
const ADD = `
if ARGV[7] ~= '' then redis.call('HSETNX', KEYS[4], ARGV[7], ARGV[8]) end
if redis.call('HSETNX', KEYS[1], 'data', ARGV[2]) == 0 then
  local f = redis.call('HMGET', KEYS[1], 'data', 'state')
  return {0, f[1] or '', f[2] or '', redis.call('GET', KEYS[3]) or ''}
end
if ARGV[9] ~= '' then
  local cap = tonumber(ARGV[9])
  local n = redis.call('ZCARD', KEYS[5])
  if n >= cap then
    ${NOW.trim()}
    redis.call('ZREMRANGEBYSCORE', KEYS[5], '-inf', '(' .. now)
    for _, done in ipairs(redis.call('ZRANGE', KEYS[5], 0, 255)) do
      if redis.call('EXISTS', done) == 1 then redis.call('ZREM', KEYS[5], done) end
    end
    n = redis.call('ZCARD', KEYS[5])
    if n >= cap then
      redis.call('DEL', KEYS[1])
      return {2, n}
    end
  end
  redis.call('ZADD', KEYS[5], ARGV[10], KEYS[3])
  -- A set that was empty is new (or was emptied above): it gets its TTL now.
  if ARGV[11] == '1' or n == 0 then redis.call('PEXPIRE', KEYS[5], ARGV[4]) end
end
redis.call('LPUSH', KEYS[2], ARGV[1])
for i = 6, #KEYS do
  redis.call('ZADD', KEYS[i], 'NX', ARGV[3], ARGV[1])
  if ARGV[5] ~= '' then redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', '(' .. ARGV[5]) end
  if string.sub(ARGV[6], i - 5, i - 5) == '1' then redis.call('PEXPIRE', KEYS[i], ARGV[4]) end
end
return {1}
`

/**
 * KEYS: pending leases wait. ARGV: jobPrefix workerId leaseMs more. Takes the job the blocking pop
 * just moved to the consumer's pending list (sent right behind it, on the same connection), then up
 * to `more` jobs straight off the waiting list (the consumer's free slots: a backlog is taken in one
 * round trip, not one per job): each one's attempt counts up and it is leased to the worker, in the
 * same atomic step as its pop, so none is left between. Returns nil when nothing was pending, else a
 * flat list of `id, data, attempt, stalls` per job taken (empty when the popped job was gone or
 * finished: it is dropped).
 */
const TAKE = `
local out = {}
local now
local function take(id)
  local key = ARGV[1] .. id .. '}'
  local f = redis.call('HMGET', key, 'data', 'state', 'stalls', 'attempt')
  if not f[1] or f[2] == 'finished' then return end
  if not now then
    local t = redis.call('TIME')
    now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  end
  local attempt = tonumber(f[4] or '0') + 1
  redis.call('HSET', key, 'state', 'active', 'worker', ARGV[2], 'attempt', attempt)
  redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), id)
  out[#out + 1] = id
  out[#out + 1] = f[1]
  out[#out + 1] = attempt
  out[#out + 1] = f[3] or '0'
end
local id = redis.call('RPOP', KEYS[1])
if not id then return false end
take(id)
for _ = 1, tonumber(ARGV[4] or '0') do
  local more = redis.call('RPOP', KEYS[3])
  if not more then break end
  take(more)
end
return out
`

/**
 * KEYS: done log logmeta job leases. ARGV: resultJson ttlMs channel logLingerMs jobId, then the last
 * live chunk when it rides along: kind(o|e, '' = none) data logCapBytes.
 * The fence's finish (the first result is stored and published `d<result>` on the job's channel, the
 * retained output lingers) and the job's end in one: the lease goes (whoever holds it: once a result
 * is stored, no attempt needs recovering; a later one still running finds it and returns it) and the
 * job hash expires with the retention. A job with a result record is finished (see job-store.ts:
 * its `state` field is left as it was). A chunk that rides along is numbered and logged as the chunk
 * script does, and published with the result in one message, `f<result>\n<chunk message>`, which
 * subscribers take as the chunk's message followed by `d<result>` (subscriber.ts); it skips the
 * stream's tail, which only a redelivery of an unfinished job reads. Returns the stored result when
 * another attempt finished first, else nil.
 */
const FINISH = `
local carried = ARGV[6] ~= nil and ARGV[6] ~= ''
local stored = false
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if carried then
    ${logChunkLua('KEYS[2]', 'KEYS[3]', undefined, 'ARGV[6]', 'ARGV[7]', 'ARGV[8]')}
    redis.call('PUBLISH', ARGV[3], 'f' .. ARGV[1] .. '\\n' .. message)
  else
    redis.call('PUBLISH', ARGV[3], 'd' .. ARGV[1])
  end
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
else
  stored = redis.call('GET', KEYS[1])
  if carried then
    ${logChunkLua('KEYS[2]', 'KEYS[3]', 'ARGV[3]', 'ARGV[6]', 'ARGV[7]', 'ARGV[8]')}
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
    redis.call('PEXPIRE', KEYS[3], ARGV[4])
  end
end
redis.call('ZREM', KEYS[5], ARGV[5])
redis.call('PEXPIRE', KEYS[4], ARGV[2])
return stored
`

/**
 * KEYS: job leases wait. ARGV: jobId attempt. Hands a running job back (shutdown, Redis outage): next
 * in line, unless a later attempt holds it already. Returns 1 when handed back.
 */
const HAND_BACK = `
local f = redis.call('HMGET', KEYS[1], 'attempt', 'state')
if f[1] ~= ARGV[2] or f[2] ~= 'active' then return 0 end
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[1], 'state', 'waiting')
redis.call('RPUSH', KEYS[3], ARGV[1])
return 1
`

/**
 * KEYS: leases workers. ARGV: workerId leaseMs jobId... The consumer's heartbeat and the leases of the
 * jobs it runs, extended to now + leaseMs (a lease that lapsed and was swept stays gone).
 */
const REFRESH = `
${NOW}
local deadline = now + tonumber(ARGV[2])
redis.call('ZADD', KEYS[2], deadline, ARGV[1])
for i = 3, #ARGV do redis.call('ZADD', KEYS[1], 'XX', deadline, ARGV[i]) end
return 1
`

/**
 * KEYS: leases wait workers. ARGV: jobPrefix pendingPrefix limit. Puts back on the waiting list (next
 * in line) the running jobs whose lease lapsed (their worker died or lost Redis; `stalls` counts up,
 * the next attempt's fence decides) and what dead consumers had popped but not taken.
 * Returns the number of jobs put back.
 */
const SWEEP = `
${NOW}
local n = 0
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[1], id)
  local key = ARGV[1] .. id .. '}'
  if redis.call('HGET', key, 'state') == 'active' then
    redis.call('HSET', key, 'state', 'waiting')
    redis.call('HINCRBY', key, 'stalls', 1)
    redis.call('RPUSH', KEYS[2], id)
    n = n + 1
  end
end
local dead = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, w in ipairs(dead) do
  while redis.call('LMOVE', ARGV[2] .. w, KEYS[2], 'LEFT', 'RIGHT') do n = n + 1 end
  redis.call('ZREM', KEYS[3], w)
end
return n
`

/** KEYS: pending wait workers. ARGV: workerId. A closing consumer's popped jobs go back; it leaves. */
const RELEASE_WORKER = `
while redis.call('LMOVE', KEYS[1], KEYS[2], 'LEFT', 'RIGHT') do end
redis.call('ZREM', KEYS[3], ARGV[1])
return 1
`

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>

/** The driver's scripts as client methods (ioredis defineCommand: EVALSHA, loaded on first use). */
export interface QueueScripts {
  /** Variable key count: the first argument is the number of keys. */
  sbxRqAdd: ScriptFn
  sbxRqTake: ScriptFn
  sbxRqFinish: ScriptFn
  sbxRqHandBack: ScriptFn
  sbxRqRefresh: ScriptFn
  sbxRqSweep: ScriptFn
  sbxRqReleaseWorker: ScriptFn
}

/** Registers the scripts on `client` (ioredis also adds them to its pipelines). */
export function defineQueueScripts(client: Redis): QueueScripts {
  client.defineCommand('sbxRqAdd', { lua: ADD })
  client.defineCommand('sbxRqTake', { lua: TAKE, numberOfKeys: 3 })
  client.defineCommand('sbxRqFinish', { lua: FINISH, numberOfKeys: 5 })
  client.defineCommand('sbxRqHandBack', { lua: HAND_BACK, numberOfKeys: 3 })
  client.defineCommand('sbxRqRefresh', { lua: REFRESH, numberOfKeys: 2 })
  client.defineCommand('sbxRqSweep', { lua: SWEEP, numberOfKeys: 3 })
  client.defineCommand('sbxRqReleaseWorker', { lua: RELEASE_WORKER, numberOfKeys: 3 })
  // defineCommand adds these methods at runtime (ioredis' documented way to register Lua scripts).
  return client as unknown as QueueScripts
}
