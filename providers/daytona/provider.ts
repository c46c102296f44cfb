import { Daytona, DaytonaRateLimitError, type Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { randomUUID } from 'node:crypto'
import { AppError } from '../../src/errors.js'
import type { ResolvedProfile } from '../../src/sandbox/profiles.js'
import {
  type CreateOptions,
  LABELS,
  type Labels,
  type Sandbox,
  type SandboxHealth,
  type SandboxProvider,
  type SandboxRef,
} from '../../src/sandbox/types.js'
import {
  OWNER,
  PROVIDER_LABELS,
  isOwned,
  matchesLabels,
  ownedLabels,
  ownerFilter,
  settingsOf,
} from '../../src/sandbox/labels.js'
import { buildCreateParams } from './create-params.js'
import { type ErrorScope, isSandboxGone, mapCreateError, mapDaytonaError, redactUrl } from './errors.js'
import { type DaytonaProviderOptions, DaytonaProviderOptionsSchema } from './options.js'
import { DaytonaSandbox, type HandleContext } from './sandbox.js'
import { classifyState, isStoppedState } from './states.js'
import { assertProfileFor, assertRefFor, raceAbort } from '../../src/sandbox/define-provider.js'

/** Provider id of the Daytona provider. */
export const DAYTONA_PROVIDER_ID = 'daytona'

/** `SANDBOX_LOST` for a sandbox in a state commands cannot run in (and that will not change by waiting). */
function lostError(sandboxId: string, remote: RemoteSandbox): AppError {
  const state = remote.state ?? 'unknown'
  if (isStoppedState(state)) {
    // Found so after a call failed: the stop came while it ran (or after the handle's last look).
    const auto = remote.autoStopInterval
      ? `Daytona stops a sandbox after ${remote.autoStopInterval} min without toolbox activity (its auto-stop), or on request`
      : 'stopped on request'
    return new AppError(
      'SANDBOX_LOST',
      `Daytona sandbox ${sandboxId} is ${state} (${auto}): what ran in it is gone, its files are kept; ` +
        'destroy it and create a new sandbox',
    )
  }
  const why = remote.errorReason ? ` (${remote.errorReason})` : ''
  if (state === 'destroyed' || state === 'destroying') {
    const auto =
      remote.autoDeleteInterval === 0
        ? ' (Daytona deletes a sandbox with auto-delete 0 as soon as it stops, e.g. after its auto-stop)'
        : ''
    return new AppError(
      'SANDBOX_LOST',
      `Daytona sandbox ${sandboxId} is ${state}${why}${auto}; create a new sandbox`,
    )
  }
  return new AppError(
    'SANDBOX_LOST',
    `Daytona sandbox ${sandboxId} is ${state}${why}; destroy it and create a new sandbox`,
  )
}

/** Whether the sandbox is destroyed or on its way there (listing is eventually consistent). */
function isGoing(remote: RemoteSandbox): boolean {
  return remote.state === 'destroyed' || remote.state === 'destroying' || remote.desiredState === 'destroyed'
}

/** The Daytona provider: the SPI plus the SDK client it uses (for diagnostics and tests). */
export interface DaytonaProvider extends SandboxProvider {
  readonly daytona: Daytona
  health(): Promise<SandboxHealth>
  /** Releases the SDK client (its event socket); sandboxes stay. */
  close(): Promise<void>
}

/**
 * Creates the Daytona provider (id `daytona`) on the official `@daytonaio/sdk` client. Commands run
 * under an in-sandbox wrapper that separates stdout and stderr, enforces our timeout on the whole
 * process group (keeping partial output) and caps each stream; every sandbox carries the create
 * labels and a server-side lifetime (auto-stop, then auto-delete). SDK errors are mapped to
 * `AppError`s by class: 429 → retryable, 404 → `SANDBOX_LOST`, 401/403 → `CONFIG_INVALID` (a
 * file the sandbox user may not access → `BAD_REQUEST`). A stopped sandbox is started again by
 * `connect` and by a handle's `ready()` after an idle long enough for Daytona's auto-stop.
 */
export function createDaytonaProvider(options: DaytonaProviderOptions): DaytonaProvider {
  const opts = DaytonaProviderOptionsSchema.parse(options)
  const scope: ErrorScope = { apiUrl: redactUrl(opts.apiUrl), apiKey: opts.apiKey }
  const daytona = new Daytona({
    apiKey: opts.apiKey,
    apiUrl: opts.apiUrl,
    ...(opts.target ? { target: opts.target } : {}),
    requestTimeoutMs: opts.requestTimeoutMs,
    useDeprecatedPolling: !opts.eventStreaming,
  })
  const createTimeoutSec = Math.ceil(opts.createTimeoutMs / 1000)
  const handles = new Set<DaytonaSandbox>()

  async function checkLost(sandboxId: string): Promise<AppError | undefined> {
    try {
      const remote = await daytona.get(sandboxId)
      const state = classifyState(remote.state)
      if (state === 'running' || state === 'transient') return undefined
      return lostError(sandboxId, remote)
    } catch (err) {
      return isSandboxGone(err) ? mapDaytonaError(err, scope, 'checking the sandbox', sandboxId) : undefined
    }
  }

  /**
   * Brings a sandbox to `started` if it can be: waits for a create or start, waits for a stop to
   * end and starts it again (files kept, processes gone), starts a stopped or archived one;
   * `SANDBOX_LOST` for one that is gone or failed. Re-reads the state first when `refresh`.
   * Says whether it found the sandbox running or (re)started it.
   */
  async function revive(
    remote: RemoteSandbox,
    what: string,
    signal?: AbortSignal,
    refresh = true,
  ): Promise<'running' | 'restarted'> {
    const deadline = Date.now() + opts.createTimeoutMs
    const left = (): number => Math.max(0.001, (deadline - Date.now()) / 1000)
    try {
      if (refresh) await raceAbort(remote.refreshData(), signal)
      for (let pause = 100; ; pause = Math.min(pause * 2, 1000)) {
        switch (classifyState(remote.state)) {
          case 'running':
            return pause === 100 ? 'running' : 'restarted'
          case 'transient':
            await raceAbort(remote.waitUntilStarted(left()), signal)
            return 'restarted'
          case 'settling':
            // Stopping, archiving or pausing: once it has, it can be started again.
            if (Date.now() > deadline) throw lostError(remote.id, remote)
            await raceAbort(new Promise((resolve) => setTimeout(resolve, pause)), signal)
            await raceAbort(remote.refreshData(), signal)
            continue
          case 'resumable':
            // Auto-stop keeps the files: start it again rather than lose the session's state.
            await raceAbort(remote.start(left()), signal)
            return 'restarted'
          case 'lost':
            throw lostError(remote.id, remote)
        }
      }
    } catch (err) {
      signal?.throwIfAborted()
      if (err instanceof AppError) throw err
      // A start refused because the sandbox went meanwhile (auto-delete) is a lost sandbox.
      const lost = isSandboxGone(err) ? undefined : await checkLost(remote.id)
      throw lost ?? mapDaytonaError(err, scope, what, remote.id)
    }
  }

  const context: HandleContext = { scope, options: opts, checkLost, revive }

  const handle = (ref: SandboxRef, remote: RemoteSandbox, labels: Labels): DaytonaSandbox => {
    const sandbox = new DaytonaSandbox(ref, remote, settingsOf(labels, '/tmp'), context, (closed) =>
      handles.delete(closed),
    )
    handles.add(sandbox)
    return sandbox
  }

  const deleteQuietly = async (remote: RemoteSandbox): Promise<void> => {
    await remote.delete(createTimeoutSec).catch(() => undefined)
  }

  /** Deletes whatever a failed create call may have left behind (found by its create label). */
  const cleanupCreate = async (createId: string): Promise<void> => {
    try {
      for await (const remote of daytona.list({ labels: { [PROVIDER_LABELS.createId]: createId } })) {
        if (remote.labels?.[PROVIDER_LABELS.createId] === createId) await deleteQuietly(remote)
      }
    } catch {
      // Best effort: the labels and the server-side lifetime still let the reaper find it.
    }
  }

  async function create(profile: ResolvedProfile, { labels, signal }: CreateOptions): Promise<Sandbox> {
    assertProfileFor(DAYTONA_PROVIDER_ID, profile)
    signal?.throwIfAborted()
    const createId = randomUUID()
    const allLabels: Labels = {
      ...ownedLabels(labels, profile, opts.instanceId),
      [PROVIDER_LABELS.createId]: createId,
    }
    const what = `creating a Daytona sandbox for profile ${profile.name}`
    let remote: RemoteSandbox
    try {
      // Not abortable: an aborted create could still leave a sandbox. The abort is honoured after.
      remote = await daytona.create(buildCreateParams(profile, allLabels, opts), {
        timeout: createTimeoutSec,
      })
    } catch (err) {
      const mapped = mapCreateError(err, scope, what)
      // A refused create (429, other 4xx) left nothing; a timeout, 5xx or failed start may have.
      if (mapped.retryable && !(err instanceof DaytonaRateLimitError)) await cleanupCreate(createId)
      throw mapped
    }
    const ref: SandboxRef = {
      providerId: DAYTONA_PROVIDER_ID,
      id: remote.id,
      profile: profile.name,
      labels: allLabels,
    }
    const sandbox = handle(ref, remote, allLabels)
    try {
      signal?.throwIfAborted()
      await sandbox.ensureDir(profile.cwd)
      signal?.throwIfAborted()
      return sandbox
    } catch (err) {
      await sandbox.close()
      await deleteQuietly(remote)
      if (signal?.aborted) throw signal.reason
      const mapped = err instanceof AppError ? err : mapCreateError(err, scope, what)
      if (mapped.code === 'CONFIG_INVALID') throw mapped
      throw new AppError('SANDBOX_CREATE_FAILED', `${what}: ${mapped.message}`, {
        retryable: mapped.retryable,
        cause: err,
      })
    }
  }

  async function connect(ref: SandboxRef, { signal }: { signal?: AbortSignal } = {}): Promise<Sandbox> {
    assertRefFor(DAYTONA_PROVIDER_ID, ref)
    const what = `connecting to sandbox ${ref.id}`
    let remote: RemoteSandbox
    try {
      remote = await raceAbort(daytona.get(ref.id), signal)
    } catch (err) {
      signal?.throwIfAborted()
      throw mapDaytonaError(err, scope, what, ref.id)
    }
    const labels = remote.labels ?? {}
    if (!isOwned(labels)) {
      throw new AppError(
        'BAD_REQUEST',
        `Daytona sandbox ${ref.id} is not a sandbox-router sandbox (no ${LABELS.owner} label)`,
      )
    }
    await revive(remote, what, signal, false)
    return handle(
      {
        providerId: DAYTONA_PROVIDER_ID,
        id: remote.id,
        profile: labels[LABELS.profile] ?? ref.profile,
        labels,
      },
      remote,
      labels,
    )
  }

  async function list(filter: { labels: Labels }): Promise<SandboxRef[]> {
    const wanted = ownerFilter(filter.labels)
    const refs: SandboxRef[] = []
    try {
      for await (const remote of daytona.list({ labels: wanted })) {
        const labels = remote.labels ?? {}
        // Checked here too: a filter the server ignored must never hand others' sandboxes to a reaper.
        if (!matchesLabels(labels, wanted)) continue
        if (isGoing(remote)) continue
        refs.push({
          providerId: DAYTONA_PROVIDER_ID,
          id: remote.id,
          profile: labels[LABELS.profile] ?? '',
          labels,
        })
      }
    } catch (err) {
      throw mapDaytonaError(err, scope, 'listing Daytona sandboxes')
    }
    return refs
  }

  async function destroy(ref: SandboxRef): Promise<void> {
    try {
      const remote = await daytona.get(ref.id)
      if (isGoing(remote)) return
      // Waits until Daytona reports it destroyed: a caller that saw destroy resolve never finds
      // the sandbox answering (or listed) afterwards.
      await remote.delete(createTimeoutSec, true)
    } catch (err) {
      if (isSandboxGone(err)) return
      throw mapDaytonaError(err, scope, `destroying sandbox ${ref.id}`)
    }
  }

  async function health(): Promise<SandboxHealth> {
    try {
      // A filter nothing matches: one authenticated round trip, no sandboxes materialised.
      await daytona
        .list({ labels: { [LABELS.owner]: OWNER, [PROVIDER_LABELS.probe]: randomUUID() }, limit: 1 })
        .next()
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: mapDaytonaError(err, scope, 'probing the Daytona API').message }
    }
  }

  async function close(): Promise<void> {
    await Promise.all([...handles].map((h) => h.close()))
    await daytona[Symbol.asyncDispose]()
  }

  return { id: DAYTONA_PROVIDER_ID, daytona, create, connect, list, destroy, health, close }
}
