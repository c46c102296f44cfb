import type { Redis } from 'ioredis'
import { AppError } from '../../errors.js'

type Handler = (message: string) => void

/** A handler's registration on a channel. */
export interface Subscription {
  /** Resolves once the channel subscription is active in Redis. */
  readonly ready: Promise<void>
  /** Removes the handler (and unsubscribes the channel when it was the last one). */
  off(): Promise<void>
}

/** Escapes Redis glob characters so a literal prefix can start a PSUBSCRIBE pattern. */
function globLiteral(text: string): string {
  return text.replace(/[*?[\]\\]/g, (c) => `\\${c}`)
}

/**
 * One pub/sub connection shared by a queue's job channels (output, results) and its consumers'
 * cancel listener. Channels are subscribed on first use and unsubscribed when their last handler leaves;
 * channels under `patternPrefix` (the per-job channels) share one PSUBSCRIBE made on first use and kept,
 * so a job's listeners cost Redis nothing (no SUBSCRIBE/UNSUBSCRIBE per job).
 */
export class Subscriber {
  private readonly handlers = new Map<string, Set<Handler>>()
  private readonly subscribed = new Map<string, Promise<void>>()
  private pattern: Promise<void> | undefined
  private readonly resubscribed = new Set<() => void>()

  constructor(
    private readonly client: Redis,
    /** Channels starting with this are served by one pattern subscription. */
    private readonly patternPrefix?: string,
  ) {
    const dispatch = (channel: string, message: string): void => {
      const hs = this.handlers.get(channel)
      if (!hs) return
      for (const h of hs) {
        try {
          h(message)
        } catch {
          // One handler's exception must not starve the others or break the connection's events.
        }
      }
    }
    // A job's last output chunk and its result published as one message, `f<result>\n<chunk message>`
    // (the `redis` driver's finish): its listeners get the two messages it stands for, chunk first.
    const deliver = (channel: string, message: string): void => {
      const nl = message[0] === 'f' && this.patternPrefix && channel.startsWith(this.patternPrefix)
      const at = nl ? message.indexOf('\n') : -1
      if (at < 0) return dispatch(channel, message)
      dispatch(channel, message.slice(at + 1))
      dispatch(channel, `d${message.slice(1, at)}`)
    }
    client.on('message', deliver)
    client.on('pmessage', (_pattern: string, channel: string, message: string) => deliver(channel, message))
    // After a reconnect ioredis says `ready` first and sends its resubscriptions after, unconfirmed:
    // a handler added then would be told the channel is live while Redis does not yet deliver it,
    // and the messages published meanwhile (a job's first output chunk) would be lost. The same
    // subscriptions sent again (a no-op for Redis, answered in order after ioredis's own) are what
    // `ready` waits for until they are confirmed.
    client.on('ready', () => {
      if (this.pattern) {
        this.pattern = undefined
        this.patternReady().then(
          () => {
            for (const listener of [...this.resubscribed]) listener()
          },
          () => undefined,
        )
      }
      for (const channel of this.subscribed.keys()) {
        if (this.patterned(channel)) continue
        const again = this.client.subscribe(channel).then(() => undefined)
        again.catch(() => undefined)
        this.subscribed.set(channel, again)
      }
    })
  }

  private patterned(channel: string): boolean {
    return this.patternPrefix !== undefined && channel.startsWith(this.patternPrefix)
  }

  /** The one pattern subscription; a failed attempt (Redis away) is not kept, so the next use retries. */
  private patternReady(): Promise<void> {
    if (!this.pattern) {
      const p = this.client.psubscribe(`${globLiteral(this.patternPrefix ?? '')}*`).then(() => undefined)
      this.pattern = p
      p.catch(() => {
        if (this.pattern === p) this.pattern = undefined
      })
    }
    return this.pattern
  }

  /**
   * Calls `listener` each time the pattern subscription is confirmed again after a reconnect: from
   * then on the job channels deliver again, and what was published while it was away is lost (a
   * waiter checks its job's stored result then). Returns the way to stop.
   */
  onResubscribed(listener: () => void): () => void {
    this.resubscribed.add(listener)
    return () => this.resubscribed.delete(listener)
  }

  /** The latest confirmation of the subscription that serves `channel`. */
  private confirmation(channel: string): Promise<void> {
    return this.patterned(channel) ? this.patternReady() : (this.subscribed.get(channel) ?? Promise.resolve())
  }

  /** Adds a handler at once; `ready` tells when Redis delivers the channel's messages. */
  add(channel: string, handler: Handler): Subscription {
    const patterned = this.patterned(channel)
    let hs = this.handlers.get(channel)
    if (!hs) {
      this.handlers.set(channel, (hs = new Set()))
      const subscribing = patterned
        ? this.patternReady()
        : this.client.subscribe(channel).then(() => undefined)
      // A caller may stop waiting (timeout) before this settles: its rejection must not go unhandled.
      subscribing.catch(() => undefined)
      this.subscribed.set(channel, subscribing)
    }
    hs.add(handler)
    const ready = this.confirmation(channel)
    return {
      ready,
      off: async () => {
        const set = this.handlers.get(channel)
        if (!set?.delete(handler) || set.size > 0) return
        this.handlers.delete(channel)
        this.subscribed.delete(channel)
        // The pattern stays: the next job's listeners need it.
        if (patterned) return
        // While Redis is away the UNSUBSCRIBE waits in the offline queue (after a pending SUBSCRIBE):
        // send it, but do not hold the caller until Redis is back.
        const unsubscribed = this.client.unsubscribe(channel).catch(() => undefined)
        if (this.client.status === 'ready') await unsubscribed
      },
    }
  }

  /**
   * Adds a handler and waits until the subscription is active; resolves with its remover. Fails fast
   * with QUEUE_UNAVAILABLE while Redis is unreachable (and after `timeoutMs` if it stops answering),
   * instead of waiting for it to come back. Channels already subscribed are restored after a reconnect;
   * a handler added to one while the connection is reconnecting waits (up to `timeoutMs`) until they are.
   */
  async on(channel: string, handler: Handler, timeoutMs = 5_000): Promise<() => Promise<void>> {
    const held = this.patterned(channel) ? this.pattern !== undefined : this.subscribed.has(channel)
    if (this.client.status !== 'ready' && !held) {
      throw new AppError(
        'QUEUE_UNAVAILABLE',
        `Cannot subscribe to job updates: Redis is unreachable (connection ${this.client.status}); retry once Redis is back.`,
        { retryable: true },
      )
    }
    const s = this.add(channel, handler)
    // A held channel on a connection that is reconnecting is delivered again only once the
    // connection is back and its resubscription confirmed: wait for that, not for the old promise.
    const live =
      this.client.status === 'ready'
        ? s.ready
        : new Promise<void>((resolve) => this.client.once('ready', resolve)).then(() =>
            this.confirmation(channel),
          )
    let timer: NodeJS.Timeout | undefined
    try {
      await Promise.race([
        live,
        new Promise<never>((_, reject) => {
          timer = setTimeout(
            () =>
              reject(
                new AppError(
                  'QUEUE_UNAVAILABLE',
                  `Redis did not confirm a subscription within ${timeoutMs} ms; retry once Redis is back.`,
                  { retryable: true },
                ),
              ),
            timeoutMs,
          )
        }),
      ])
    } catch (err) {
      await s.off()
      throw err
    } finally {
      clearTimeout(timer)
    }
    return () => s.off()
  }

  get connection(): Redis {
    return this.client
  }
}
