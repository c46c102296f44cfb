import type { Redis } from 'ioredis'
import type { AgentRunEvent, AgentRunRecord, AgentRunStore } from './types.js'

/**
 * {@link AgentRunStore} on Redis: record `<p>agent:run:<id>` (JSON), events list `<p>agent:events:<id>`,
 * pub/sub `<p>agent:changed:<id>`. Keys expire `retentionMs` after the run ends. (Cancel requests go
 * through the agent-run job queue, as exec jobs' do.)
 */
export class RedisAgentRunStore implements AgentRunStore {
  private readonly sub: Redis
  private readonly listeners = new Map<string, Set<() => void>>()

  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly retentionMs = 3_600_000,
  ) {
    this.sub = redis.duplicate()
    this.sub.on('message', (channel: string) => {
      for (const l of this.listeners.get(channel) ?? []) l()
    })
    this.sub.on('error', () => undefined)
  }

  private k(s: string): string {
    return `${this.prefix}${s}`
  }

  async create(record: AgentRunRecord): Promise<void> {
    await this.redis.set(this.k(`agent:run:${record.id}`), JSON.stringify(record), 'PX', 7 * 86_400_000)
  }
  async get(id: string): Promise<AgentRunRecord | undefined> {
    const raw = await this.redis.get(this.k(`agent:run:${id}`))
    return raw ? (JSON.parse(raw) as AgentRunRecord) : undefined
  }
  async update(id: string, patch: Partial<AgentRunRecord>): Promise<void> {
    const r = await this.get(id)
    if (!r) return
    const next = { ...r, ...patch }
    const ttl = next.finishedAt ? this.retentionMs : 7 * 86_400_000
    await this.redis
      .multi()
      .set(this.k(`agent:run:${id}`), JSON.stringify(next), 'PX', ttl)
      .pexpire(this.k(`agent:events:${id}`), ttl)
      .publish(this.k(`agent:changed:${id}`), '1')
      .exec()
  }
  async appendEvent(id: string, event: Omit<AgentRunEvent, 'seq'>): Promise<void> {
    const key = this.k(`agent:events:${id}`)
    const len = await this.redis.llen(key)
    await this.redis
      .multi()
      .rpush(key, JSON.stringify({ ...event, seq: len }))
      .publish(this.k(`agent:changed:${id}`), '1')
      .exec()
  }
  async events(id: string, fromSeq: number): Promise<AgentRunEvent[]> {
    const raw = await this.redis.lrange(this.k(`agent:events:${id}`), fromSeq, -1)
    return raw.map((r, i) => ({ ...(JSON.parse(r) as AgentRunEvent), seq: fromSeq + i }))
  }
  async subscribe(id: string, listener: () => void): Promise<() => Promise<void>> {
    const channel = this.k(`agent:changed:${id}`)
    let set = this.listeners.get(channel)
    if (!set) {
      set = new Set()
      this.listeners.set(channel, set)
      await this.sub.subscribe(channel)
    }
    set.add(listener)
    return async () => {
      set.delete(listener)
      if (set.size === 0) {
        this.listeners.delete(channel)
        await this.sub.unsubscribe(channel).catch(() => undefined)
      }
    }
  }
  async close(): Promise<void> {
    await this.sub.quit().catch(() => this.sub.disconnect())
  }
}
