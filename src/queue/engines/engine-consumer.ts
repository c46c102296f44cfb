import { AppError } from '../../errors.js'
import { defaultWorkerId } from '../run-job.js'
import type { ConsumeOptions, Consumer, JobProcessor, JobQueue } from '../types.js'
import type { EngineDirectory } from './engine-directory.js'

/** What a worker reports of its engine's load each heartbeat. */
export interface EngineLoad {
  readonly running: number
  readonly reservedBytes: number
}

/** The engine beside a worker, as the engine queue needs it. */
export interface EngineSide {
  /** `providers.docker.engineId`, else the engine's own ID (`docker info`). */
  readonly engineId: string
  /** Pings the engine. */
  health(): Promise<{ ok: boolean; reason?: string }>
  /** Sandboxes of this scope on the engine, and their memory limits summed (bytes). */
  load(): Promise<EngineLoad>
  /**
   * Memory the engine's sandboxes may reserve (bytes) and whether it was configured (a bound) or is
   * the engine's own memory (a weight only); undefined: placement ignores memory.
   */
  memory(): Promise<{ bytes: number; strict: boolean } | undefined>
  /** The engine's sandbox cap (`providers.docker.maxSandboxes`). */
  readonly cap?: number
  /** Heartbeat period (ms): an engine is down after `engineStaleMs` without one. @default 1000 */
  readonly heartbeatMs?: number
  /** The URL of this worker's internal gateway (`fleet.gateway`), reported with each heartbeat. */
  readonly gatewayUrl?: string
}

interface Deps {
  readonly engines: EngineDirectory
  readonly lane: (engineId: string) => Promise<JobQueue>
  readonly engine: EngineSide
}

/** Running commands of an engine that stopped answering get this long to end before their jobs are handed back (ms). */
const ENGINE_DOWN_DRAIN_MS = 2_000
/** A ping that takes longer than this counts as failed (ms). */
const PING_TIMEOUT_MS = 2_000

/**
 * A worker's consumption over the engine lanes. Each heartbeat it pings its engine and records the
 * answer and the engine's load ({@link EngineDirectory.beat}); while the engine answers it consumes
 * that engine's lane. When the engine stops answering, the worker stops taking jobs there (running
 * ones get a moment to end, the rest are handed back: fencing decides) and the engine counts as down.
 * A worker whose engine is live adopts the lane of each engine that is down (one adopter per lane,
 * by a Redis lock), so accepted jobs there still run: on this engine, where a session bound on the
 * lost engine rebinds with `sandboxReplaced` (files lost).
 */
export async function startEngineConsumer(
  deps: Deps,
  processor: JobProcessor,
  opts: ConsumeOptions,
): Promise<Consumer> {
  const { engines, engine } = deps
  const workerId = opts.workerId ?? defaultWorkerId()
  const heartbeatMs = engine.heartbeatMs ?? 1_000
  const report = (err: unknown, context: string): void => opts.onError?.(err, context)
  let own: Promise<Consumer> | undefined
  const adopted = new Map<string, Promise<Consumer>>()
  const started = new Set<Consumer>()
  let closing = false
  const closeConsumer = (c: Promise<Consumer>, deadlineMs: number): Promise<void> =>
    c.then(
      (x) => x.close({ deadlineMs }),
      () => undefined,
    )
  const start = (engineId: string, id: string): Promise<Consumer> => {
    const c = deps.lane(engineId).then(async (q) => {
      const consumer = await q.consume(processor, { ...opts, workerId: id, handBackOn: engineUnreachable })
      started.add(consumer)
      return {
        workerId: consumer.workerId,
        get activeCount() {
          return consumer.activeCount
        },
        close: (o?: { deadlineMs?: number }) => consumer.close(o).finally(() => started.delete(consumer)),
      }
    })
    c.catch((err: unknown) => report(err, `consuming the lane of engine ${engineId}`))
    return c
  }
  const drop = (engineId: string): void => {
    const c = adopted.get(engineId)
    if (!c) return
    adopted.delete(engineId)
    void closeConsumer(c, 30_000)
      .then(() => engines.release(engineId, workerId))
      .catch((err: unknown) => report(err, `giving up the lane of engine ${engineId}`))
  }

  const tick = async (): Promise<void> => {
    const h = await withTimeout(engine.health(), PING_TIMEOUT_MS).catch((err: unknown) => ({
      ok: false,
      reason: err instanceof Error ? err.message : String(err),
    }))
    const load = h.ok ? await engine.load().catch(() => undefined) : undefined
    const memory = h.ok ? await engine.memory().catch(() => undefined) : undefined
    await engines.beat(engine.engineId, {
      seenAt: Date.now(),
      healthy: h.ok,
      running: load?.running ?? 0,
      ...(engine.cap === undefined ? {} : { cap: engine.cap }),
      ...(memory === undefined ? {} : { memoryBytes: memory.bytes, memoryStrict: memory.strict }),
      ...(load === undefined ? {} : { reservedBytes: load.reservedBytes }),
      workerId,
      ...(h.reason === undefined ? {} : { reason: h.reason }),
      ...(engine.gatewayUrl === undefined ? {} : { gatewayUrl: engine.gatewayUrl }),
    })
    if (closing) return
    if (h.ok && !own) {
      own = start(engine.engineId, workerId)
      own.catch(() => (own = undefined))
    } else if (!h.ok && own) {
      report(
        new Error(h.reason ?? 'no answer'),
        `engine ${engine.engineId} stopped answering: not taking its jobs`,
      )
      const c = own
      own = undefined
      void closeConsumer(c, ENGINE_DOWN_DRAIN_MS)
    }
    if (!h.ok) {
      for (const id of [...adopted.keys()]) drop(id)
      return
    }
    for (const e of await engines.list()) {
      if (e.id === engine.engineId) continue
      if (e.state === 'live') {
        drop(e.id)
        continue
      }
      if (!(await engines.adopt(e.id, workerId, heartbeatMs * 5))) {
        drop(e.id)
        continue
      }
      if (!adopted.has(e.id)) {
        const c = start(e.id, `${workerId}@${e.id}`)
        c.catch(() => adopted.delete(e.id))
        adopted.set(e.id, c)
      }
    }
  }

  let running: Promise<void> | undefined
  const beat = (): void => {
    if (running) return
    running = tick()
      .catch((err: unknown) => report(err, `engine heartbeat of ${engine.engineId}`))
      .finally(() => (running = undefined))
  }
  await tick().catch((err: unknown) => report(err, `engine heartbeat of ${engine.engineId}`))
  const timer = setInterval(beat, heartbeatMs)
  timer.unref()

  let closed: Promise<void> | undefined
  return {
    workerId,
    get activeCount() {
      return [...started].reduce((n, c) => n + c.activeCount, 0)
    },
    close: ({ deadlineMs = 30_000 } = {}) =>
      (closed ??= (async () => {
        closing = true
        clearInterval(timer)
        await running
        const all = [...(own ? [own] : []), ...adopted.values()]
        await Promise.all(all.map((c) => closeConsumer(c, deadlineMs)))
        await Promise.all(
          [...adopted.keys()].map((id) => engines.release(id, workerId).catch(() => undefined)),
        )
        adopted.clear()
        // API processes stop sending calls here now, not once the entry is stale.
        if (engine.gatewayUrl !== undefined)
          await engines.dropGateway(engine.engineId, engine.gatewayUrl).catch(() => undefined)
      })()),
  }
}

/** Errors of the engine's socket: nobody answers there. */
const SOCKET_ERRORS = new Set(['ECONNREFUSED', 'ENOENT', 'ECONNRESET', 'EPIPE'])

/**
 * Whether an error says the engine itself could not be reached (`UNAVAILABLE` from the provider, also
 * as the cause of a failed create): the job is handed back, to run beside a live engine.
 */
export function engineUnreachable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; depth < 4; depth++) {
    if (!(e instanceof AppError))
      return SOCKET_ERRORS.has(String((e as { code?: unknown } | undefined)?.code))
    if (e.code === 'UNAVAILABLE') return true
    if (e.code !== 'SANDBOX_CREATE_FAILED' && e.code !== 'SANDBOX_LOST') return false
    e = e.cause
  }
  return false
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined
  return Promise.race([
    p,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms)
    }),
  ]).finally(() => clearTimeout(timer))
}
