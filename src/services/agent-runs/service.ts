import { AppError } from '../../errors.js'
import type { AgentRunEvent, AgentRunInput, AgentRunRecord, AgentRunStore } from './types.js'
import { isFinal } from './types.js'

/** Hands stored runs to whoever executes them: the agent-run job queue (`sbx-agent-runs`) of the fleet's driver. */
export interface AgentRunDispatcher {
  /** Queues the stored run (once: a second dispatch of its id is a no-op). */
  dispatch(run: AgentRunRecord): Promise<void>
  /** Cancels the run wherever it is: a queued one is skipped, a running one has its signal aborted. */
  cancel(id: string): Promise<void>
  /** Why a queued run may not start (fleet: no agent-run worker connected), or undefined. */
  queuedWarning?(): Promise<string | undefined>
}

/** A live item of a run's event stream. */
export type AgentRunStreamItem =
  { kind: 'event'; event: AgentRunEvent } | { kind: 'end'; run: AgentRunRecord }

/** Tenant-scoped agent runs for the HTTP API: another tenant's run ids are unknown. */
export class AgentRunService {
  constructor(
    private readonly store: AgentRunStore,
    private readonly dispatcher: AgentRunDispatcher,
    /** Validates a request before it is queued (the model exists and has its key). */
    private readonly validate: (input: AgentRunInput) => void,
    /** Called before a run is queued (the runtime records the run's sandbox session). */
    private readonly onSubmit: (tenant: string, input: AgentRunInput) => Promise<void> = async () => {},
  ) {}

  async submit(tenant: string, input: AgentRunInput): Promise<AgentRunRecord> {
    this.validate(input)
    await this.onSubmit(tenant, input)
    const record: AgentRunRecord = {
      id: `run-${crypto.randomUUID()}`,
      tenant,
      state: 'queued',
      request: input,
      createdAt: Date.now(),
    }
    await this.store.create(record)
    await this.dispatcher.dispatch(record)
    return this.withWarning(record)
  }

  async get(tenant: string, id: string): Promise<AgentRunRecord | undefined> {
    const r = await this.store.get(id)
    return r && r.tenant === tenant ? this.withWarning(r) : undefined
  }

  /** A queued run's view says when nothing will pick it up (not stored: it holds while it is true). */
  private async withWarning(r: AgentRunRecord): Promise<AgentRunRecord> {
    if (r.state !== 'queued' || !this.dispatcher.queuedWarning) return r
    const warning = await this.dispatcher.queuedWarning()
    return warning ? { ...r, warning } : r
  }

  async cancel(tenant: string, id: string): Promise<AgentRunRecord | undefined> {
    const r = await this.get(tenant, id)
    if (!r) return undefined
    if (isFinal(r.state)) return r
    if (r.state === 'queued') {
      await this.store.update(id, {
        state: 'cancelled',
        error: { code: 'JOB_CANCELLED', message: 'cancelled before it started' },
        finishedAt: Date.now(),
      })
    }
    await this.dispatcher.cancel(id)
    return this.get(tenant, id)
  }

  /** Lifecycle events so far, then live ones, then the final record. */
  async stream(
    tenant: string,
    id: string,
    signal: AbortSignal,
  ): Promise<AsyncIterable<AgentRunStreamItem> | undefined> {
    if (!(await this.get(tenant, id))) return undefined
    const store = this.store
    return {
      async *[Symbol.asyncIterator]() {
        let wake: (() => void) | undefined
        let dirty = true
        const off = await store.subscribe(id, () => {
          dirty = true
          wake?.()
        })
        const onAbort = (): void => wake?.()
        signal.addEventListener('abort', onAbort)
        let seq = 0
        try {
          while (!signal.aborted) {
            if (!dirty) await new Promise<void>((r) => (wake = r))
            dirty = false
            for (const event of await store.events(id, seq)) {
              seq = event.seq + 1
              yield { kind: 'event', event } as const
            }
            const run = await store.get(id)
            if (!run) throw new AppError('NOT_FOUND', `run ${id} expired`)
            if (isFinal(run.state)) {
              for (const event of await store.events(id, seq)) yield { kind: 'event', event } as const
              yield { kind: 'end', run } as const
              return
            }
          }
        } finally {
          signal.removeEventListener('abort', onAbort)
          await off()
        }
      },
    }
  }
}
