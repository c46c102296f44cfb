import type { Redis } from 'ioredis'

type Handler = (message: string) => void

/**
 * One pub/sub connection shared by a queue's output subscriptions and its consumers' cancel listener.
 * Channels are subscribed on first use and unsubscribed when their last handler leaves.
 */
export class Subscriber {
  private readonly handlers = new Map<string, Set<Handler>>()
  private readonly ready = new Map<string, Promise<unknown>>()

  constructor(private readonly client: Redis) {
    client.on('message', (channel: string, message: string) => {
      const hs = this.handlers.get(channel)
      if (hs) for (const h of hs) h(message)
    })
  }

  /** Adds a handler; resolves once the channel subscription is active in Redis. */
  async on(channel: string, handler: Handler): Promise<() => Promise<void>> {
    let hs = this.handlers.get(channel)
    if (!hs) {
      this.handlers.set(channel, (hs = new Set()))
      this.ready.set(channel, this.client.subscribe(channel))
    }
    hs.add(handler)
    await this.ready.get(channel)
    return async () => {
      const set = this.handlers.get(channel)
      if (!set?.delete(handler) || set.size > 0) return
      this.handlers.delete(channel)
      this.ready.delete(channel)
      if (this.client.status === 'ready') await this.client.unsubscribe(channel).catch(() => undefined)
    }
  }

  get connection(): Redis {
    return this.client
  }
}
