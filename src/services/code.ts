import { z } from 'zod'
import { CODE_LANGUAGES } from '../sandbox/code/types.js'
import type { CodeResult } from '../sandbox/code/types.js'
import { Env } from './common.js'
import { checkEnv } from './input-limits.js'

/** Longest cell accepted (characters). */
export const MAX_CODE_CHARS = 1_000_000

/** One cell for `POST /v1/sessions/{id}/code`. */
export const RunCodeInput = z
  .object({
    code: z
      .string()
      .max(MAX_CODE_CHARS)
      .refine((v) => v.trim().length > 0, 'code is empty; give the cell to run')
      .meta({ example: 'x = 41\nx + 1', description: 'one cell; its last expression is the result' }),
    language: z.enum(CODE_LANGUAGES).default('python').meta({
      description: "the kernel to run it in (one per session and language); default 'python'",
    }),
    /** Defaults to the session profile's `defaultTimeoutMs`; at most its `maxTimeoutMs`. */
    timeoutMs: z.number().int().positive().optional().meta({
      description:
        "interrupts the cell past this (the kernel's state is kept); default the profile's defaultTimeoutMs",
    }),
    env: Env.optional().meta({ description: 'environment variables for this cell only' }),
  })
  .strict()
  .superRefine((input, ctx) => {
    if (input.env) checkEnv(input.env, ctx)
  })
export type RunCodeInput = z.infer<typeof RunCodeInput>

/**
 * Tenant-scoped code interpreter of a session's sandbox (a stateful kernel per language). Answers
 * `undefined` when the session is not the tenant's; a sandbox without one is `UNSUPPORTED`.
 */
export interface CodeService {
  run(
    tenant: string,
    sessionId: string,
    input: RunCodeInput,
    opts?: { signal?: AbortSignal },
  ): Promise<CodeResult | undefined>
}
