/**
 * Lua scripts of the Redis session store. Each runs atomically on the server. Keys of leases and
 * slot sets are derived from the prefix passed as ARGV[1] (the sandbox id is only known inside the
 * script), so the store targets a standalone Redis or a single-shard deployment, not Redis Cluster.
 *
 * Layout (P = prefix): P..'bindings' hash session -> binding JSON; P..'idle' zset session -> idle
 * deadline; P..'owners' hash sandbox id -> 'b:<session>' | 'w:<pool>'; P..'lease:<id>' zset lease
 * id -> expiry; P..'warm:<pool>' list of entry JSON; P..'lock:<name>' string token;
 * P..'slot:<name>' zset member -> expiry; P..'replaced' hash session -> replacement notice JSON;
 * P..'closed:<id>' string, set for an hour when a session delete closed that sandbox.
 */

// Shared helpers prepended to the scripts that need them. The zset scores decide whether a lease is
// live; the key TTL (a day, refreshed on every write, independent of clocks) only collects the keys
// of crashed workers.
const HELPERS = `
local P = ARGV[1]
local function lease_key(id) return P .. 'lease:' .. id end
local function slot_key(s) return P .. 'slot:' .. s end
local function gc_lease(lk) redis.call('PEXPIRE', lk, 86400000) end
local function live_leases(id, now)
  local lk = lease_key(id)
  redis.call('ZREMRANGEBYSCORE', lk, '-inf', now)
  return redis.call('ZCARD', lk)
end
local function extend_slots(slots, id, exp)
  for _, s in ipairs(slots) do redis.call('ZADD', slot_key(s), 'GT', exp, id) end
end
local function drop_binding(session, rec)
  redis.call('HDEL', P .. 'bindings', session)
  redis.call('ZREM', P .. 'idle', session)
  if redis.call('HGET', P .. 'owners', rec.ref.id) == 'b:' .. session then
    redis.call('HDEL', P .. 'owners', rec.ref.id)
  end
end
-- Records that the session's sandbox rec was replaced (at, reason); a reason of '' records nothing.
local function note_replaced(session, rec, at, reason)
  if not reason or reason == '' then return end
  local note = cjson.encode({ at = tonumber(at), reason = reason, filesLost = true, previousSandboxId = rec.ref.id })
  redis.call('HSET', P .. 'replaced', session, note)
end
`

/**
 * ARGV: P, session, leaseId, leaseExpiresAt, idleDeadline, then optionally (lock name, token, ttl).
 * Returns {'bound', binding JSON, replacement notice JSON or false}; unbound: {'locked'} / {'busy'}
 * with a lock, else {'unbound'}. A `noticeFree` binding has no notice to read (see BIND).
 */
export const USE_BINDING = `${HELPERS}
local raw = redis.call('HGET', P .. 'bindings', ARGV[2])
if not raw then
  if not ARGV[6] then return { 'unbound' } end
  if redis.call('SET', P .. 'lock:' .. ARGV[6], ARGV[7], 'PX', tonumber(ARGV[8]), 'NX') then return { 'locked' } end
  return { 'busy' }
end
local rec = cjson.decode(raw)
local deadline = tonumber(ARGV[5])
redis.call('ZADD', P .. 'idle', 'GT', deadline, ARGV[2])
local lk = lease_key(rec.ref.id)
redis.call('ZADD', lk, tonumber(ARGV[4]), ARGV[3])
gc_lease(lk)
extend_slots(rec.slots, rec.ref.id, math.max(deadline, tonumber(ARGV[4])))
if rec.noticeFree then return { 'bound', raw, false } end
return { 'bound', raw, redis.call('HGET', P .. 'replaced', ARGV[2]) }`

/**
 * ARGV: P, session, binding JSON (an object), idleDeadline, then optionally (lock name, token): the
 * bind lock to release. Returns 1 when bound, 0 when already bound. The stored binding gets
 * `noticeFree: true` when the session has no replacement notice then.
 */
export const BIND = `${HELPERS}
if ARGV[5] then
  local lock = P .. 'lock:' .. ARGV[5]
  if redis.call('GET', lock) == ARGV[6] then redis.call('DEL', lock) end
end
-- A binding made while the session has no replacement notice says so: its uses then skip reading
-- one (a notice is only ever written with the binding dropped, see UNBIND and EVICT_IF_IDLE).
local json = ARGV[3]
if redis.call('HEXISTS', P .. 'replaced', ARGV[2]) == 0 then json = string.sub(json, 1, -2) .. ',"noticeFree":true}' end
if redis.call('HSETNX', P .. 'bindings', ARGV[2], json) == 0 then return 0 end
local rec = cjson.decode(ARGV[3])
redis.call('ZADD', P .. 'idle', tonumber(ARGV[4]), ARGV[2])
redis.call('HSET', P .. 'owners', rec.ref.id, 'b:' .. ARGV[2])
extend_slots(rec.slots, rec.ref.id, tonumber(ARGV[4]))
return 1`

/**
 * ARGV: P, session, refId ('' = any), then optionally (at, reason): the replacement notice to record.
 * Returns the removed binding JSON or nil.
 */
export const UNBIND = `${HELPERS}
local raw = redis.call('HGET', P .. 'bindings', ARGV[2])
if not raw then return false end
local rec = cjson.decode(raw)
if ARGV[3] ~= '' and rec.ref.id ~= ARGV[3] then return false end
drop_binding(ARGV[2], rec)
note_replaced(ARGV[2], rec, ARGV[4], ARGV[5])
return raw`

/** ARGV: P, session. Unbinds, drops the replacement notice, marks the sandbox closed. Returns the binding JSON or nil. */
export const CLOSE_SESSION = `${HELPERS}
redis.call('HDEL', P .. 'replaced', ARGV[2])
local raw = redis.call('HGET', P .. 'bindings', ARGV[2])
if not raw then return false end
local rec = cjson.decode(raw)
drop_binding(ARGV[2], rec)
redis.call('SET', P .. 'closed:' .. rec.ref.id, '1', 'PX', 3600000)
return raw`

/** ARGV: P, session. Removes and returns the replacement notice JSON (or nil). */
export const ACKNOWLEDGE = `${HELPERS}
local raw = redis.call('HGET', P .. 'replaced', ARGV[2])
if not raw then return false end
redis.call('HDEL', P .. 'replaced', ARGV[2])
return raw`

/** ARGV: P, session, now, then optionally (at, reason): the replacement notice. Returns the evicted binding JSON or nil. */
export const EVICT_IF_IDLE = `${HELPERS}
local raw = redis.call('HGET', P .. 'bindings', ARGV[2])
if not raw then return false end
local deadline = redis.call('ZSCORE', P .. 'idle', ARGV[2])
if deadline and tonumber(deadline) > tonumber(ARGV[3]) then return false end
local rec = cjson.decode(raw)
if live_leases(rec.ref.id, ARGV[3]) > 0 then return false end
drop_binding(ARGV[2], rec)
note_replaced(ARGV[2], rec, ARGV[4], ARGV[5])
return raw`

/** ARGV: P, refId, leaseId, expiresAt. */
export const ADD_LEASE = `${HELPERS}
local lk = lease_key(ARGV[2])
redis.call('ZADD', lk, tonumber(ARGV[4]), ARGV[3])
gc_lease(lk)
return 1`

/** ARGV: P, expiresAt, then triples (refId, leaseId, slots JSON). Extends only leases that still exist. */
export const RENEW_LEASES = `${HELPERS}
local exp = tonumber(ARGV[2])
for i = 3, #ARGV, 3 do
  local lk = lease_key(ARGV[i])
  if redis.call('ZADD', lk, 'XX', 'GT', 'CH', exp, ARGV[i + 1]) == 1 then
    gc_lease(lk)
    extend_slots(cjson.decode(ARGV[i + 2]), ARGV[i], exp)
  end
end
return 1`

/** ARGV: P, refId, leaseId, session ('' = none), idleDeadline. */
export const END_LEASE = `${HELPERS}
redis.call('ZREM', lease_key(ARGV[2]), ARGV[3])
if ARGV[4] == '' then return 1 end
local raw = redis.call('HGET', P .. 'bindings', ARGV[4])
if not raw then return 1 end
local rec = cjson.decode(raw)
if rec.ref.id ~= ARGV[2] then return 1 end
redis.call('ZADD', P .. 'idle', 'GT', tonumber(ARGV[5]), ARGV[4])
extend_slots(rec.slots, rec.ref.id, tonumber(ARGV[5]))
return 1`

/** ARGV: P, pool, entry JSON, refId. Returns the list length. */
export const PUSH_WARM = `${HELPERS}
local n = redis.call('RPUSH', P .. 'warm:' .. ARGV[2], ARGV[3])
redis.call('HSET', P .. 'owners', ARGV[4], 'w:' .. ARGV[2])
return n`

/**
 * ARGV: P, pool, leaseId, leaseExpiresAt, now, then optionally (quota slot, max, slot expiry).
 * Returns {claimed JSON or '', remaining, quota count when full else -1, expired JSON...}.
 */
export const CLAIM_WARM = `${HELPERS}
local wk = P .. 'warm:' .. ARGV[2]
local now = tonumber(ARGV[5])
local expired = {}
local claimed = ''
if ARGV[6] then
  local k = slot_key(ARGV[6])
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  local n = redis.call('ZCARD', k)
  if n >= tonumber(ARGV[7]) then return { '', redis.call('LLEN', wk), n } end
end
while true do
  local raw = redis.call('LPOP', wk)
  if not raw then break end
  local e = cjson.decode(raw)
  redis.call('HDEL', P .. 'owners', e.ref.id)
  if tonumber(e.expiresAt) <= now then
    table.insert(expired, raw)
  else
    local lk = lease_key(e.ref.id)
    redis.call('ZADD', lk, tonumber(ARGV[4]), ARGV[3])
    gc_lease(lk)
    if ARGV[6] then redis.call('ZADD', slot_key(ARGV[6]), tonumber(ARGV[8]), e.ref.id) end
    claimed = raw
    break
  end
end
local out = { claimed, redis.call('LLEN', wk), -1 }
for _, raw in ipairs(expired) do table.insert(out, raw) end
return out`

/** ARGV: P, pool, now ('' = take all). Returns the removed entry JSONs. */
export const TAKE_WARM = `${HELPERS}
local wk = P .. 'warm:' .. ARGV[2]
local out = {}
for _, raw in ipairs(redis.call('LRANGE', wk, 0, -1)) do
  local e = cjson.decode(raw)
  if ARGV[3] == '' or tonumber(e.expiresAt) <= tonumber(ARGV[3]) then
    if redis.call('LREM', wk, 1, raw) == 1 then
      redis.call('HDEL', P .. 'owners', e.ref.id)
      table.insert(out, raw)
    end
  end
end
return out`

/** ARGV: P, now, ids... Returns one 0/1 flag per id (1 = bound, warm or leased). */
export const IN_USE = `${HELPERS}
local out = {}
for i = 3, #ARGV do
  local used = redis.call('HEXISTS', P .. 'owners', ARGV[i]) == 1 or live_leases(ARGV[i], ARGV[2]) > 0
  table.insert(out, used and 1 or 0)
end
return out`

/** ARGV: P, refId, slots JSON. */
export const FORGET = `${HELPERS}
redis.call('DEL', lease_key(ARGV[2]))
redis.call('HDEL', P .. 'owners', ARGV[2])
for _, s in ipairs(cjson.decode(ARGV[3])) do redis.call('ZREM', slot_key(s), ARGV[2]) end
return 1`

/** ARGV: P, member, expiresAt, now, then pairs (slot name, max). Returns {} or {full name, count}. */
export const RESERVE_SLOTS = `${HELPERS}
local now = tonumber(ARGV[4])
for i = 5, #ARGV, 2 do
  local k = slot_key(ARGV[i])
  redis.call('ZREMRANGEBYSCORE', k, '-inf', now)
  if not redis.call('ZSCORE', k, ARGV[2]) then
    local n = redis.call('ZCARD', k)
    if n >= tonumber(ARGV[i + 1]) then return { ARGV[i], n } end
  end
end
for i = 5, #ARGV, 2 do redis.call('ZADD', slot_key(ARGV[i]), tonumber(ARGV[3]), ARGV[2]) end
return {}`

/** ARGV: P, from, to, expiresAt, names... */
export const MOVE_SLOT = `${HELPERS}
for i = 5, #ARGV do
  local k = slot_key(ARGV[i])
  redis.call('ZREM', k, ARGV[2])
  redis.call('ZADD', k, tonumber(ARGV[4]), ARGV[3])
end
return 1`

/** KEYS: lock. ARGV: token, ttlMs. */
export const RENEW_LOCK = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1`

/** KEYS: lock. ARGV: token. */
export const UNLOCK = `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
return 1`
