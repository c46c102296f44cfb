import { AppError } from '../errors.js'
import type { SessionService, SessionView } from './index.js'
import type { Lease, SandboxReplacement, SessionKey, SessionPool, SessionState } from '../sessions/types.js'
import type { SessionDirectory, SessionRecord } from './session-directory.js'
import { assertTenantMayRoute } from '../routing/policies.js'
import type { TenantRouteAllowList } from '../routing/policies.js'
import { useLease } from './use-lease.js'
import type { ProfileResolver } from '../sandbox/resolver.js'

/**
 * {@link SessionService} on the session directory (records) and the session pool (sandboxes):
 * deleting a session destroys its sandbox; files go through a lease of the session's sandbox.
 */
export class PooledSessionService implements SessionService {
  constructor(
    private readonly directory: SessionDirectory,
    private readonly pool: SessionPool,
    /** Checks a provider/profile pair (UNKNOWN_PROVIDER / UNKNOWN_PROFILE listing the known ones). */
    private readonly targets: ProfileResolver,
    /** Per tenant, the providers and policies its sessions may use (config `routing.tenants`). */
    private readonly tenantRoutes: TenantRouteAllowList = {},
  ) {}

  async create(
    tenant: string,
    input: { id?: string; provider: string; profile: string },
    opts: { admit?: boolean } = {},
  ): Promise<SessionView> {
    assertTenantMayRoute(this.tenantRoutes, tenant, input.provider)
    this.targets.resolve(input.provider, input.profile)
    const record: SessionRecord = {
      id: input.id ?? `s-${crypto.randomUUID()}`,
      tenant,
      provider: input.provider,
      profile: input.profile,
      createdAt: Date.now(),
    }
    // A session whose first use could not get a sandbox is refused now (429), not at every later call.
    if (opts.admit) await this.pool.admit(keyOf(record))
    return this.view(await this.directory.create(record))
  }

  async list(tenant: string): Promise<SessionView[]> {
    return Promise.all((await this.directory.list(tenant)).map((r) => this.view(r)))
  }

  async get(tenant: string, id: string): Promise<SessionView | undefined> {
    const r = await this.directory.get(tenant, id)
    return r ? this.view(r) : undefined
  }

  async acknowledge(tenant: string, id: string): Promise<SessionView | undefined> {
    const r = await this.directory.get(tenant, id)
    if (!r) return undefined
    await this.pool.acknowledge(keyOf(r))
    return this.view(r)
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
    return this.withSandbox(r, async (sb, replaced) => {
      try {
        return await sb.readFile(path)
      } catch (err) {
        if (!(err instanceof AppError && err.code === 'NOT_FOUND')) throw err
        const lost = replaced
          ? `; the session's sandbox was replaced at ${new Date(replaced.at).toISOString()} ` +
            `(${replaced.reason}) and its files were lost: acknowledge with POST /v1/sessions/${r.id}/ack`
          : ''
        throw new AppError('NOT_FOUND', `no file ${path} in session ${r.id}${lost}`, { cause: err })
      }
    })
  }

  async writeFile(
    tenant: string,
    id: string,
    path: string,
    data: Uint8Array,
  ): Promise<Pick<SessionView, 'sandboxReplaced'> | undefined> {
    const r = await this.directory.get(tenant, id)
    if (!r) return undefined
    return this.withSandbox(r, async (sb, replaced) => {
      await sb.writeFile(path, data)
      return replaced ? { sandboxReplaced: replaced } : {}
    })
  }

  private async withSandbox<T>(
    r: SessionRecord,
    fn: (sb: Lease['sandbox'], replaced: SandboxReplacement | undefined) => Promise<T>,
  ): Promise<T> {
    const lease = await this.pool.acquire(keyOf(r))
    return useLease(lease, async () => {
      return await fn(lease.sandbox, lease.sandboxReplaced)
    })
  }

  /** The record with what the pool knows: the bound sandbox and an unacknowledged replacement. */
  private async view(r: SessionRecord): Promise<SessionView> {
    const state: SessionState = await this.pool.state(keyOf(r)).catch((err: unknown) => {
      // A record of a provider or profile no longer configured still lists; it just has no sandbox.
      if (err instanceof AppError && STALE_TARGET.has(err.code)) return {}
      throw err
    })
    return {
      id: r.id,
      provider: r.provider,
      profile: r.profile,
      createdAt: r.createdAt,
      ...(state.sandboxId ? { sandboxId: state.sandboxId } : {}),
      ...(state.sandboxReplaced ? { sandboxReplaced: state.sandboxReplaced } : {}),
    }
  }
}

/** Errors of a session record whose provider or profile the config no longer has. */
const STALE_TARGET = new Set<string>(['UNKNOWN_PROVIDER', 'UNKNOWN_PROFILE', 'BAD_REQUEST'])

/** The pool key of a session record. */
export function keyOf(r: SessionRecord): SessionKey {
  return { tenant: r.tenant, sessionId: r.id, providerId: r.provider, profile: r.profile }
}
