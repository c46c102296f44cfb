/**
 * Decision types of the three interceptor surfaces, as plain discriminated unions with factories.
 * Every `switch` over `decision.kind` ends in `assertNever`.
 */

import type { CodeLanguage } from '../sandbox/code/types.js'

/**
 * How a routed call runs in its sandbox: absent, `command` is a shell command line; `code`, it is a
 * cell for the session's stateful kernel of `language` (see {@link ToolCallDecision.routeCode}).
 */
export interface RouteRun {
  readonly kind: 'code'
  readonly language: CodeLanguage
}

const ROUTE_LANGUAGES: readonly CodeLanguage[] = ['python', 'javascript']

/** Verdict of a `beforeToolCall` interceptor. */
export type ToolCallDecision =
  | { readonly kind: 'allow' }
  | { readonly kind: 'block'; readonly reason: string }
  /** `name` absent keeps the tool name; `arguments` replaces the raw JSON arguments. */
  | { readonly kind: 'modify'; readonly name?: string; readonly arguments: string }
  | {
      readonly kind: 'routeTo'
      readonly providerId: string
      readonly profile: string
      /** The shell command line, or the cell's source when `run` is a code run. */
      readonly command: string
      /** Absent: a shell command. */
      readonly run?: RouteRun
    }

/** The routeTo variant of {@link ToolCallDecision}. */
export type RouteToDecision = Extract<ToolCallDecision, { kind: 'routeTo' }>

const ALLOW = Object.freeze({ kind: 'allow' as const })

function requireText(value: unknown, what: string): string {
  if (typeof value !== 'string' || value.length === 0) {
    throw new TypeError(`${what} must be a non-empty string, got ${JSON.stringify(value)}`)
  }
  return value
}

/** Factories for {@link ToolCallDecision}. */
export const ToolCallDecision = {
  /** Proceed unchanged. */
  allow: (): ToolCallDecision => ALLOW,
  /** Veto the call; `reason` is fed back to the model as the tool result. */
  block: (reason: string): ToolCallDecision => ({
    kind: 'block',
    reason: requireText(reason, 'block reason'),
  }),
  /** Rewrite, then execute. `null` keeps the tool name; `callId`, `type` and `metadata` are preserved. */
  modify: (newName: string | null, newArguments: string): ToolCallDecision =>
    newName === null
      ? { kind: 'modify', arguments: newArguments }
      : { kind: 'modify', name: requireText(newName, 'modified tool name'), arguments: newArguments },
  /** Send the call to a sandbox: the interceptor owns the tool→command mapping, the runtime the execution. */
  routeTo: (providerId: string, profile: string, command: string): ToolCallDecision => ({
    kind: 'routeTo',
    providerId: requireText(providerId, 'routeTo providerId'),
    profile: requireText(profile, 'routeTo profile'),
    command: requireText(command, 'routeTo command'),
  }),
  /**
   * Send the call to a sandbox as a cell of the session's stateful code kernel (`python` or
   * `javascript`): variables, imports and definitions persist between the session's cells. A
   * `routeTo` verdict whose `run` is `{ kind: 'code', language }` and whose `command` is the cell.
   */
  routeCode: (
    providerId: string,
    profile: string,
    code: string,
    language: CodeLanguage,
  ): ToolCallDecision => {
    if (!ROUTE_LANGUAGES.includes(language)) {
      throw new TypeError(
        `routeCode language must be one of ${ROUTE_LANGUAGES.join(', ')}, got ${JSON.stringify(language)}`,
      )
    }
    if (typeof code !== 'string' || code.trim().length === 0) {
      throw new TypeError(`routeCode code must be a non-empty string, got ${JSON.stringify(code)}`)
    }
    return {
      kind: 'routeTo',
      providerId: requireText(providerId, 'routeTo providerId'),
      profile: requireText(profile, 'routeTo profile'),
      command: code,
      run: { kind: 'code', language },
    }
  },
} as const

/** Verdict of an `afterToolCall` interceptor on a tool's output (local or routed). */
export type ToolResultDecision =
  | { readonly kind: 'allow' }
  /** The reason replaces the output fed back to the model. */
  | { readonly kind: 'block'; readonly reason: string }
  /** The new output replaces the old one for later interceptors and the model (e.g. redaction). */
  | { readonly kind: 'modify'; readonly output: string }

/** Factories for {@link ToolResultDecision}. */
export const ToolResultDecision = {
  allow: (): ToolResultDecision => ALLOW,
  block: (reason: string): ToolResultDecision => ({
    kind: 'block',
    reason: requireText(reason, 'block reason'),
  }),
  modify: (newOutput: string): ToolResultDecision => ({ kind: 'modify', output: newOutput }),
} as const

/** Verdict of a prompt interceptor. */
export type PromptDecision =
  | { readonly kind: 'allow' }
  /** The agent does not run the turn; the run output is `PROMPT_BLOCKED: <reason>`. */
  | { readonly kind: 'block'; readonly reason: string }
  | { readonly kind: 'modify'; readonly input: string }

/** Factories for {@link PromptDecision}. */
export const PromptDecision = {
  allow: (): PromptDecision => ALLOW,
  block: (reason: string): PromptDecision => ({ kind: 'block', reason: requireText(reason, 'block reason') }),
  modify: (modifiedInput: string): PromptDecision => ({ kind: 'modify', input: modifiedInput }),
} as const

/** The six scalar fields a model-request interceptor may override. */
export interface ModelRequestOverrides {
  readonly model?: string
  readonly systemPrompt?: string
  readonly instructions?: string
  readonly temperature?: number
  readonly topP?: number
  readonly maxOutputTokens?: number
}

/**
 * Verdict of a model-request interceptor: a set of overrides (absent fields keep the current value).
 * There is no block: vetoing a model call is a guardrail's job.
 */
export class ModelRequestDecision {
  private static readonly NONE = new ModelRequestDecision({})

  private constructor(readonly overrides: ModelRequestOverrides) {
    Object.freeze(this)
  }

  /** No change. */
  static allow(): ModelRequestDecision {
    return ModelRequestDecision.NONE
  }
  static withModel(model: string): ModelRequestDecision {
    return new ModelRequestDecision({ model: requireText(model, 'model') })
  }
  static withSystemPrompt(systemPrompt: string): ModelRequestDecision {
    return new ModelRequestDecision({ systemPrompt })
  }
  static withInstructions(instructions: string): ModelRequestDecision {
    return new ModelRequestDecision({ instructions })
  }
  static withTemperature(temperature: number): ModelRequestDecision {
    return new ModelRequestDecision({ temperature: finite(temperature, 'temperature') })
  }
  static withTopP(topP: number): ModelRequestDecision {
    return new ModelRequestDecision({ topP: finite(topP, 'topP') })
  }
  static withMaxOutputTokens(maxOutputTokens: number): ModelRequestDecision {
    if (!Number.isInteger(maxOutputTokens) || maxOutputTokens <= 0) {
      throw new TypeError(`maxOutputTokens must be a positive integer, got ${maxOutputTokens}`)
    }
    return new ModelRequestDecision({ maxOutputTokens })
  }
  /** Builds a decision from several overrides at once. */
  static of(overrides: ModelRequestOverrides): ModelRequestDecision {
    return ModelRequestDecision.allow().merge(new ModelRequestDecision(stripUndefined(overrides)))
  }

  /** Stacks overrides: `other`'s set fields win over this one's. */
  merge(other: ModelRequestDecision): ModelRequestDecision {
    return new ModelRequestDecision({ ...this.overrides, ...stripUndefined(other.overrides) })
  }

  /** Whether this decision changes nothing. */
  get isAllow(): boolean {
    return Object.keys(this.overrides).length === 0
  }
}

function finite(n: number, what: string): number {
  if (!Number.isFinite(n)) throw new TypeError(`${what} must be a finite number, got ${n}`)
  return n
}

function stripUndefined<T extends object>(o: T): T {
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(o)) if (v !== undefined && v !== null) out[k] = v
  return out as T
}
