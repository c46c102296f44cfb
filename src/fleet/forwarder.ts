import { setTimeout as sleep } from 'node:timers/promises'
import { AppError } from '../errors.js'
import { queueUnavailable } from '../redis/index.js'
import type { EngineDirectory } from '../queue/engines/engine-directory.js'
import { callGateway, GatewayMissed } from './client.js'
import type { GatewayService } from './protocol.js'

/** The session records, as {@link EngineForwarder} reads them. */
export interface SessionRecords {
  get(tenant: string, id: string): Promise<{ provider: string; profile: string } | undefined>
}

/** What {@link EngineForwarder} needs. */
export interface ForwarderDeps {
  readonly engines: EngineDirectory
  /** The session records: a session is found by (tenant, id) or not at all. */
  readonly directory: SessionRecords
  /** The engine this process's own worker reaches; its sessions are served here. */
  readonly localEngineId?: string
  /** `fleet.secret`; absent: sessions on other engines answer 503 saying to set it. */
  readonly secret?: string
  /** Whether sessions of this provider (or policy) live on a Docker engine of the fleet. */
  engineBound(provider: string): boolean
  /** The memory limit a new sandbox of the pair takes (bytes), for placement. */
  memoryOf(provider: string, profile: string): number
}

/**
 * Sends a session's file, process and code calls to a worker of the engine its sandbox lives on
 * (`queue.engineRouting`). The engine is the session's placement — the one its jobs go to — or, when
 * that engine is down or drained (or the session has none yet), a new placement made exactly as for
 * its next job; there the worker finds the old sandbox on a lost engine and rebinds the session
 * (`sandboxReplaced`, files lost), as a routed command does. Sessions of this process's own engine,
 * of providers without engines, and unknown ones are served locally.
 */
export class EngineForwarder {
  constructor(private readonly deps: ForwarderDeps) {}

  /**
   * Runs `service.method(tenant, sessionId, ...rest)` where the session's sandbox lives: `local()`
   * here, or the same call on a worker of its engine.
   */
  call<T>(
    service: GatewayService,
    method: string,
    args: readonly [string, string, ...unknown[]],
    local: () => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    return this.route(
      args[0],
      args[1],
      local,
      async (url, secret, engineId) =>
        (await callGateway(url, secret, engineId, { service, method, args: [...args] }, signal)) as T,
      signal,
    )
  }

  /**
   * Runs `local(found)` when tenant's session `sessionId` is served here, else `remote(url, secret,
   * engineId)` against a gateway of its engine, sent again (to the engine's current gateway, or once
   * the session is placed elsewhere) while it throws {@link GatewayMissed}.
   */
  async route<T>(
    tenant: string,
    sessionId: string,
    local: (found: boolean) => Promise<T>,
    remote: (url: string, secret: string, engineId: string) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    const { engines, directory } = this.deps
    const record = await directory.get(tenant, sessionId)
    // Unknown here means unknown (404) everywhere: the local service says so.
    if (!record) return local(false)
    if (!this.deps.engineBound(record.provider)) return local(true)
    const until = Date.now() + engines.staleMs + 2_000
    const missed = new Set<string>()
    for (;;) {
      const route = await engines
        .place(
          { tenant, sessionId, providerId: record.provider, profile: record.profile },
          Date.now(),
          this.deps.memoryOf(record.provider, record.profile),
        )
        .catch((err: unknown) => {
          throw queueUnavailable(err, `Finding the engine of session ${sessionId}`)
        })
      if ('none' in route) throw noEngine(route.live)
      if (route.engineId === this.deps.localEngineId) return local(true)
      const sent = await this.attempt(`session ${sessionId}`, route.engineId, remote, until, missed, signal)
      if (sent) return sent.value
    }
  }

  /**
   * Runs `local()` when `engineId` is this process's engine, else `remote(url, secret, engineId)`
   * against a gateway of that engine (sent again while it throws {@link GatewayMissed}, up to the
   * staleness window): for what lives on one engine and cannot move, such as a snapshot's image.
   * Throws `UNAVAILABLE` naming `what` when the engine is down (or, unless `drained` is allowed,
   * drained), or runs `opts.whenDown()` then when given.
   */
  async onEngine<T>(
    what: string,
    engineId: string,
    opts: { drained: boolean; whenDown?: () => Promise<T> },
    local: () => Promise<T>,
    remote: (url: string, secret: string, engineId: string) => Promise<T>,
    signal?: AbortSignal,
  ): Promise<T> {
    if (engineId === this.deps.localEngineId) return local()
    const until = Date.now() + this.deps.engines.staleMs + 2_000
    const missed = new Set<string>()
    for (;;) {
      const engine = await this.deps.engines.engine(engineId).catch((err: unknown) => {
        throw queueUnavailable(err, `Finding Docker engine ${engineId}`)
      })
      if (engine?.state !== 'live' && opts.whenDown) return opts.whenDown()
      if (engine?.state !== 'live' || (engine.draining && !opts.drained))
        throw new AppError(
          'UNAVAILABLE',
          `${what} lives on Docker engine ${engineId}, which is ${engine === undefined ? 'unknown to the fleet' : engine.state !== 'live' ? 'down' : 'drained'}; ` +
            `it exists on that engine only: bring the engine back (start \`sbx worker\` beside it, or \`sbx engine undrain ${engineId}\`)` +
            ', or take a new snapshot of a session on a live engine',
          { retryable: engine?.state !== 'live' },
        )
      const sent = await this.attempt(what, engineId, remote, until, missed, signal)
      if (sent) return sent.value
    }
  }

  /**
   * One try against a gateway of `engineId` not in `missed`: its value, or undefined when the call
   * should be sent again (at once to another live gateway after a {@link GatewayMissed}, which joins
   * `missed`; after a pause when there is none) and time is left.
   */
  /**
   * A gateway of a live worker of the engine, one that did not miss this call, picked at random so
   * calls spread over the engine's workers; else the engine record's URL (workers that keep no entry
   * of their own), unless it missed too.
   */
  private async gatewayOf(engineId: string, missed: ReadonlySet<string>): Promise<string | undefined> {
    const live = (await this.deps.engines.gateways(engineId)).filter((u) => !missed.has(u))
    if (live.length > 0) return live[Math.floor(Math.random() * live.length)]
    const url = (await this.deps.engines.engine(engineId))?.gatewayUrl
    return url !== undefined && !missed.has(url) ? url : undefined
  }

  private async attempt<T>(
    what: string,
    engineId: string,
    remote: (url: string, secret: string, engineId: string) => Promise<T>,
    until: number,
    missed: Set<string>,
    signal: AbortSignal | undefined,
  ): Promise<{ value: T } | undefined> {
    const secret = this.deps.secret
    if (secret === undefined)
      throw new AppError(
        'UNAVAILABLE',
        `${what} lives on Docker engine ${engineId}, which this API process does not ` +
          'reach: set fleet.secret (env SBX_FLEET_SECRET, the same on every sbx api and sbx worker) so ' +
          "its workers' gateways serve it (docs/deploy.md)",
      )
    const url = await this.gatewayOf(engineId, missed)
    if (url === undefined) {
      // No live worker of the engine serves a gateway (yet): a worker's next heartbeat brings one.
      if (Date.now() < until) {
        await sleep(250, undefined, signal ? { signal } : {})
        return undefined
      }
      throw new AppError(
        'UNAVAILABLE',
        `${what} lives on Docker engine ${engineId}, whose workers serve no gateway: start them with ` +
          'fleet.secret (env SBX_FLEET_SECRET) set, the same as this API process has',
        { retryable: true },
      )
    }
    try {
      return { value: await remote(url, secret, engineId) }
    } catch (err) {
      if (!(err instanceof GatewayMissed)) throw err
      // That worker is gone: another live worker of the engine gets the call at once; with none, its
      // entry goes stale within the window (or the engine goes down and the session moves).
      missed.add(url)
      if (await this.gatewayOf(engineId, missed)) return undefined
      if (Date.now() >= until)
        throw new AppError(
          'UNAVAILABLE',
          `no worker of Docker engine ${engineId} answers (${err.message}); start \`sbx worker\` ` +
            'beside that engine, or drain it (`sbx engine drain`) to move its sessions',
          { retryable: true, cause: err },
        )
      // None left: after a pause, every gateway still listed is tried again (a worker restarting on
      // the same address comes back there).
      missed.clear()
      await sleep(250, undefined, signal ? { signal } : {})
      return undefined
    }
  }
}

function noEngine(live: number): AppError {
  return new AppError(
    live === 0 ? 'UNAVAILABLE' : 'QUOTA_EXCEEDED',
    live === 0
      ? 'No live Docker engine for this session: start `sbx worker` beside an engine, or `sbx engine undrain <id>`'
      : `Every live Docker engine (${live}) is at its sandbox cap or memory capacity; delete sessions, add an engine, or raise the cap`,
    { retryable: true },
  )
}
