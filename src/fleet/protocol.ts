import { createHash, timingSafeEqual } from 'node:crypto'
import { z } from 'zod'
import type { ErrorCode } from '../errors.js'

/** The one path of the gateway. */
export const GATEWAY_PATH = '/internal/v1/call'
/** Header carrying the fleet secret (`fleet.secret`). */
export const SECRET_HEADER = 'x-sbx-fleet-secret'
/** Header naming the engine the caller means: a worker of another engine refuses (409). */
export const ENGINE_HEADER = 'x-sbx-engine'
/** The gateway's port tunnel: an HTTP upgrade to a raw stream to a port in a session's sandbox. */
export const PORT_PATH = '/internal/v1/port'
/** The `Upgrade` token of the port tunnel. */
export const PORT_UPGRADE = 'sbx-port'
/**
 * The gateway's terminal tunnel: an HTTP upgrade to a terminal in a session's sandbox, framed as
 * terminal-tunnel.ts says (its size in {@link COLS_HEADER}/{@link ROWS_HEADER}, its shell's pid in
 * the 101's {@link PID_HEADER}).
 */
export const TERMINAL_PATH = '/internal/v1/terminal'
/** The `Upgrade` token of the terminal tunnel. */
export const TERMINAL_UPGRADE = 'sbx-terminal'
export const COLS_HEADER = 'x-sbx-cols'
export const ROWS_HEADER = 'x-sbx-rows'
export const PID_HEADER = 'x-sbx-pid'
/**
 * Header of the terminal tunnel carrying the rest of its {@link TerminalTunnelOptions} (what the
 * terminal runs, its environment, its directory), as base64url JSON; absent: an interactive bash.
 */
export const TERMINAL_OPTIONS_HEADER = 'x-sbx-terminal-options'

/** What a terminal tunnel may ask beyond its size (TerminalOptions' `command`, `env`, `cwd`). */
export const TerminalTunnelOptionsSchema = z
  .object({
    command: z.string().max(1_048_576).optional(),
    env: z.record(z.string(), z.string()).optional(),
    cwd: z.string().max(4096).optional(),
  })
  .strict()

/** What a terminal tunnel may ask beyond its size. */
export type TerminalTunnelOptions = z.infer<typeof TerminalTunnelOptionsSchema>

/** The {@link TERMINAL_OPTIONS_HEADER} value of `opts`; undefined when it asks nothing. */
export function encodeTerminalOptions(opts: TerminalTunnelOptions): string | undefined {
  if (opts.command === undefined && opts.env === undefined && opts.cwd === undefined) return undefined
  return Buffer.from(JSON.stringify(opts), 'utf8').toString('base64url')
}

/** The options a {@link TERMINAL_OPTIONS_HEADER} value carries; undefined when it is malformed. */
export function decodeTerminalOptions(header: string | undefined): TerminalTunnelOptions | undefined {
  if (header === undefined) return {}
  try {
    const r = TerminalTunnelOptionsSchema.safeParse(
      JSON.parse(Buffer.from(header, 'base64url').toString('utf8')) as unknown,
    )
    return r.success ? r.data : undefined
  } catch {
    return undefined
  }
}
/** Headers of the port and terminal tunnels: whose session, which session, which port. */
export const TENANT_HEADER = 'x-sbx-tenant'
export const SESSION_HEADER = 'x-sbx-session'
export const PORT_HEADER = 'x-sbx-port'

/**
 * The calls the gateway serves, by service: every one takes `(tenant, id, …)`, the id a session's
 * (a snapshot's for `snapshots.startSession` and `snapshots.delete`).
 */
export const GATEWAY_METHODS = {
  sessions: ['readFile', 'writeFile', 'delete'],
  processes: ['start', 'list', 'get', 'read', 'writeStdin', 'signal', 'remove'],
  code: ['run'],
  snapshots: ['create', 'fork', 'startSession', 'delete'],
} as const

/** A service the gateway serves. */
export type GatewayService = keyof typeof GATEWAY_METHODS

/** One call, as it travels to the gateway (the frame of codec.ts). */
export const GatewayCallSchema = z
  .object({
    service: z.enum(['sessions', 'processes', 'code', 'snapshots']),
    method: z.string().min(1).max(64),
    /** `[tenant, sessionId (or snapshot id), …the method's other arguments]`. */
    args: z.tuple([z.string().min(1), z.string().min(1)]).rest(z.unknown()),
  })
  .strict()
  .refine((c) => (GATEWAY_METHODS[c.service] as readonly string[]).includes(c.method), {
    message: 'not a gateway call',
  })

/** One call, as it travels to the gateway. */
export type GatewayCall = z.infer<typeof GatewayCallSchema>

/** The gateway's answer: the call's value, or its error as the API should answer it. */
export type GatewayAnswer =
  | { readonly ok: true; readonly value?: unknown }
  | {
      readonly ok: false
      readonly error: { readonly code: ErrorCode; readonly message: string; readonly retryable: boolean }
    }

/**
 * Whether `presented` is the fleet secret, in constant time: both are hashed first, so neither the
 * length nor the content of the secret shows in the time taken.
 */
export function secretMatches(presented: string | undefined | null, secret: string): boolean {
  const a = createHash('sha256')
    .update(presented ?? '', 'utf8')
    .digest()
  const b = createHash('sha256').update(secret, 'utf8').digest()
  return timingSafeEqual(a, b) && presented !== undefined && presented !== null
}
