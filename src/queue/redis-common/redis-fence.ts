import type { Redis } from 'ioredis'
import { JobResultSchema, FenceRecordSchema } from '../schemas.js'
import type { QueueJob, JobResult, LoggedChunk, OutputChunk } from '../schemas.js'
import { OUTPUT_LOG_LINGER_MS, parseLoggedMessage } from '../output-log.js'
import type { FenceOutcome, JobFence } from '../types.js'
import { ChunkPublisher } from './chunk-publisher.js'

/*
 * The Redis side of fenced execution (see ../fence.ts for the model). Each decision is one Lua script,
 * so check-and-write is atomic across the fleet and costs one round trip. A job's keys share a hash
 * tag, so the scripts also run on a Redis Cluster.
 */

// KEYS: done cancel fence out err. ARGV: mode (inspect|begin) idempotent(0|1) fenceJson ttlMs.
// The three records are read with one MGET (they share the job's hash tag).
const BEGIN = `
local r = redis.call('MGET', KEYS[1], KEYS[2], KEYS[3])
local done, cancel, prev = r[1], r[2], r[3]
if done then return {'done', done} end
if cancel then return {'cancelled', cancel} end
if prev and ARGV[2] == '0' then
  return {'fenced', prev, redis.call('GET', KEYS[4]) or '', redis.call('GET', KEYS[5]) or ''}
end
if ARGV[1] == 'begin' then
  redis.call('SET', KEYS[3], ARGV[3], 'PX', ARGV[4])
  if prev then redis.call('DEL', KEYS[4], KEYS[5]) end
end
return {'run', prev or ''}
`

// KEYS: done log logmeta. ARGV: resultJson ttlMs channel logLingerMs. Returns the stored result when
// another attempt finished first. The first result is also published ('d' + result) on the job's
// channel: how waiters learn it (before BullMQ's own completion round trip; nothing reads BullMQ's
// event stream); the retained live output stays a little longer for readers resuming.
const FINISH = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('PUBLISH', ARGV[3], 'd' .. ARGV[1])
  redis.call('PEXPIRE', KEYS[2], ARGV[4])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  return false
end
return redis.call('GET', KEYS[1])
`

// KEYS: done cancel. ARGV: reason ttlMs channel message
const CANCEL = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2])
redis.call('PUBLISH', ARGV[3], ARGV[4])
return 1
`

/**
 * Lua that numbers a chunk, publishes it and keeps it in the job's log (oldest entries go past the log
 * cap), with the log (`logKey`) and its counters (`metaKey`: offset, size); without a `channel` the
 * caller publishes `message` itself. Leaves `offset`,
 * `message` (the published form, '<kind><offset>\n<data>') and `logNew`/`metaNew` (the key was
 * created by this chunk, so it has no TTL yet) as locals. Shared by the chunk script and the `redis`
 * driver's finish (a job's last chunk rides with its result).
 */
export function logChunkLua(
  logKey: string,
  metaKey: string,
  channel: string | undefined,
  kind: string,
  data: string,
  logCapBytes: string,
): string {
  return `
local offset = redis.call('HINCRBY', ${metaKey}, 'offset', string.len(${data}))
local message = ${kind} .. offset .. '\\n' .. ${data}
${channel === undefined ? '' : `redis.call('PUBLISH', ${channel}, message)`}
local logNew = redis.call('RPUSH', ${logKey}, message) == 1
local metaNew = offset == string.len(${data})
local size = redis.call('HINCRBY', ${metaKey}, 'size', string.len(message))
while size > tonumber(${logCapBytes}) do
  local old = redis.call('LPOP', ${logKey})
  if not old then break end
  size = redis.call('HINCRBY', ${metaKey}, 'size', -string.len(old))
end
`
}

// KEYS: tail log logmeta. ARGV: channel kind(o|e) data capBytes ttlMs logCapBytes refresh(0|1). The
// chunk is numbered (its job's output bytes up to its end, across attempts), published as
// '<kind><offset>\n<data>' and kept in the log, whose oldest entries go past logCapBytes. TTLs are set
// when a key is created and when the caller says so (`refresh`: a job's first chunk here, then every
// half retention), not on every chunk: a key always lives at least as long as the job needs it.
const CHUNK = `${logChunkLua('KEYS[2]', 'KEYS[3]', 'ARGV[1]', 'ARGV[2]', 'ARGV[3]', 'ARGV[6]')}
local refresh = ARGV[7] == '1'
if refresh or logNew then redis.call('PEXPIRE', KEYS[2], ARGV[5]) end
if refresh or metaNew then redis.call('PEXPIRE', KEYS[3], ARGV[5]) end
local tail = redis.call('STRLEN', KEYS[1])
if tail == 0 then
  redis.call('SET', KEYS[1], ARGV[3], 'PX', ARGV[5])
elseif tail < tonumber(ARGV[4]) then
  redis.call('APPEND', KEYS[1], ARGV[3])
  if refresh then redis.call('PEXPIRE', KEYS[1], ARGV[5]) end
end
return 1
`

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>

/** Jobs whose TTL refresh time a process remembers at most (past it, every chunk refreshes). */
const TTL_MEMORY_MAX = 10_000

interface FenceCommands {
  sbxFenceBegin: ScriptFn
  sbxFenceFinish: ScriptFn
  sbxFenceCancel: ScriptFn
  sbxFenceChunk: ScriptFn
}

function defineScripts(client: Redis): FenceCommands {
  client.defineCommand('sbxFenceBegin', { lua: BEGIN, numberOfKeys: 5 })
  client.defineCommand('sbxFenceFinish', { lua: FINISH, numberOfKeys: 3 })
  client.defineCommand('sbxFenceCancel', { lua: CANCEL, numberOfKeys: 2 })
  client.defineCommand('sbxFenceChunk', { lua: CHUNK, numberOfKeys: 3 })
  // defineCommand adds these methods at runtime (ioredis' documented way to register Lua scripts).
  return client as unknown as FenceCommands
}

/** Key and channel names of one queue's fence records. */
export class FenceKeys {
  constructor(readonly base: string) {}
  job(jobId: string): [done: string, cancel: string, fence: string, out: string, err: string] {
    const k = `${this.base}:{${jobId}}`
    return [`${k}:done`, `${k}:cancel`, `${k}:fence`, `${k}:out`, `${k}:err`]
  }
  /** Retained numbered live output of one job (a list) and its counters (a hash: offset, size). */
  log(jobId: string): [log: string, meta: string] {
    const k = `${this.base}:{${jobId}}`
    return [`${k}:log`, `${k}:logmeta`]
  }
  /**
   * Live output of one job: messages are `o<offset>\n<data>` (stdout) or `e<offset>\n<data>`
   * (stderr), see output-log.ts; `d<resultJson>` once it finished.
   */
  jobChannel(jobId: string): string {
    return `${this.jobChannelPrefix}${jobId}`
  }
  /** What every {@link jobChannel} starts with (one pattern subscription covers them all). */
  get jobChannelPrefix(): string {
    return `${this.base}:job:`
  }
  /** Cancel broadcast to every consumer: messages are `<jobId>\n<reason>`. */
  get cancelChannel(): string {
    return `${this.base}:cancel`
  }
}

/** Options of {@link RedisFenceStore}. */
export interface RedisFenceStoreOptions {
  /** How long records are kept (ms). */
  retentionMs: number
  /** Live output kept per stream for interrupted reports (bytes). */
  tailCapBytes: number
  /** Live output retained per job for resuming readers (bytes). */
  logCapBytes: number
}

/** Fence records, cancel requests and live output of one queue, in Redis. */
export class RedisFenceStore {
  private readonly cmd: FenceCommands

  constructor(
    private readonly client: Redis,
    readonly keys: FenceKeys,
    private readonly opts: RedisFenceStoreOptions,
  ) {
    this.cmd = defineScripts(client)
  }

  /**
   * The fence of one delivery of a job. With `pipelinedFinish`, `finish` sends the result record
   * without waiting for Redis and returns the caller's result: for BullMQ consumers, whose completion
   * is already guarded by the job lock (a stale attempt's moveToFinished fails), this takes a round
   * trip off every job while the record still lands before the job is marked completed.
   */
  fence(
    job: QueueJob,
    attempt: number,
    workerId: string,
    opts: { pipelinedFinish?: boolean } = {},
  ): JobFence<unknown> {
    const keys = this.keys.job(job.jobId)
    const idem = job.idempotent ? '1' : '0'
    const ttl = this.opts.retentionMs
    const channel = this.keys.jobChannel(job.jobId)
    const decide = async (mode: 'inspect' | 'begin', sandboxId?: string): Promise<FenceOutcome<unknown>> => {
      const record = JSON.stringify({
        attempt,
        workerId,
        startedAt: Date.now(),
        ...(sandboxId ? { sandboxId } : {}),
      })
      const reply = (await this.cmd.sbxFenceBegin(...keys, mode, idem, record, ttl)) as string[]
      return parseOutcome(reply)
    }
    return {
      inspect: () => decide('inspect'),
      begin: (start) => decide('begin', start.sandboxId),
      finish: async (result) => {
        const args = [
          keys[0],
          ...this.keys.log(job.jobId),
          JSON.stringify(result),
          ttl,
          channel,
          OUTPUT_LOG_LINGER_MS,
        ]
        this.endOutput(job.jobId)
        if (opts.pipelinedFinish) {
          this.cmd.sbxFenceFinish(...args).catch(() => undefined)
          return result
        }
        const existing = (await this.cmd.sbxFenceFinish(...args)) as string | null
        return existing === null ? result : JobResultSchema.parse(JSON.parse(existing))
      },
    }
  }

  /** Records a cancel request (unless the job finished) and broadcasts it to every consumer. */
  async requestCancel(jobId: string, reason: string): Promise<void> {
    const [done, cancel] = this.keys.job(jobId)
    await this.cmd.sbxFenceCancel(
      done,
      cancel,
      reason,
      this.opts.retentionMs,
      this.keys.cancelChannel,
      `${jobId}\n${reason}`,
    )
  }

  /**
   * Numbers a live chunk, publishes it, retains it in the job's log and appends it to the bounded
   * tail. Returns at once; the job's chunks are written in order, and one that Redis cannot take now
   * (reconnecting) is tried again before the next ({@link ChunkPublisher}).
   */
  publishChunk(jobId: string, chunk: OutputChunk): void {
    this.chunks.publish(jobId, chunk)
  }

  /**
   * Whether a chunk of the job may go out with a script other than the chunk script (the `redis`
   * driver's finish) and stay in order: none of the job's chunks waits to be sent again. Chunks on
   * their way are ahead of it on the same connection.
   */
  mayCarryChunk(jobId: string): boolean {
    return this.chunks.inOrder(jobId)
  }

  /**
   * Forgets the job's output bookkeeping once its result is stored (its output keys linger on the
   * finish's TTL): called by the finishes.
   */
  endOutput(jobId: string): void {
    this.ttlSetAt.delete(jobId)
  }

  private readonly chunks = new ChunkPublisher((jobId, chunk) => this.sendChunk(jobId, chunk))

  /**
   * When this process last set the TTLs of each job's output keys (epoch ms): a job's first chunk
   * here sets them, then one chunk every half retention (a job may run longer than the retention),
   * instead of every chunk. Keys a chunk creates get theirs in the script.
   */
  private readonly ttlSetAt = new Map<string, number>()

  private ttlRefreshDue(jobId: string): boolean {
    const now = Date.now()
    const at = this.ttlSetAt.get(jobId)
    if (at !== undefined && now - at < this.opts.retentionMs / 2) return false
    // Jobs that ended elsewhere (handed back) are not finished here: bound what they leave.
    if (at === undefined && this.ttlSetAt.size >= TTL_MEMORY_MAX) {
      for (const [id, t] of this.ttlSetAt) if (now - t >= this.opts.retentionMs / 2) this.ttlSetAt.delete(id)
      if (this.ttlSetAt.size >= TTL_MEMORY_MAX) return true
    }
    this.ttlSetAt.set(jobId, now)
    return true
  }

  private sendChunk(jobId: string, chunk: OutputChunk): Promise<unknown> {
    const [, , , out, err] = this.keys.job(jobId)
    const s = chunk.stream === 'stdout' ? 'o' : 'e'
    const refresh = this.ttlRefreshDue(jobId)
    const sent = this.cmd.sbxFenceChunk(
      s === 'o' ? out : err,
      ...this.keys.log(jobId),
      this.keys.jobChannel(jobId),
      s,
      chunk.data,
      this.opts.tailCapBytes,
      this.opts.retentionMs,
      this.opts.logCapBytes,
      refresh ? '1' : '0',
    )
    // A refresh that did not land is due again with the chunk's retry.
    return refresh
      ? sent.catch((e: unknown) => {
          this.ttlSetAt.delete(jobId)
          throw e
        })
      : sent
  }

  /** The job's retained live output, oldest first. */
  async readLog(jobId: string): Promise<LoggedChunk[]> {
    const entries = await this.client.lrange(this.keys.log(jobId)[0], 0, -1)
    return entries.map(parseLoggedMessage).filter((c): c is LoggedChunk => c !== undefined)
  }

  /** The stored result of a job, if any. */
  async result(jobId: string): Promise<JobResult | undefined> {
    const raw = await this.client.get(this.keys.job(jobId)[0])
    return raw === null ? undefined : JobResultSchema.parse(JSON.parse(raw))
  }
}

function parseOutcome(reply: string[]): FenceOutcome<unknown> {
  const [kind, a = '', b = '', c = ''] = reply
  switch (kind) {
    case 'done':
      return { kind: 'done', result: JobResultSchema.parse(JSON.parse(a)) }
    case 'cancelled':
      return { kind: 'cancelled', reason: a }
    case 'fenced':
      return { kind: 'fenced', previous: FenceRecordSchema.parse(JSON.parse(a)), stdout: b, stderr: c }
    case 'run':
      return a ? { kind: 'run', previous: FenceRecordSchema.parse(JSON.parse(a)) } : { kind: 'run' }
    case undefined:
    default:
      throw new Error(`unexpected fence script reply: ${String(kind)}`)
  }
}
