import type { Redis } from 'ioredis'
import type { LifecycleEventType } from './events.js'

/**
 * A lifecycle event of the service itself (not of one agent run), as `GET /v1/events` streams it:
 * today the circuit transitions of providers (`CIRCUIT_OPEN`, `CIRCUIT_HALF_OPEN`,
 * `CIRCUIT_CLOSED`). No tenant data: providers are shared by every tenant.
 */
export interface ServiceEvent {
  /** Position in the log; the SSE id a reader resumes after (`Last-Event-ID`). */
  readonly id: string
  readonly type: LifecycleEventType
  /** The source, `router` for circuits. */
  readonly runtime: string
  readonly step: number
  readonly message?: string
  readonly attributes: Readonly<Record<string, unknown>>
  /** Epoch ms. */
  readonly timestamp: number
}

/** What {@link ServiceEventLog.append} takes. */
export type ServiceEventInit = Omit<ServiceEvent, 'id'>

/**
 * The service's lifecycle events, retained (the most recent {@link SERVICE_EVENTS_RETAINED}) and
 * live: in memory for `sbx serve`, in a Redis stream for a fleet, so that `sbx api` streams what
 * any worker appended.
 */
export interface ServiceEventLog {
  append(event: ServiceEventInit): Promise<void>
  /** Retained events after `after` (all retained ones without it), then live ones, until `signal` aborts. */
  stream(after: string | undefined, signal: AbortSignal): AsyncIterable<ServiceEvent>
}

/** How many events the log keeps for readers that connect later (approximately, in Redis). */
export const SERVICE_EVENTS_RETAINED = 1_000

/** Whether `id` is a position the logs understand (`<n>` or a Redis stream id `<ms>-<n>`). */
export function isServiceEventId(id: string): boolean {
  return /^\d{1,16}(-\d{1,16})?$/.test(id)
}

/** The log of one process (embedded mode). */
export class MemoryServiceEventLog implements ServiceEventLog {
  private readonly events: ServiceEvent[] = []
  private seq = 0
  private readonly listeners = new Set<() => void>()

  append(event: ServiceEventInit): Promise<void> {
    this.events.push({ ...event, id: String(++this.seq) })
    if (this.events.length > SERVICE_EVENTS_RETAINED) this.events.shift()
    for (const l of this.listeners) l()
    return Promise.resolve()
  }

  async *stream(after: string | undefined, signal: AbortSignal): AsyncIterable<ServiceEvent> {
    let last = after === undefined ? 0 : Number(after.split('-')[0])
    while (!signal.aborted) {
      const fresh = this.events.filter((e) => Number(e.id) > last)
      for (const e of fresh) {
        last = Number(e.id)
        yield e
      }
      if (fresh.length > 0) continue
      await new Promise<void>((resolve) => {
        const done = (): void => {
          this.listeners.delete(done)
          signal.removeEventListener('abort', done)
          resolve()
        }
        this.listeners.add(done)
        signal.addEventListener('abort', done, { once: true })
      })
    }
  }
}

/** The fleet's log: one Redis stream, `<prefix>:lifecycle`, capped near {@link SERVICE_EVENTS_RETAINED}. */
export class RedisServiceEventLog implements ServiceEventLog {
  private readonly key: string

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.key = `${prefix}:lifecycle`
  }

  async append(event: ServiceEventInit): Promise<void> {
    const max = String(SERVICE_EVENTS_RETAINED)
    await this.redis.xadd(this.key, 'MAXLEN', '~', max, '*', 'e', JSON.stringify(event))
  }

  async *stream(after: string | undefined, signal: AbortSignal): AsyncIterable<ServiceEvent> {
    // A blocking read holds its connection: each reader gets its own, closed when it stops.
    const reader = this.redis.duplicate()
    reader.on('error', () => undefined)
    const stop = (): void => reader.disconnect()
    signal.addEventListener('abort', stop, { once: true })
    try {
      let last = after ?? '0'
      while (!signal.aborted) {
        let batch: [string, [string, string[]][]][] | null
        try {
          batch = await reader.xread('COUNT', 100, 'BLOCK', 5_000, 'STREAMS', this.key, last)
        } catch (err) {
          if (signal.aborted) return
          throw err
        }
        for (const [, entries] of batch ?? [])
          for (const [id, fields] of entries) {
            last = id
            const raw = fields[1]
            if (raw === undefined) continue
            yield { ...(JSON.parse(raw) as ServiceEventInit), id }
          }
      }
    } finally {
      signal.removeEventListener('abort', stop)
      reader.disconnect()
    }
  }
}
