import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { z } from 'zod'
import { AppError } from '../errors.js'
import { CODE_LANGUAGES } from '../sandbox/code/types.js'
import type { CodeResult } from '../sandbox/code/types.js'
import { MAX_CODE_CHARS } from '../services/code.js'
import type { CodeService, ToolCallService } from '../services/index.js'
import { strictArgs } from './mcp-schemas.js'

/** What the code tool needs: the code service, the tenant, and the MCP session's sandbox session. */
export interface McpCodeToolsContext {
  readonly code: CodeService
  readonly tenant: string
  /** The sandbox session of this MCP session (throws before initialization). */
  readonly session: () => string
  /** Marks the MCP session busy while `run` runs (it does not expire meanwhile). */
  readonly busy: <T>(run: () => Promise<T>) => Promise<T>
  /**
   * The server's tool-call pipeline: a `run_code` call the host policy routes (config
   * `routing.code`) or blocks answers with the pipeline's text, as `/v1/tool-calls` and the agent
   * give it; an allowed one runs on {@link code}.
   */
  readonly toolCalls?: ToolCallService
}

const runArgs = strictArgs('run_code', {
  code: z
    .string()
    .superRefine((v, ctx) => {
      if (!v.trim()) ctx.addIssue({ code: 'custom', message: 'code must not be empty' })
      if (v.length > MAX_CODE_CHARS)
        ctx.addIssue({ code: 'custom', message: `code over ${MAX_CODE_CHARS} characters; run it in parts` })
    })
    .describe('One cell of code; its last expression is the result, like a notebook cell.'),
  language: z.enum(CODE_LANGUAGES).nullish().describe("'python' or 'javascript'; null for python."),
  timeoutMs: z
    .number()
    .int()
    .positive()
    .nullish()
    .describe("Interrupt the cell past this (ms); the kernel's state is kept. Null for the profile default."),
})

type Content = { type: 'text'; text: string } | { type: 'image'; data: string; mimeType: string }

/** The cell's result as MCP content: a text summary, then its PNG/JPEG outputs as images. */
export function codeContent(r: CodeResult): { content: Content[]; isError: boolean } {
  const parts: string[] = []
  if (r.kernelRestarted) parts.push('[the kernel was restarted: earlier variables and imports are gone]')
  if (r.stdout) parts.push(`stdout:\n${r.stdout}`)
  if (r.stderr) parts.push(`stderr:\n${r.stderr}`)
  for (const o of r.outputs) {
    if (o.type === 'result') continue
    const shown = o.data['text/markdown'] ?? o.data['text/html'] ?? o.data['text/plain']
    if (shown) parts.push(`display:\n${shown}`)
  }
  if (r.text !== null) parts.push(`result:\n${r.text}`)
  if (r.error) parts.push(`${r.error.name}: ${r.error.value}\n${r.error.traceback}`.trimEnd())
  if (r.truncated) parts.push('[output truncated]')
  const content: Content[] = [{ type: 'text', text: parts.join('\n\n') || '(no output)' }]
  for (const o of r.outputs) {
    for (const mime of ['image/png', 'image/jpeg']) {
      const data = o.data[mime]
      if (data) content.push({ type: 'image', data, mimeType: mime })
    }
  }
  return { content, isError: r.error !== null }
}

/** Registers `run_code` on `server`: the MCP session's stateful kernels (python, javascript). */
export function registerCodeTools(server: McpServer, ctx: McpCodeToolsContext): void {
  const { code, tenant, session, busy } = ctx
  server.registerTool(
    'run_code',
    {
      title: 'Run code in a stateful kernel',
      description:
        'Run Python (default) or JavaScript in a long-lived interpreter of this session: variables, imports and ' +
        'functions persist between calls, like notebook cells. Returns stdout, stderr, the value of the last ' +
        'expression, display() outputs and images, or the exception with its traceback.',
      inputSchema: runArgs,
      annotations: { destructiveHint: true, openWorldHint: false },
    },
    async ({ code: source, language, timeoutMs }, extra) =>
      busy(async () => {
        try {
          if (ctx.toolCalls) {
            const args = JSON.stringify(language == null ? { code: source } : { code: source, language })
            const routed = await ctx.toolCalls.evaluate(
              tenant,
              { name: 'run_code', arguments: args, callId: `mcp-${crypto.randomUUID()}`, type: 'function' },
              { sessionId: session(), signal: extra.signal, ...(timeoutMs == null ? {} : { timeoutMs }) },
            )
            if (routed.output !== undefined) {
              const failed =
                routed.outcome !== 'ok' || (routed.result !== undefined && routed.result.exitCode !== 0)
              return { content: [{ type: 'text' as const, text: routed.output }], isError: failed }
            }
          }
          const r = await code.run(
            tenant,
            session(),
            {
              code: source,
              language: language ?? 'python',
              ...(timeoutMs == null ? {} : { timeoutMs }),
            },
            { signal: extra.signal },
          )
          if (!r)
            return {
              content: [
                { type: 'text' as const, text: 'this MCP session has no sandbox session (it was deleted)' },
              ],
              isError: true,
            }
          return codeContent(r)
        } catch (err) {
          if (err instanceof AppError)
            return {
              content: [{ type: 'text' as const, text: `${err.code}: ${err.message}` }],
              isError: true,
            }
          throw err
        }
      }),
  )
}
