import { ZodError, z } from 'zod'
import { AppError } from '../../src/sandbox/index.js'

/** Template used when a profile names none. */
export const DEFAULT_TEMPLATE = 'base'

/** Options of the E2B provider, parsed once by {@link createE2BProvider}. */
export const E2BProviderOptionsSchema = z
  .object({
    /** E2B API key (what E2B_API_KEY holds). Sent only as a header; never logged nor put in messages. */
    apiKey: z.string().min(1, 'the E2B API key is empty; set E2B_API_KEY'),
    /** Control-plane URL (self-hosted E2B, tests). @default E2B_API_URL, else `https://api.<domain>` */
    apiUrl: z.string().url().optional(),
    /** One envd URL for every sandbox, which is then named by a header (proxies, tests). @default E2B_SANDBOX_URL, else per-sandbox hosts under `domain` */
    sandboxUrl: z.string().url().optional(),
    /**
     * Where port traffic (`/v1/sessions/{id}/ports/{port}/…`) connects instead of each sandbox's
     * preview host `https://<port>-<sandboxId>.<domain>`, which is then only sent as the `Host`
     * header (one origin in front of E2B's proxy, local fakes). @default the preview host itself
     */
    previewUrl: z.string().url().optional(),
    /** E2B domain. @default E2B_DOMAIN, else 'e2b.app' */
    domain: z.string().min(1).optional(),
    /** Template for profiles that name none. @default 'base' */
    defaultTemplate: z.string().min(1).default(DEFAULT_TEMPLATE),
    /** Value of the instance label (`LABELS.instance`) in created sandboxes' metadata (diagnostics). */
    instanceId: z.string().min(1).optional(),
    /** Timeout of one control-plane or envd request, and of a command's start (ms). @default 60000 */
    requestTimeoutMs: z.number().int().positive().default(60_000),
    /** SDK retries of a 429 that carries `Retry-After`. @default 3 */
    retries: z.number().int().min(0).max(10).default(3),
    /**
     * Added to a command's timeout to form the SDK's stream deadline: the in-sandbox kill reports
     * well before it; past it the sandbox is presumed wedged (SANDBOX_TIMEOUT). @default 10000
     */
    commandDeadlineBufferMs: z.number().int().positive().default(10_000),
    /**
     * After the wrapper's last word, how long to wait for the end of the command's stream before
     * finishing without it (a process that escaped with `setsid` may hold the pipes) (ms). @default 1000
     */
    exitLingerMs: z.number().int().min(0).default(1000),
    /** Server-side lifetime of a sandbox whose profile is unknown (connect by a ref without metadata) (ms). @default 900000 */
    defaultIdleTtlMs: z.number().int().positive().default(900_000),
    /** The lifetime is set this much beyond the idle TTL, so refreshes can be spaced out (ms, at most a quarter of the TTL). @default 60000 */
    lifetimeSlackMs: z.number().int().positive().default(60_000),
    /** Bytes per `SendInput` call when feeding a command's stdin. @default 1048576 */
    stdinChunkBytes: z
      .number()
      .int()
      .positive()
      .default(1024 * 1024),
    /** Timeout of the helper commands the provider runs itself (cwd creation, kill on cancel) (ms). @default 15000 */
    helperTimeoutMs: z.number().int().positive().default(15_000),
    /**
     * Host path of the static `sbx-agent` (scripts/setup.sh builds it at `.sbx/sbx-agent`). With it,
     * sandboxes get background processes: the binary is uploaded to the sandbox on a handle's first
     * process call and runs them as in Docker. Without it, processes are UNSUPPORTED.
     */
    agentBinaryPath: z.string().min(1).optional(),
  })
  .strict()

/** Options of {@link createE2BProvider} as callers write them (defaults optional). */
export type E2BProviderOptions = z.input<typeof E2BProviderOptionsSchema>

/** Parsed options. */
export type ResolvedE2BProviderOptions = z.output<typeof E2BProviderOptionsSchema>

/** The options parsed, defaults applied; `CONFIG_INVALID` naming every bad field. */
export function parseE2BProviderOptions(options: E2BProviderOptions): ResolvedE2BProviderOptions {
  try {
    return E2BProviderOptionsSchema.parse(options)
  } catch (err) {
    if (!(err instanceof ZodError)) throw err
    const issues = err.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ')
    throw new AppError('CONFIG_INVALID', `invalid E2B provider options (${issues})`)
  }
}
