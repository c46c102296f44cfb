import { z } from 'zod'
import type { ProcessInfo, ProcessOutput } from '../sandbox/types.js'
import { Env } from './common.js'
import { MAX_COMMAND_BYTES, checkCommand, checkCwd, checkEnv } from './input-limits.js'

/** What starting a background process takes over the API (`POST /v1/sessions/{id}/processes`). */
export const ProcessStartInput = z
  .object({
    command: z.string().min(1).max(MAX_COMMAND_BYTES).meta({
      example: 'python3 -m http.server 8000',
      description: 'run by bash -c in its own process group',
    }),
    cwd: z.string().startsWith('/').max(4096).optional(),
    env: Env.optional(),
  })
  .strict()
  .superRefine((input, ctx) => {
    checkCommand(input.command, ['command'], ctx)
    if (input.cwd !== undefined) checkCwd(input.cwd, ['cwd'], ctx)
    if (input.env) checkEnv(input.env, ctx)
  })
export type ProcessStartInput = z.infer<typeof ProcessStartInput>

/**
 * What {@link ProcessService.start} takes: the API's input, plus options that surfaces set for their
 * own callers rather than take from them (not part of the HTTP schema).
 */
export interface ProcessStartOptions extends ProcessStartInput {
  /**
   * Slow the writer instead of dropping output nobody read yet (see
   * `ProcessStartRequest.backpressure`): the E2B endpoint sets it for every command, as envd does.
   * @default false
   */
  backpressure?: boolean
}

/**
 * Tenant-scoped background processes of a session's sandbox. Every method answers `undefined` when
 * the session is not the tenant's (so another tenant's key gets 404); an unknown process id is
 * `NOT_FOUND`, a provider without processes `UNSUPPORTED`.
 */
export interface ProcessService {
  start(tenant: string, sessionId: string, input: ProcessStartOptions): Promise<ProcessInfo | undefined>
  list(tenant: string, sessionId: string): Promise<ProcessInfo[] | undefined>
  get(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined>
  read(
    tenant: string,
    sessionId: string,
    id: string,
    from: { stdoutOffset: number; stderrOffset: number; maxBytes: number; waitMs?: number },
  ): Promise<ProcessOutput | undefined>
  writeStdin(
    tenant: string,
    sessionId: string,
    id: string,
    data: Uint8Array,
    close: boolean,
  ): Promise<{ written: number; process: ProcessInfo } | undefined>
  signal(
    tenant: string,
    sessionId: string,
    id: string,
    signal: string,
    waitMs: number,
  ): Promise<ProcessInfo | undefined>
  remove(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined>
}
