/**
 * E2B's sandbox lifecycle over our pause hooks: pause (memory kept: the sandbox is frozen in place;
 * filesystem-only, E2B's `keepMemory: false`: its processes are ended first, as a cold boot would
 * lose them, and its files kept), resume, and the create-time policy (`lifecycle.onTimeout: 'pause'`
 * = `autoPause`, `autoPauseMemory`, `autoResume`): at the end of its lifetime such a sandbox is
 * paused instead of killed, and with `autoResume` a request to one of its ports through its host
 * name wakes it. Only where the provider can pause here (Docker under `sbx serve`).
 */
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError } from './errors.js'
import type { E2BSandbox, E2BSandboxStore } from './sandboxes.js'

/** How long a paused sandbox's record is kept (s); its profile's `idleTtlMs` may end it sooner. */
export const PAUSED_KEEP_S = 86_400

type Json = Record<string, unknown>

/** A create's lifecycle policy, as the record keeps it. */
export interface LifecyclePolicy {
  onTimeout?: 'pause'
  autoPauseFilesystemOnly?: boolean
  autoResume?: boolean
}

/**
 * Reads a create body's `autoPause`, `autoPauseMemory` and `autoResume: { enabled }` (400 for a
 * wrong shape or a combination E2B refuses); `{}` for the default, kill at the end of the lifetime.
 */
export function lifecyclePolicyOf(body: Json): LifecyclePolicy {
  const { autoPause, autoPauseMemory, autoResume } = body
  if (autoPause !== undefined && autoPause !== null && typeof autoPause !== 'boolean')
    throw new E2BApiError(400, 'autoPause must be a boolean')
  if (autoPauseMemory !== undefined && autoPauseMemory !== null && typeof autoPauseMemory !== 'boolean')
    throw new E2BApiError(400, 'autoPauseMemory must be a boolean')
  let resume: boolean | undefined
  if (autoResume !== undefined && autoResume !== null) {
    const enabled = (autoResume as Json).enabled
    if (typeof autoResume !== 'object' || Array.isArray(autoResume) || typeof enabled !== 'boolean')
      throw new E2BApiError(400, 'autoResume must be an object { enabled: boolean }')
    resume = enabled
  }
  if (autoPause !== true) {
    if (resume) throw new E2BApiError(400, "autoResume needs autoPause: true (lifecycle.onTimeout: 'pause')")
    return {}
  }
  if (autoPauseMemory === false && resume)
    throw new E2BApiError(
      400,
      'autoResume cannot be combined with autoPauseMemory: false: a filesystem-only pause is resumed by Sandbox.connect only',
    )
  return {
    onTimeout: 'pause',
    ...(autoPauseMemory === false ? { autoPauseFilesystemOnly: true } : {}),
    ...(resume ? { autoResume: true } : {}),
  }
}

/** Pause, resume and their automatic forms for the routes and the sweeper of one store. */
export interface E2BLifecycle {
  /** Throws 501 (naming the provider) unless the sandbox can be paused here. */
  assertPausable(s: E2BSandbox, action: 'pause' | 'resume'): void
  /** Pauses a running sandbox (`filesystemOnly`: its processes are ended first); keeps its record 24 h. */
  pause(s: E2BSandbox, opts: { filesystemOnly: boolean }): Promise<void>
  /** Resumes a paused sandbox with `ms` of lifetime; 404 when it was destroyed while paused. */
  resume(s: E2BSandbox, ms: number): Promise<void>
  /** Thaws a paused sandbox's container (before it is killed); errors as {@link resume}. */
  thaw(s: E2BSandbox): Promise<void>
  /** The end of an `onTimeout: 'pause'` sandbox's lifetime: pauses it as create asked. */
  pauseAtTimeout(s: E2BSandbox): Promise<void>
  /**
   * Resumes a paused sandbox created with `autoResume` (with its create-time lifetime) and returns
   * it; `false` when it is paused and may not be woken by traffic.
   */
  wake(s: E2BSandbox): Promise<boolean>
}

/** The lifecycle operations over `deps`' pause hooks and processes. */
export function e2bLifecycle(deps: E2BRouteDeps, store: E2BSandboxStore): E2BLifecycle {
  const hooks = () => {
    const setPaused = deps.e2b.setPaused
    if (!setPaused) throw new E2BApiError(501, 'pause is not supported by this server')
    return setPaused
  }
  const assertPausable = (s: E2BSandbox, action: 'pause' | 'resume'): void => {
    if (!deps.e2b.setPaused || !deps.e2b.canPause?.(s.provider))
      // Not 409: the SDK reads a 409 on pause as "already paused" and returns false.
      throw new E2BApiError(
        501,
        `${action} is not supported: provider '${s.provider}' (template '${s.templateId}', profile '${s.profile}') ` +
          'cannot pause sandboxes here; keep the sandbox running (setTimeout) or kill it',
      )
  }
  const thaw = async (s: E2BSandbox): Promise<void> => {
    assertPausable(s, 'resume')
    try {
      await hooks()(s.tenant, s.sandboxId, false, s.pausedSandbox)
    } catch (err) {
      if ((err as { code?: string }).code === 'NOT_FOUND')
        throw new E2BApiError(
          404,
          `sandbox "${s.sandboxId}" was destroyed while paused (${(err as Error).message}); ` +
            "a paused sandbox is kept while its profile's idleTtlMs allows: create a new one",
        )
      throw err
    }
  }
  /** Ends every process of the sandbox and forgets its envd process table (a cold boot's loss). */
  const endProcesses = async (s: E2BSandbox): Promise<void> => {
    const procs = deps.processes
    if (!procs) return
    const running = ((await procs.list(s.tenant, s.sandboxId)) ?? []).filter((p) => p.state === 'running')
    await Promise.all(running.map((p) => procs.signal(s.tenant, s.sandboxId, p.id, 'SIGKILL', 5_000)))
    for (const pid of (await store.processes(s.sandboxId)).keys()) await store.deleteProcess(s.sandboxId, pid)
  }
  const pause = async (s: E2BSandbox, opts: { filesystemOnly: boolean }): Promise<void> => {
    assertPausable(s, 'pause')
    if (opts.filesystemOnly) await endProcesses(s)
    const frozen = await hooks()(s.tenant, s.sandboxId, true)
    await store.setPaused(s, true, PAUSED_KEEP_S * 1000, frozen, opts.filesystemOnly)
    deps.logger.info(
      { tenant: s.tenant, sandboxId: s.sandboxId, filesystemOnly: opts.filesystemOnly },
      'e2b sandbox paused',
    )
  }
  const resume = async (s: E2BSandbox, ms: number): Promise<void> => {
    await thaw(s)
    await store.setPaused(s, false, ms)
    deps.logger.info({ tenant: s.tenant, sandboxId: s.sandboxId }, 'e2b sandbox resumed')
  }
  return {
    assertPausable,
    pause,
    resume,
    thaw,
    pauseAtTimeout: (s) => pause(s, { filesystemOnly: s.autoPauseFilesystemOnly === true }),
    async wake(s) {
      if (!s.paused) return true
      if (!s.autoResume || s.pausedFilesystemOnly) return false
      await resume(s, s.timeoutMs ?? 300_000)
      return true
    },
  }
}
