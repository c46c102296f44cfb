import { AppError } from '../errors.js'
import type { SessionService, SessionView } from '../http/deps.js'
import type { SessionPool, SessionKey } from '../sessions/types.js'
import type { SessionDirectory, SessionRecord } from './session-directory.js'

/** Checks a provider/profile pair; throws UNKNOWN_PROVIDER / UNKNOWN_PROFILE listing the known ones. */
export interface TargetCheck {
  resolve(providerId: string, profile: string): unknown
}

/**
 * {@link SessionService} on the session directory (records) and the session pool (sandboxes):
 * deleting a session destroys its sandbox; files go through a lease of the session's sandbox.
 */
export class PooledSessionService implements SessionService {
  constructor(
    private readonly directory: SessionDirectory,
    private readonly pool: SessionPool,
    private readonly targets: TargetCheck,
  ) {}

  async create(
    tenant: string,
    input: { id?: string; provider: string; profile: string },
  ): Promise<SessionView> {
    this.targets.resolve(input.provider, input.profile)
    const record: SessionRecord = {
      id: input.id ?? `s-${crypto.randomUUID()}`,
      tenant,
      provider: input.provider,
      profile: input.profile,
      createdAt: Date.now(),
    }
    return view(await this.directory.create(record))
  }

  async list(tenant: string): Promise<SessionView[]> {
    return (await this.directory.list(tenant)).map(view)
  }

  async get(tenant: string, id: string): Promise<SessionView | undefined> {
    const r = await this.directory.get(tenant, id)
    return r ? view(r) : undefined
  }

  async delete(tenant: string, id: string): Promise<boolean> {
    const r = await this.directory.get(tenant, id)
    if (!r) return false
    await this.pool.close(keyOf(r))
    return this.directory.delete(tenant, id)
  }

  async readFile(tenant: string, id: string, path: string): Promise<Uint8Array | undefined> {
    const r = await this.directory.get(tenant, id)
    if (!r) return undefined
    return this.withSandbox(r, async (sb) => {
      try {
        return await sb.readFile(path)
      } catch (err) {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
        throw err
      }
    })
  }

  async writeFile(tenant: string, id: string, path: string, data: Uint8Array): Promise<boolean> {
    const r = await this.directory.get(tenant, id)
    if (!r) return false
    await this.withSandbox(r, (sb) => sb.writeFile(path, data))
    return true
  }

  private async withSandbox<T>(
    r: SessionRecord,
    fn: (sb: Awaited<ReturnType<SessionPool['acquire']>>['sandbox']) => Promise<T>,
  ): Promise<T> {
    const lease = await this.pool.acquire(keyOf(r))
    let outcome: 'ok' | 'lost' = 'ok'
    try {
      return await fn(lease.sandbox)
    } catch (err) {
      if (err instanceof AppError && err.code === 'SANDBOX_LOST') outcome = 'lost'
      throw err
    } finally {
      await lease.release(outcome)
    }
  }
}

/** The pool key of a session record. */
export function keyOf(r: SessionRecord): SessionKey {
  return { tenant: r.tenant, sessionId: r.id, providerId: r.provider, profile: r.profile }
}

function view(r: SessionRecord): SessionView {
  return { id: r.id, provider: r.provider, profile: r.profile, createdAt: r.createdAt }
}
