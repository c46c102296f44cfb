import type { Redis } from 'ioredis'

type Handler = (message: string) => void

/** A handler's registration on a channel. */
export interface Subscription {
  /** Resolves once the channel subscription is active in Redis. */
  readonly ready: Promise<void>
  /** Removes the handler (and unsubscribes the channel when it was the last one). */
  off(): Promise<void>
}

/**
 * One pub/sub connection shared by a queue's job channels (output, results) and its consumers'
 * cancel listener. Channels are subscribed on first use and unsubscribed when their last handler leaves.
 */
export class Subscriber {
  private readonly handlers = new Map<string, Set<Handler>>()
  private readonly subscribed = new Map<string, Promise<void>>()

  constructor(private readonly client: Redis) {
    client.on('message', (channel: string, message: string) => {
      const hs = this.handlers.get(channel)
      if (!hs) return
      for (const h of hs) {
        try {
          h(message)
        } catch {
          // One handler's exception must not starve the others or break the connection's events.
        }
      }
    })
  }

  /** Adds a handler at once; `ready` tells when Redis delivers the channel's messages. */
  add(channel: string, handler: Handler): Subscription {
    let hs = this.handlers.get(channel)
    if (!hs) {
      this.handlers.set(channel, (hs = new Set()))
      this.subscribed.set(
        channel,
        this.client.subscribe(channel).then(() => undefined),
      )
    }
    hs.add(handler)
    const ready = this.subscribed.get(channel) ?? Promise.resolve()
    return {
      ready,
      off: async () => {
        const set = this.handlers.get(channel)
        if (!set?.delete(handler) || set.size > 0) return
        this.handlers.delete(channel)
        this.subscribed.delete(channel)
        if (this.client.status === 'ready') await this.client.unsubscribe(channel).catch(() => undefined)
      },
    }
  }

  /** Adds a handler and waits until the subscription is active; resolves with its remover. */
  async on(channel: string, handler: Handler): Promise<() => Promise<void>> {
    const s = this.add(channel, handler)
    await s.ready
    return () => s.off()
  }

  get connection(): Redis {
    return this.client
  }
}
