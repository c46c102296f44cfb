import { AppError } from '../errors.js'
import type { CodeService, RunCodeInput } from './index.js'
import { requireCode } from '../sandbox/code/sandbox-code.js'
import type { CodeResult } from '../sandbox/code/types.js'
import type { SessionPool } from '../sessions/types.js'
import type { SessionDirectory, SessionRecord } from './session-directory.js'
import { keyOf } from './session-service.js'
import { useLease } from './use-lease.js'

/** A session profile's timeout bounds (ms), from the profile registry. */
export type CodeTimeouts = (record: SessionRecord) => { defaultTimeoutMs: number; maxTimeoutMs: number }

/**
 * {@link CodeService} on the session directory and pool: each call leases the session's sandbox
 * (binding one if it has none) and runs the cell in its code interpreter (the provider's own, or
 * the service's kernel as a background process). The kernel lives in the sandbox, so any process
 * of the fleet (`sbx api` as well as `sbx serve`) serves it, and deleting the session ends it.
 */
export class PooledCodeService implements CodeService {
  constructor(
    private readonly directory: SessionDirectory,
    private readonly pool: SessionPool,
    private readonly timeouts: CodeTimeouts,
  ) {}

  async run(
    tenant: string,
    sessionId: string,
    input: RunCodeInput,
    opts: { signal?: AbortSignal } = {},
  ): Promise<CodeResult | undefined> {
    const r = await this.directory.get(tenant, sessionId)
    if (!r) return undefined
    const { defaultTimeoutMs, maxTimeoutMs } = this.timeouts(r)
    const timeoutMs = input.timeoutMs ?? defaultTimeoutMs
    if (timeoutMs > maxTimeoutMs)
      throw new AppError(
        'BAD_REQUEST',
        `timeoutMs ${timeoutMs} is over the profile '${r.profile}' maximum of ${maxTimeoutMs} ms; ask for less or raise the profile's maxTimeoutMs`,
      )
    const lease = await this.pool.acquire(keyOf(r), opts.signal ? { signal: opts.signal } : {})
    return useLease(lease, async () => {
      return await requireCode(lease.sandbox).run(
        {
          code: input.code,
          language: input.language,
          timeoutMs,
          ...(input.env !== undefined ? { env: input.env } : {}),
        },
        opts.signal ? { signal: opts.signal } : {},
      )
    })
  }
}
