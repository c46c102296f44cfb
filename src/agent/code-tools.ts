import { z } from 'zod'
import { CODE_LANGUAGES } from '../sandbox/code/types.js'
import type { CodeLanguage, CodeResult } from '../sandbox/code/types.js'
import { defineTool } from './define-tool.js'
import type { Tool } from './tool.js'

/**
 * Where the code tool sends its calls: the service's code interpreter of a session (the runtime's
 * `code`, or any object of this shape). Answers `undefined` when the session is not the tenant's.
 */
export interface CodeToolBackend {
  run(
    tenant: string,
    sessionId: string,
    input: { code: string; language: CodeLanguage; timeoutMs?: number },
  ): Promise<CodeResult | undefined>
}

/** Options of {@link codeTool}. */
export interface CodeToolOptions {
  backend: CodeToolBackend
  /** Tenant when the run has none (library use). @default 'default' */
  tenant?: string
  /** Session when the run has none. @default the run's `sessionId` (required one way or the other) */
  sessionId?: string
}

/** Why a call could not reach a session (thrown: the model gets it as the tool's error). */
class CodeToolError extends Error {
  override readonly name = 'CodeToolError'
}

/**
 * `run_code`: a cell in the run's session kernel (python by default, or javascript), whose state
 * persists between calls. Runs on the host (it calls `backend`, which reaches the sandbox), so no
 * routing interceptor is needed; the run needs a `sessionId` (or `options.sessionId`).
 *
 * @example
 * createAgent({ model, tools: [shellTool(), codeTool({ backend: runtime.code })], ... })
 */
export function codeTool(options: CodeToolOptions): Tool {
  return defineTool({
    name: 'run_code',
    description:
      'Run Python (default) or JavaScript in a long-lived interpreter of this session: variables, imports and ' +
      'functions persist between calls, like notebook cells. Returns stdout, stderr, the value of the last ' +
      'expression (text), rich outputs, or the exception with its traceback (error).',
    parameters: z.object({
      code: z.string().min(1).describe('One cell; its last expression is the result'),
      language: z.enum(CODE_LANGUAGES).optional().describe("'python' (default) or 'javascript'"),
      timeoutMs: z.number().int().positive().optional().describe('Interrupt the cell past this (ms)'),
    }),
    execute: async ({ code, language, timeoutMs }, ctx) => {
      const session = ctx.sessionId ?? options.sessionId
      if (!session)
        throw new CodeToolError(
          'the code interpreter lives in a session: run the agent with a sessionId (or pass codeTool({ sessionId }))',
        )
      const r = await options.backend.run(ctx.tenant ?? options.tenant ?? 'default', session, {
        code,
        language: language ?? 'python',
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      })
      if (!r) throw new CodeToolError(`no session ${session}`)
      return r
    },
  })
}
