import { EventEmitter } from 'node:events'
import type { AgentRunEvent, AgentRunRecord, AgentRunStore } from './types.js'

/** In-process {@link AgentRunStore} (embedded mode). Finished runs are kept for `retentionMs`. */
export class MemoryAgentRunStore implements AgentRunStore {
  private readonly records = new Map<string, AgentRunRecord>()
  private readonly eventLog = new Map<string, AgentRunEvent[]>()
  private readonly bus = new EventEmitter().setMaxListeners(0)

  constructor(private readonly retentionMs = 3_600_000) {}

  async create(record: AgentRunRecord): Promise<void> {
    this.records.set(record.id, { ...record })
    this.eventLog.set(record.id, [])
  }
  async get(id: string): Promise<AgentRunRecord | undefined> {
    const r = this.records.get(id)
    return r ? structuredClone(r) : undefined
  }
  async update(id: string, patch: Partial<AgentRunRecord>): Promise<void> {
    const r = this.records.get(id)
    if (!r) return
    Object.assign(r, patch)
    this.bus.emit(`run:${id}`)
    if (r.finishedAt) {
      const t = setTimeout(() => (this.records.delete(id), this.eventLog.delete(id)), this.retentionMs)
      t.unref()
    }
  }
  async appendEvent(id: string, event: Omit<AgentRunEvent, 'seq'>): Promise<void> {
    const log = this.eventLog.get(id)
    if (!log) return
    log.push({ ...event, seq: log.length })
    this.bus.emit(`run:${id}`)
  }
  async events(id: string, fromSeq: number): Promise<AgentRunEvent[]> {
    return (this.eventLog.get(id) ?? []).slice(fromSeq)
  }
  async subscribe(id: string, listener: () => void): Promise<() => Promise<void>> {
    this.bus.on(`run:${id}`, listener)
    return async () => void this.bus.off(`run:${id}`, listener)
  }
  async close(): Promise<void> {
    this.bus.removeAllListeners()
  }
}
