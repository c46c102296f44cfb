import type { LifecycleEvent, LifecycleEventType, LifecycleHook } from './events.js'

/** What {@link LifecycleDispatcher.emit} takes: the event without its timestamp and with optional attributes. */
export type LifecycleEventInit = Omit<LifecycleEvent, 'timestamp' | 'attributes'> & {
  attributes?: Readonly<Record<string, unknown>>
}

/**
 * Calls hooks in registration order with record-and-continue semantics: a hook that throws (or
 * rejects) is caught, an ERROR event describing it is published to the hooks, and dispatch goes on.
 * A hook failing on an ERROR event is recorded only (never recursively).
 */
export class LifecycleDispatcher {
  private readonly hooks: LifecycleHook[]
  /** Hook failures seen so far (most recent last, bounded). */
  readonly failures: { hook: string; type: LifecycleEventType; error: unknown }[] = []

  constructor(hooks: readonly LifecycleHook[] = []) {
    this.hooks = [...hooks]
  }

  /** Adds a hook after the existing ones. */
  register(hook: LifecycleHook): this {
    this.hooks.push(hook)
    return this
  }

  get size(): number {
    return this.hooks.length
  }

  /** Publishes an event to every hook, in order. Never throws. */
  async emit(init: LifecycleEventInit): Promise<void> {
    if (this.hooks.length === 0) return
    const event: LifecycleEvent = { ...init, attributes: init.attributes ?? {}, timestamp: Date.now() }
    for (const hook of this.hooks) {
      try {
        await hook.onEvent(event)
      } catch (error) {
        this.record(hook.name, event.type, error)
        if (event.type !== 'ERROR') await this.publishHookError(hook.name, event, error)
      }
    }
  }

  private async publishHookError(hookName: string, failed: LifecycleEvent, error: unknown): Promise<void> {
    const event: LifecycleEvent = {
      type: 'ERROR',
      runtime: failed.runtime,
      ...(failed.sessionId !== undefined ? { sessionId: failed.sessionId } : {}),
      step: failed.step,
      message: `lifecycle hook "${hookName}" failed on ${failed.type}: ${error instanceof Error ? error.message : String(error)}`,
      payload: { hook: hookName, failedEvent: failed.type, error },
      attributes: { source: 'lifecycle-hook', hook: hookName },
      timestamp: Date.now(),
    }
    for (const hook of this.hooks) {
      try {
        await hook.onEvent(event)
      } catch (err) {
        this.record(hook.name, 'ERROR', err)
      }
    }
  }

  private record(hook: string, type: LifecycleEventType, error: unknown): void {
    this.failures.push({ hook, type, error })
    if (this.failures.length > 100) this.failures.shift()
  }
}
