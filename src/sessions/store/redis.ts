import { createHash } from 'node:crypto'
import type { Redis } from 'ioredis'
import { AppError } from '../../errors.js'
import { createRedisClient, keyspace, quitRedis } from '../../redis/index.js'
import type { SandboxRef } from '../../sandbox/types.js'
import type { SandboxReplacement } from '../types.js'
import { POOL_LABELS } from '../keys.js'
import * as S from './redis-scripts.js'
import type {
  BindingRecord,
  BindLock,
  ClaimQuota,
  LeaseRenewal,
  LeaseSpec,
  LeaseTouch,
  ReplacementNote,
  SessionStore,
  SlotClaim,
  SlotReservation,
  UseOrLockResult,
  WarmClaim,
  WarmEntry,
} from './types.js'

/** Options of {@link RedisSessionStore}. */
export interface RedisSessionStoreOptions {
  /**
   * A client to use (not closed by the store; its retry options apply), or a URL to connect to
   * (a `store` client of src/redis, closed by `close()`).
   */
  redis: Redis | string
  /** Prefix of every key, so several deployments or tests share one Redis. @default 'sbx:sessions:' */
  prefix?: string
}

type Arg = string | number

/** Runs a Lua script by SHA, loading it on the first `NOSCRIPT` reply (after a Redis restart too). */
class Script {
  private readonly sha: string
  constructor(private readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex')
  }
  async run(redis: Redis, keys: readonly string[], args: readonly Arg[]): Promise<unknown> {
    try {
      return await redis.evalsha(this.sha, keys.length, ...keys, ...args)
    } catch (err) {
      // NOSCRIPT is the protocol's error code for an unknown SHA, the one case worth retrying.
      if (!(err instanceof Error) || !err.message.startsWith('NOSCRIPT')) throw err
      return redis.eval(this.lua, keys.length, ...keys, ...args)
    }
  }
}

const scripts = Object.fromEntries(Object.entries(S).map(([name, lua]) => [name, new Script(lua)])) as Record<
  keyof typeof S,
  Script
>

/**
 * Translates Redis failures at the store's edge: an error reply (a bug or a misconfigured server)
 * is `INTERNAL`; anything else (connection lost, retries exhausted) is `UNAVAILABLE`, retryable.
 */
async function guard<T>(op: Promise<T>): Promise<T> {
  try {
    return await op
  } catch (err) {
    const msg = err instanceof Error ? err.message : String(err)
    if (err instanceof Error && err.name === 'ReplyError') {
      throw new AppError('INTERNAL', `session store: Redis replied with an error: ${msg}`, { cause: err })
    }
    throw new AppError(
      'UNAVAILABLE',
      `session store: Redis is unreachable (${msg}); check REDIS_URL and that Redis is running`,
      { retryable: true, cause: err },
    )
  }
}

function parse<T>(raw: unknown): T | undefined {
  return typeof raw === 'string' && raw !== '' ? (JSON.parse(raw) as T) : undefined
}

/** A stored binding as callers see it: without the BIND script's own `noticeFree` mark. */
function parseBinding(raw: unknown): BindingRecord | undefined {
  const rec = parse<BindingRecord & { noticeFree?: boolean }>(raw)
  if (!rec) return undefined
  const { noticeFree: _, ...binding } = rec
  return binding
}

function strings(raw: unknown): string[] {
  return Array.isArray(raw) ? raw.filter((x): x is string => typeof x === 'string') : []
}

/**
 * Stored form of a ref: labels are left out (they are on the sandbox itself), but for the engine it
 * lives on (a fleet over many engines must know it without reaching that engine).
 */
function compactRef(ref: SandboxRef): SandboxRef {
  const engine = ref.labels?.[POOL_LABELS.engine]
  return {
    providerId: ref.providerId,
    id: ref.id,
    profile: ref.profile,
    ...(engine === undefined ? {} : { labels: { [POOL_LABELS.engine]: engine } }),
  }
}

/**
 * The fleet {@link SessionStore} on Redis (ioredis). Every method is one round trip: a Lua script
 * or a single command. See `redis-scripts.ts` for the key layout.
 */
export class RedisSessionStore implements SessionStore {
  readonly prefix: string
  private readonly redis: Redis
  private readonly ownsClient: boolean

  constructor(opts: RedisSessionStoreOptions) {
    this.prefix = opts.prefix ?? keyspace('sbx').sessions
    this.ownsClient = typeof opts.redis === 'string'
    if (typeof opts.redis === 'string') {
      // A store client: a command fails after one reconnect attempt instead of queueing for long (an
      // acquire has a deadline). Connection errors surface through the commands (as UNAVAILABLE).
      this.redis = createRedisClient(opts.redis, 'store', 'sbx-sessions')
    } else {
      this.redis = opts.redis
    }
  }

  private run(script: keyof typeof S, args: readonly Arg[], keys: readonly string[] = []): Promise<unknown> {
    return guard(scripts[script].run(this.redis, keys, keys.length > 0 ? args : [this.prefix, ...args]))
  }

  async useBinding(
    session: string,
    lease: LeaseSpec,
    idleDeadline: number,
  ): Promise<BindingRecord | undefined> {
    const [, raw] = await this.use(session, lease, idleDeadline, [])
    return parseBinding(raw)
  }

  async useOrLock(
    session: string,
    lease: LeaseSpec,
    idleDeadline: number,
    lock: BindLock,
  ): Promise<UseOrLockResult> {
    const [kind, raw, note] = await this.use(session, lease, idleDeadline, [
      lock.name,
      lock.token,
      lock.ttlMs,
    ])
    const binding = parseBinding(raw)
    const replaced = parse<SandboxReplacement>(note)
    if (binding) return replaced ? { binding, replaced } : { binding }
    return { lock: kind === 'locked' ? 'locked' : 'busy' }
  }

  private async use(
    session: string,
    lease: LeaseSpec,
    idleDeadline: number,
    lock: Arg[],
  ): Promise<unknown[]> {
    const out = await this.run('USE_BINDING', [
      session,
      lease.leaseId,
      lease.expiresAt,
      idleDeadline,
      ...lock,
    ])
    return Array.isArray(out) ? (out as unknown[]) : []
  }

  async getBinding(session: string): Promise<BindingRecord | undefined> {
    return parseBinding(await guard(this.redis.hget(`${this.prefix}bindings`, session)))
  }

  async bind(
    session: string,
    binding: BindingRecord,
    idleDeadline: number,
    unlock?: Pick<BindLock, 'name' | 'token'>,
  ): Promise<boolean> {
    // `noticeFree` is the BIND script's to set (a record read back carries it): never passed on.
    const { noticeFree: _, ...record } = binding as BindingRecord & { noticeFree?: boolean }
    const json = JSON.stringify({ ...record, ref: compactRef(binding.ref) })
    const extra = unlock ? [unlock.name, unlock.token] : []
    return (await this.run('BIND', [session, json, idleDeadline, ...extra])) === 1
  }

  async unbind(
    session: string,
    refId?: string,
    replaced?: ReplacementNote,
  ): Promise<BindingRecord | undefined> {
    const note = replaced ? [replaced.at, replaced.reason] : []
    return parseBinding(await this.run('UNBIND', [session, refId ?? '', ...note]))
  }

  async closeSession(session: string): Promise<BindingRecord | undefined> {
    return parseBinding(await this.run('CLOSE_SESSION', [session]))
  }

  async wasClosed(refId: string): Promise<boolean> {
    return (await guard(this.redis.exists(`${this.prefix}closed:${refId}`))) === 1
  }

  async replacement(session: string): Promise<SandboxReplacement | undefined> {
    return parse(await guard(this.redis.hget(`${this.prefix}replaced`, session)))
  }

  async acknowledge(session: string): Promise<SandboxReplacement | undefined> {
    return parse(await this.run('ACKNOWLEDGE', [session]))
  }

  async evictIfIdle(
    session: string,
    now: number,
    replaced?: ReplacementNote,
  ): Promise<BindingRecord | undefined> {
    const note = replaced ? [replaced.at, replaced.reason] : []
    return parseBinding(await this.run('EVICT_IF_IDLE', [session, now, ...note]))
  }

  async idleSessions(now: number, limit: number): Promise<string[]> {
    return guard(this.redis.zrangebyscore(`${this.prefix}idle`, '-inf', now, 'LIMIT', 0, limit))
  }

  async addLease(refId: string, lease: LeaseSpec): Promise<void> {
    await this.run('ADD_LEASE', [refId, lease.leaseId, lease.expiresAt])
  }

  async renewLeases(leases: readonly LeaseRenewal[], expiresAt: number): Promise<void> {
    if (leases.length === 0) return
    const args = leases.flatMap((l) => [l.refId, l.leaseId, JSON.stringify(l.slots)])
    await this.run('RENEW_LEASES', [expiresAt, ...args])
  }

  async endLease(refId: string, leaseId: string, touch?: LeaseTouch): Promise<void> {
    await this.run('END_LEASE', [refId, leaseId, touch?.session ?? '', touch?.idleDeadline ?? 0])
  }

  async pushWarm(pool: string, entry: WarmEntry): Promise<number> {
    const json = JSON.stringify({ ...entry, ref: compactRef(entry.ref) })
    return Number(await this.run('PUSH_WARM', [pool, json, entry.ref.id]))
  }

  async claimWarm(pool: string, lease: LeaseSpec, now: number, quota?: ClaimQuota): Promise<WarmClaim> {
    const q = quota ? [quota.slot.name, quota.slot.max, quota.expiresAt] : []
    const raw = await this.run('CLAIM_WARM', [pool, lease.leaseId, lease.expiresAt, now, ...q])
    const [claimed, remaining, full, ...expired] = Array.isArray(raw) ? (raw as unknown[]) : []
    const rest = {
      expired: strings(expired).map((e) => JSON.parse(e) as WarmEntry),
      remaining: Number(remaining),
    }
    if (quota && Number(full) >= 0)
      return { ...rest, quotaFull: { count: Number(full), max: quota.slot.max } }
    const entry = parse<WarmEntry>(claimed)
    return entry ? { entry, ...rest } : rest
  }

  async takeExpiredWarm(pool: string, now: number): Promise<WarmEntry[]> {
    return strings(await this.run('TAKE_WARM', [pool, now])).map((e) => JSON.parse(e) as WarmEntry)
  }

  async drainWarm(pool: string): Promise<WarmEntry[]> {
    return strings(await this.run('TAKE_WARM', [pool, ''])).map((e) => JSON.parse(e) as WarmEntry)
  }

  async warmSize(pool: string): Promise<number> {
    return guard(this.redis.llen(`${this.prefix}warm:${pool}`))
  }

  async inUse(refIds: readonly string[], now: number): Promise<Set<string>> {
    if (refIds.length === 0) return new Set()
    const flags = await this.run('IN_USE', [now, ...refIds])
    const list = Array.isArray(flags) ? (flags as unknown[]) : []
    return new Set(refIds.filter((_, i) => list[i] === 1))
  }

  async forget(refId: string, slots: readonly string[]): Promise<void> {
    await this.run('FORGET', [refId, JSON.stringify(slots)])
  }

  async tryLock(name: string, token: string, ttlMs: number): Promise<boolean> {
    return (await guard(this.redis.set(`${this.prefix}lock:${name}`, token, 'PX', ttlMs, 'NX'))) === 'OK'
  }

  async renewLock(name: string, token: string, ttlMs: number): Promise<boolean> {
    return (await this.run('RENEW_LOCK', [token, ttlMs], [`${this.prefix}lock:${name}`])) === 1
  }

  async unlock(name: string, token: string): Promise<boolean> {
    return (await this.run('UNLOCK', [token], [`${this.prefix}lock:${name}`])) === 1
  }

  async reserveSlots(
    claims: readonly SlotClaim[],
    member: string,
    expiresAt: number,
    now: number,
  ): Promise<SlotReservation> {
    const args = claims.flatMap((c) => [c.name, c.max])
    const raw = await this.run('RESERVE_SLOTS', [member, expiresAt, now, ...args])
    const [full, count] = Array.isArray(raw) ? (raw as unknown[]) : []
    if (typeof full !== 'string') return { ok: true }
    const max = claims.find((c) => c.name === full)?.max ?? 0
    return { ok: false, full, count: Number(count), max }
  }

  async moveSlot(names: readonly string[], from: string, to: string, expiresAt: number): Promise<void> {
    if (names.length > 0) await this.run('MOVE_SLOT', [from, to, expiresAt, ...names])
  }

  async releaseSlots(names: readonly string[], member: string): Promise<void> {
    if (names.length === 0) return
    const multi = this.redis.multi()
    for (const n of names) multi.zrem(`${this.prefix}slot:${n}`, member)
    await guard(multi.exec())
  }

  async slotCount(name: string, now: number): Promise<number> {
    return guard(this.redis.zcount(`${this.prefix}slot:${name}`, `(${now}`, '+inf'))
  }

  async close(): Promise<void> {
    if (this.ownsClient) await quitRedis(this.redis)
  }
}
