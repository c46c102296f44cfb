import { AppError } from '../errors.js'
import type { TerminalOptions } from '../sandbox/types.js'
import type { SessionPortStream, SessionStreamService, SessionTerminal } from './session-streams.js'
import type { Lease, SessionPool } from '../sessions/types.js'
import type { SessionDirectory } from './session-directory.js'
import { keyOf } from './session-service.js'

/**
 * {@link SessionStreamService} on the session directory and pool: each stream holds a lease of the
 * session's sandbox while open (so idle eviction waits for it), released when the stream closes.
 */
export class PooledSessionStreams implements SessionStreamService {
  constructor(
    private readonly directory: SessionDirectory,
    private readonly pool: SessionPool,
  ) {}

  async openPort(
    tenant: string,
    sessionId: string,
    port: number,
    opts: { signal?: AbortSignal } = {},
  ): Promise<SessionPortStream> {
    return this.withLease(tenant, sessionId, async (lease) => {
      const open = lease.sandbox.openPort
      if (!lease.sandbox.ports || !open) throw unsupported(lease, 'ports', 'reach a port inside its sandbox')
      const stream = await open.call(lease.sandbox, port, opts)
      // A stream that breaks (its sandbox lost) must not take the process down before its consumer listens.
      stream.on('error', () => undefined)
      return { stream, closed: new Promise<void>((resolve) => stream.once('close', () => resolve())) }
    }).then(({ value, done }) => ({ stream: value.stream, done }))
  }

  async openTerminal(tenant: string, sessionId: string, opts: TerminalOptions): Promise<SessionTerminal> {
    return this.withLease(tenant, sessionId, async (lease) => {
      const open = lease.sandbox.openTerminal
      if (!lease.sandbox.terminals || !open) throw unsupported(lease, 'terminals', 'open a terminal')
      const terminal = await open.call(lease.sandbox, opts)
      terminal.stream.on('error', () => undefined)
      return { terminal, closed: terminal.exited.then(() => undefined) }
    }).then(({ value, done }) => ({ terminal: value.terminal, done }))
  }

  /** Runs `open` under a lease of the session's sandbox; the lease ends when `closed` settles. */
  private async withLease<T extends { closed: Promise<void> }>(
    tenant: string,
    sessionId: string,
    open: (lease: Lease) => Promise<T>,
  ): Promise<{ value: T; done: Promise<void> }> {
    const record = await this.directory.get(tenant, sessionId)
    if (!record) throw new AppError('NOT_FOUND', `no session ${sessionId}`)
    const lease = await this.pool.acquire(keyOf(record))
    let value: T
    try {
      value = await open(lease)
    } catch (err) {
      const lost = err instanceof AppError && err.code === 'SANDBOX_LOST'
      await lease.release(lost ? 'lost' : 'ok', lost ? err.message : undefined)
      throw err
    }
    // A release that fails (Redis away) leaves the lease to expire on its own; nothing waits on it.
    const done = value.closed.then(() => lease.release('ok')).catch(() => undefined)
    return { value, done }
  }
}

function unsupported(lease: Lease, feature: string, action: string): AppError {
  return new AppError(
    'UNSUPPORTED',
    `provider ${lease.ref.providerId} does not offer ${feature}: a session on it cannot ${action}; ` +
      'use a session on the docker provider',
  )
}
