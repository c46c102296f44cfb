import { z } from '@hono/zod-openapi'
import { CODE_LANGUAGES } from '../sandbox/code/types.js'
import { RunCodeInput } from '../services/code.js'

/** Body of `POST /v1/sessions/{id}/code`: the code service's schema, with its OpenAPI name. */
export const RunCodeSchema = RunCodeInput.openapi('RunCode')

/** One rich output of a cell. */
export const CodeOutputSchema = z.object({
  type: z.enum(['display', 'result']).openapi({ description: '`display(obj)`, or the cell’s last value' }),
  data: z.record(z.string(), z.string()).openapi({
    description: 'MIME type → text: text/plain, text/html, image/png (base64), image/svg+xml, …',
    example: { 'text/plain': '42' },
  }),
})

/** The result of a cell. */
export const CodeResultSchema = z
  .object({
    language: z.enum(CODE_LANGUAGES),
    stdout: z.string(),
    stderr: z.string(),
    text: z
      .string()
      .nullable()
      .openapi({ description: "text/plain of the cell's last value", example: '42' }),
    outputs: z.array(CodeOutputSchema),
    error: z
      .object({ name: z.string(), value: z.string(), traceback: z.string() })
      .nullable()
      .openapi({ description: 'the exception the cell raised; name KernelDied when the kernel died' }),
    executionCount: z.number().int(),
    timedOut: z.boolean(),
    truncated: z.boolean(),
    durationMs: z.number().int(),
    kernelRestarted: z.boolean().openapi({
      description: 'this cell ran in a new kernel because the previous one died: earlier state is gone',
    }),
    stateless: z.literal(true).optional().openapi({
      description: "the provider's code runner keeps no state between cells",
    }),
  })
  .openapi('CodeResult')
