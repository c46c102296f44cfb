import { pino } from 'pino'
import type { DestinationStream, Logger } from 'pino'
import { redactSecrets } from './interceptors/builtins/secrets.js'

export type { Logger } from 'pino'

/** Options of {@link createLogger}. */
export interface LoggerOptions {
  /** @default 'info' (env LOG_LEVEL is read by the composition root, not here) */
  level?: string
  /** Exact secret values (API keys, provider keys, env values marked secret) to mask wherever they appear. */
  secrets?: readonly string[]
  /** Where lines go. @default stdout */
  destination?: DestinationStream
}

const REDACT_PATHS = [
  'authorization',
  'req.headers.authorization',
  'headers.authorization',
  '*.apiKey',
  'apiKey',
  '*.token',
  'env',
  '*.env',
]

/**
 * A pino logger that never writes secrets: known header/field paths are censored, every string
 * argument is passed through the secret scanner, and configured secret values are masked verbatim.
 */
export function createLogger(opts: LoggerOptions = {}): Logger {
  const secrets = (opts.secrets ?? []).filter((s) => s.length >= 6)
  const mask = (s: string): string => {
    let out = redactSecrets(s).text
    for (const secret of secrets) if (out.includes(secret)) out = out.replaceAll(secret, '[REDACTED]')
    return out
  }
  const scrub = (v: unknown, depth = 0): unknown => {
    if (typeof v === 'string') return mask(v)
    if (depth > 4 || v === null || typeof v !== 'object') return v
    if (v instanceof Error)
      return { type: v.name, message: mask(v.message), code: (v as { code?: unknown }).code }
    if (Array.isArray(v)) return v.map((x) => scrub(x, depth + 1))
    return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, scrub(x, depth + 1)]))
  }
  return pino(
    {
      level: opts.level ?? 'info',
      redact: { paths: REDACT_PATHS, censor: '[REDACTED]' },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((a) => scrub(a)) as Parameters<typeof method>)
        },
      },
    },
    opts.destination,
  )
}
