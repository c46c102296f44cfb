/** The lifecycle event types (observe-only notifications). */
export const LifecycleEventType = {
  BEFORE_TURN: 'BEFORE_TURN',
  AFTER_TURN: 'AFTER_TURN',
  BEFORE_MODEL_REQUEST: 'BEFORE_MODEL_REQUEST',
  AFTER_MODEL_RESPONSE: 'AFTER_MODEL_RESPONSE',
  BEFORE_TOOL_CALL: 'BEFORE_TOOL_CALL',
  /** Also fired for routed calls, with the route in `attributes.route`. */
  AFTER_TOOL_CALL: 'AFTER_TOOL_CALL',
  ON_COMPACT: 'ON_COMPACT',
  SESSION_START: 'SESSION_START',
  SESSION_END: 'SESSION_END',
  ERROR: 'ERROR',
  /** A provider's circuit opened: routing policies skip it (service event, `GET /v1/events`). */
  CIRCUIT_OPEN: 'CIRCUIT_OPEN',
  /** A provider's cool-down is over: one probe may try it. */
  CIRCUIT_HALF_OPEN: 'CIRCUIT_HALF_OPEN',
  /** A provider's circuit closed again after a successful create. */
  CIRCUIT_CLOSED: 'CIRCUIT_CLOSED',
} as const

export type LifecycleEventType = (typeof LifecycleEventType)[keyof typeof LifecycleEventType]

/** One lifecycle event. Payloads may carry user data: hooks should not persist them verbatim. */
export interface LifecycleEvent {
  readonly type: LifecycleEventType
  /** The source, e.g. `agent`, `session`, `router`. */
  readonly runtime: string
  readonly sessionId?: string
  /** The current step (iteration) number, 0 before the first. */
  readonly step: number
  /** A lightweight label, e.g. the tool name. */
  readonly message?: string
  /** The context object of the event (request, response, tool call, compaction result…). */
  readonly payload?: unknown
  readonly attributes: Readonly<Record<string, unknown>>
  /** Epoch ms. */
  readonly timestamp: number
}

/** An observer of lifecycle events. It cannot alter control flow; a throw is recorded and ignored. */
export interface LifecycleHook {
  readonly name: string
  onEvent(event: LifecycleEvent): void | Promise<void>
}
