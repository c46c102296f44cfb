import { z } from '@hono/zod-openapi'
import { CODE_LANGUAGES } from '../sandbox/code/types.js'
import { checkEnv } from './input-limits.js'

/** Longest cell accepted (characters). */
export const MAX_CODE_CHARS = 1_000_000

const Env = z.record(z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'an environment variable name'), z.string())

/** Body of `POST /v1/sessions/{id}/code`. */
export const RunCodeSchema = z
  .object({
    code: z
      .string()
      .max(MAX_CODE_CHARS)
      .refine((v) => v.trim().length > 0, 'code is empty; give the cell to run')
      .openapi({ example: 'x = 41\nx + 1', description: 'one cell; its last expression is the result' }),
    language: z.enum(CODE_LANGUAGES).default('python').openapi({
      description: "the kernel to run it in (one per session and language); default 'python'",
    }),
    timeoutMs: z.number().int().positive().optional().openapi({
      description:
        "interrupts the cell past this (the kernel's state is kept); default the profile's defaultTimeoutMs",
    }),
    env: Env.optional().openapi({ description: 'environment variables for this cell only' }),
  })
  .strict()
  .superRefine((input, ctx) => {
    if (input.env) checkEnv(input.env, ctx)
  })
  .openapi('RunCode')

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
