import { expect } from 'vitest'
import type { ModelRequest, ToolSpec } from '../../src/agent/model-client.js'
import { AppError } from '../../src/errors.js'

/** A shell tool as the agent offers it to the model. */
export const SHELL_TOOL = {
  name: 'bash',
  description: 'Run a shell command in the sandbox.',
  parameters: {
    type: 'object',
    properties: { command: { type: 'string' } },
    required: ['command'],
    additionalProperties: false,
  },
} as const satisfies ToolSpec

/** A one-turn request without tools; override any field. */
export function modelRequest(model: string, overrides: Partial<ModelRequest> = {}): ModelRequest {
  return {
    model,
    messages: [{ role: 'user', content: 'List the files.' }],
    tools: [],
    isLastIteration: false,
    ...overrides,
  }
}

/** Awaits `promise`, expecting it to reject with an AppError, and returns that error. */
export async function appError(promise: Promise<unknown>): Promise<AppError> {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(AppError)
  return err as AppError
}

/** A fresh signal that is never aborted. */
export const neverAborted = (): AbortSignal => new AbortController().signal
