import type { LifecycleDispatcher } from '../lifecycle/dispatcher.js'
import type { LifecycleEventType } from '../lifecycle/events.js'

const DONE: Promise<void> = Promise.resolve()

/**
 * Emits lifecycle events for one run or session with its runtime label and session id. Costs nothing
 * when no hook is registered.
 */
export class RunEmitter {
  constructor(
    private readonly dispatcher: LifecycleDispatcher,
    private readonly runtime: string,
    private readonly sessionId: string | undefined,
  ) {}

  /** Whether any hook listens (lets callers skip building payloads). */
  get active(): boolean {
    return this.dispatcher.size > 0
  }

  /** Publishes one event (record-and-continue: never throws). */
  emit(
    type: LifecycleEventType,
    step: number,
    message?: string,
    payload?: unknown,
    attributes?: Readonly<Record<string, unknown>>,
  ): Promise<void> {
    if (this.dispatcher.size === 0) return DONE
    return this.dispatcher.emit({
      type,
      runtime: this.runtime,
      ...(this.sessionId !== undefined ? { sessionId: this.sessionId } : {}),
      step,
      ...(message !== undefined ? { message } : {}),
      ...(payload !== undefined ? { payload } : {}),
      ...(attributes !== undefined ? { attributes } : {}),
    })
  }
}
