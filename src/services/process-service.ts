import { randomBytes } from 'node:crypto'
import { AppError } from '../errors.js'
import type { ProcessService, ProcessStartOptions } from './index.js'
import type { ProcessInfo, ProcessOutput, SandboxProcesses } from '../sandbox/types.js'
import type { SessionPool } from '../sessions/types.js'
import type { SessionDirectory, SessionRecord } from './session-directory.js'
import { keyOf } from './session-service.js'
import { useLease } from './use-lease.js'

/** Limits of background processes (from `quotas`). */
export interface ProcessLimits {
  /** `quotas.maxProcessesPerSession`. */
  maxRunning: number
  /** `quotas.processOutputBytes`. */
  outputBufferBytes: number
}

/**
 * {@link ProcessService} on the session directory (records) and the session pool (sandboxes): each
 * call leases the session's sandbox (binding one if it has none) and asks its
 * {@link SandboxProcesses}. The processes live in the sandbox, so any process of the fleet serves
 * them, and deleting the session (its sandbox destroyed) ends them.
 */
export class PooledProcessService implements ProcessService {
  constructor(
    private readonly directory: SessionDirectory,
    private readonly pool: SessionPool,
    private readonly limits: ProcessLimits,
  ) {}

  start(tenant: string, sessionId: string, input: ProcessStartOptions): Promise<ProcessInfo | undefined> {
    const id = `p-${randomBytes(6).toString('hex')}`
    return this.with(tenant, sessionId, (p) =>
      p
        .start(id, {
          command: input.command,
          ...(input.cwd !== undefined ? { cwd: input.cwd } : {}),
          ...(input.env !== undefined ? { env: input.env } : {}),
          outputBufferBytes: this.limits.outputBufferBytes,
          maxRunning: this.limits.maxRunning,
          ...(input.backpressure ? { backpressure: true } : {}),
        })
        .catch((err: unknown) => {
          if (!(err instanceof AppError && err.code === 'QUOTA_EXCEEDED')) throw err
          throw new AppError(
            'QUOTA_EXCEEDED',
            `${err.message}, the most quotas.maxProcessesPerSession (${this.limits.maxRunning}) allows: ` +
              `stop one (POST /v1/sessions/${sessionId}/processes/{id}/signal or DELETE it) or raise quotas.maxProcessesPerSession`,
            { cause: err },
          )
        }),
    )
  }

  list(tenant: string, sessionId: string): Promise<ProcessInfo[] | undefined> {
    return this.with(
      tenant,
      sessionId,
      (p) => p.list(),
      () => Promise.resolve([]),
    )
  }

  async get(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined> {
    return this.with(
      tenant,
      sessionId,
      async (p) => (await p.read(id, { stdoutOffset: 0, stderrOffset: 0, maxBytes: 0 })).process,
    )
  }

  read(
    tenant: string,
    sessionId: string,
    id: string,
    from: { stdoutOffset: number; stderrOffset: number; maxBytes: number; waitMs?: number },
  ): Promise<ProcessOutput | undefined> {
    return this.with(tenant, sessionId, (p) => p.read(id, from), noProcess(id))
  }

  writeStdin(
    tenant: string,
    sessionId: string,
    id: string,
    data: Uint8Array,
    close: boolean,
  ): Promise<{ written: number; process: ProcessInfo } | undefined> {
    return this.with(tenant, sessionId, (p) => p.writeStdin(id, data, close), noProcess(id))
  }

  signal(
    tenant: string,
    sessionId: string,
    id: string,
    signal: string,
    waitMs: number,
  ): Promise<ProcessInfo | undefined> {
    return this.with(tenant, sessionId, (p) => p.signal(id, signal, waitMs), noProcess(id))
  }

  remove(tenant: string, sessionId: string, id: string): Promise<ProcessInfo | undefined> {
    return this.with(tenant, sessionId, (p) => p.remove(id), noProcess(id))
  }

  /**
   * Runs `fn` on the processes of the session's sandbox; `undefined` when the session is not the
   * tenant's. With `unbound`, a session without a sandbox answers that instead of binding one (it
   * has no processes).
   */
  private async with<T>(
    tenant: string,
    sessionId: string,
    fn: (p: SandboxProcesses) => Promise<T>,
    unbound?: () => Promise<T>,
  ): Promise<T | undefined> {
    const r = await this.directory.get(tenant, sessionId)
    if (!r) return undefined
    if (unbound && !(await this.pool.state(keyOf(r))).sandboxId) return unbound()
    const lease = await this.pool.acquire(keyOf(r))
    return useLease(lease, async () => {
      const processes = lease.sandbox.processes
      if (!processes) throw unsupported(r)
      return await fn(processes)
    })
  }
}

/** The answer of an id-based call in a session that has no sandbox (so no processes). */
const noProcess = (id: string) => (): Promise<never> =>
  Promise.reject(new AppError('NOT_FOUND', `no process ${id}`))

function unsupported(r: SessionRecord): AppError {
  const hint =
    r.provider === 'daytona' || r.provider === 'e2b'
      ? ` (set providers.${r.provider}.agentBinaryPath to the agent scripts/setup.sh builds, .sbx/sbx-agent)`
      : ''
  return new AppError(
    'UNSUPPORTED',
    `provider '${r.provider}' (session ${r.id}) has no background processes${hint}; use a session on the docker provider, ` +
      'or run the command in the foreground with POST /v1/exec',
  )
}
