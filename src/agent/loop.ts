import { randomUUID } from 'node:crypto'
import { AppError } from '../errors.js'
import { evaluateModelRequest, evaluatePrompt } from '../interceptors/chains.js'
import { InterceptorError } from '../interceptors/errors.js'
import type { InterceptorContext, ModelRequestView } from '../interceptors/types.js'
import type {
  AgentRun,
  AgentRunState,
  IterationContext,
  IterationResult,
  ToolCallRecord,
} from './agent-interceptor.js'
import type { AgentConfig } from './config.js'
import { ModelCallError } from './errors.js'
import { RunEmitter } from './events.js'
import type { FinishReason } from './finish-reason.js'
import type { ChatMessage, ModelRequest, ModelResponse, ToolSpec } from './model-client.js'
import { checkIteration, checkResponse } from './layer-checks.js'
import { decideAll, runOnion } from './onion.js'
import type { AgentResult, AgentWarning } from './result.js'
import { NEVER_ABORTED } from './signals.js'
import { executeToolCalls } from './tool-calls.js'
import type { LlmCallUsage } from './usage.js'
import { addUsage, emptyUsage, normalizeUsage, sandboxSecondsOf } from './usage.js'

/** Options of one run. */
export interface RunOptions {
  /** Session id: lifecycle events carry it and routed calls of one session share a sandbox. */
  sessionId?: string
  /** Cancels the run: model calls, tools and routed commands see it; the run rejects with its reason. */
  signal?: AbortSignal
  /** Earlier conversation to continue from (what `AgentSession` passes). */
  history?: readonly ChatMessage[]
}

/**
 * One run of the loop: prompt chain, then iterations (decide → aroundIteration → model-request chain
 * → aroundLlmCall → tool calls) until a natural stop, a forced-final iteration, the model's token
 * limit or a model error. Interceptor failures reject with `InterceptorError`; an abort rejects with
 * the signal's reason; everything else resolves.
 */
export async function runLoop(cfg: AgentConfig, input: string, opts: RunOptions = {}): Promise<AgentResult> {
  const { sessionId } = opts
  const signal = opts.signal ?? NEVER_ABORTED
  signal.throwIfAborted()
  const emitter = new RunEmitter(cfg.dispatcher, cfg.runtime, sessionId)
  const warnings: AgentWarning[] = []
  let step = 0
  const run: AgentRun = {
    runId: randomUUID(),
    ...(sessionId !== undefined ? { sessionId } : {}),
    ...(cfg.tenant !== undefined ? { tenant: cfg.tenant } : {}),
    warn: (source, message, attributes) => {
      warnings.push({ source, message, ...(attributes ? { attributes } : {}) })
      return emitter.emit('ERROR', step, message, undefined, { ...attributes, severity: 'warning', source })
    },
  }
  const ictx: InterceptorContext = {
    ...(cfg.tenant !== undefined ? { tenant: cfg.tenant } : {}),
    ...(sessionId !== undefined ? { sessionId } : {}),
    signal,
    attributes: { runId: run.runId },
  }
  const messages: ChatMessage[] = [...(opts.history ?? [])]
  const runStart = messages.length
  const usage = emptyUsage()
  const llmCalls: LlmCallUsage[] = []
  const toolCalls: ToolCallRecord[] = []
  let iterations = 0

  const result = (output: string, finishReason: FinishReason): AgentResult => ({
    output,
    finishReason,
    usage: { ...usage },
    sandboxSeconds: sandboxSecondsOf(toolCalls),
    llmCalls,
    toolCalls,
    iterations,
    messages,
    runId: run.runId,
    ...(sessionId !== undefined ? { sessionId } : {}),
    warnings,
  })
  const snapshot = (): AgentRunState => ({
    run,
    iterationsCompleted: iterations,
    maxIterations: cfg.maxIterations,
    usage: { ...usage },
    llmCalls,
    toolCalls,
  })

  /** The iteration itself (the innermost layer of aroundIteration). */
  const iterate = async (
    top: IterationContext,
    instruction: string | undefined,
  ): Promise<IterationResult> => {
    const { iteration, isLastIteration, state } = top
    if (emitter.active)
      await emitter.emit('BEFORE_TURN', iteration, cfg.runtime, { iteration, isLastIteration })
    const finish = async (output: string, finishReason: FinishReason): Promise<IterationResult> => {
      if (emitter.active)
        await emitter.emit('AFTER_TURN', iteration, cfg.runtime, { iteration, finished: true, finishReason })
      return { kind: 'finish', output, finishReason }
    }
    const view =
      cfg.chains.modelRequest.length > 0
        ? (await evaluateModelRequest(cfg.chains.modelRequest, cfg.base, ictx)).request
        : cfg.base
    const request = buildRequest(
      view,
      instruction !== undefined ? [...messages, { role: 'user', content: instruction }] : messages.slice(),
      isLastIteration ? [] : cfg.toolSpecs,
      isLastIteration,
    )
    const callModel = async (req: ModelRequest): Promise<ModelResponse> => {
      if (emitter.active) await emitter.emit('BEFORE_MODEL_REQUEST', iteration, req.model, req)
      let res: ModelResponse
      try {
        res = await cfg.model.generate(req, signal)
      } catch (err) {
        if (signal.aborted || err instanceof ModelCallError) throw err
        throw new ModelCallError(
          `model call failed: ${err instanceof Error ? err.message : String(err)}`,
          err,
        )
      }
      if (emitter.active) await emitter.emit('AFTER_MODEL_RESPONSE', iteration, res?.model ?? req.model, res)
      return res
    }
    let response: ModelResponse
    try {
      response = await runOnion(
        'aroundLlmCall',
        cfg.llmLayers,
        request,
        (req) => ({ run, iteration, isLastIteration, request: req, state }),
        callModel,
        checkResponse,
      )
    } catch (err) {
      if (!(err instanceof ModelCallError) || signal.aborted) throw err
      const code = err.cause instanceof AppError ? err.cause.code : err.code
      await emitter.emit('ERROR', iteration, err.message, err, { source: 'model', code })
      return finish(fallbackOutput(messages, runStart), { kind: 'error', message: err.message, code })
    }
    const callUsage = normalizeUsage(response.usage)
    addUsage(usage, callUsage)
    llmCalls.push({
      model: response.model ?? request.model,
      requestedModel: request.model,
      iteration,
      usage: callUsage,
    })
    const text = response.text ?? ''
    const replyCalls = response.toolCalls ?? []

    if (response.finishReason === 'length') {
      messages.push({ role: 'assistant', content: text })
      return finish(text, { kind: 'token_limit' })
    }
    if (response.finishReason === 'error') {
      messages.push({ role: 'assistant', content: text })
      const message = text || 'the model reported an error without a message'
      await emitter.emit('ERROR', iteration, message, response, { source: 'model' })
      return finish(text, { kind: 'error', message, code: 'UNAVAILABLE' })
    }
    if (isLastIteration) {
      // Forced final: tool calls in the reply are ignored (tools were withheld).
      messages.push({ role: 'assistant', content: text })
      const output = text || fallbackOutput(messages, runStart)
      const reason: FinishReason =
        iteration === cfg.maxIterations || !top.forcedStop ? { kind: 'max_iterations' } : top.forcedStop
      return finish(output, reason)
    }
    if (replyCalls.length === 0) {
      messages.push({ role: 'assistant', content: text })
      return finish(text, { kind: 'natural_stop' })
    }
    messages.push(
      text
        ? { role: 'assistant', content: text, toolCalls: replyCalls }
        : { role: 'assistant', toolCalls: replyCalls },
    )
    const records = await executeToolCalls({ cfg, run, emitter, ictx, iteration, state }, replyCalls, signal)
    records.forEach((r, i) => {
      // Pair results by the model's own call id and name, whatever a layer put in the record.
      const asked = replyCalls[i] ?? { id: r.callId, name: r.requestedName }
      toolCalls.push(r)
      messages.push({ role: 'tool', toolCallId: asked.id, name: asked.name, content: r.output })
    })
    if (emitter.active)
      await emitter.emit('AFTER_TURN', iteration, cfg.runtime, {
        iteration,
        finished: false,
        toolCalls: records.length,
      })
    return { kind: 'continue' }
  }

  try {
    const prompt = await evaluatePrompt(
      cfg.chains.prompt,
      { input, ...(sessionId !== undefined ? { sessionId } : {}) },
      ictx,
    )
    if (prompt.kind === 'block') {
      return result(`PROMPT_BLOCKED: ${prompt.reason}`, {
        kind: 'prompt_blocked',
        reason: prompt.reason,
        blockedBy: prompt.decidedBy,
      })
    }
    messages.push({ role: 'user', content: prompt.input })
    for (let iteration = 1; iteration <= cfg.maxIterations; iteration++) {
      signal.throwIfAborted()
      step = iteration
      const state = snapshot()
      const forced = cfg.deciders.length > 0 ? await decideAll(cfg.deciders, state) : undefined
      const lastByCount = iteration === cfg.maxIterations
      const top: Mutable<IterationContext> = {
        run,
        iteration,
        maxIterations: cfg.maxIterations,
        isLastIteration: lastByCount || forced !== undefined,
        state,
      }
      if (forced) top.forcedStop = forced.cause
      if (forced || lastByCount) top.instruction = forced?.instruction ?? cfg.maxIterationsInstruction
      const r = await runOnion(
        'aroundIteration',
        cfg.iterationLayers,
        top,
        (c) => c,
        (c) => iterate(top, c.instruction),
        checkIteration,
      )
      iterations = iteration
      if (r.kind === 'finish') return result(r.output, r.finishReason)
    }
    // Only reachable when an aroundIteration layer turned the final iteration into a `continue`.
    return result(fallbackOutput(messages, runStart), { kind: 'max_iterations' })
  } catch (err) {
    if (signal.aborted) throw signal.reason
    if (err instanceof InterceptorError) {
      await emitter.emit('ERROR', step, err.message, err, {
        source: 'interceptor',
        interceptor: err.interceptor,
        stage: err.stage,
      })
    }
    throw err
  }
}

/** Hot-path objects are built by assignment (conditional spreads are slow in V8). */
type Mutable<T> = { -readonly [K in keyof T]: T[K] }

/** A model request from the effective view; absent fields stay absent (built by assignment: a fast-mode object). */
function buildRequest(
  view: ModelRequestView,
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[],
  isLastIteration: boolean,
): ModelRequest {
  const r: Mutable<ModelRequest> = {
    model: view.model,
    messages,
    tools,
    isLastIteration,
  }
  if (view.systemPrompt !== undefined) r.systemPrompt = view.systemPrompt
  if (view.instructions !== undefined) r.instructions = view.instructions
  if (view.temperature !== undefined) r.temperature = view.temperature
  if (view.topP !== undefined) r.topP = view.topP
  if (view.maxOutputTokens !== undefined) r.maxOutputTokens = view.maxOutputTokens
  return r
}

/** Output when the final reply is empty: the last assistant text of this run, else the last tool result. */
function fallbackOutput(messages: readonly ChatMessage[], from: number): string {
  for (let i = messages.length - 1; i >= from; i--) {
    const m = messages[i]
    if (m?.role === 'assistant' && m.content) return m.content
  }
  for (let i = messages.length - 1; i >= from; i--) {
    const m = messages[i]
    if (m?.role === 'tool') return m.content
  }
  return ''
}
