/*
 * What every provider does the same way at its edge, written once. A provider author writes a
 * backend (the SDK calls: create, find, open a handle, list, destroy) and `defineProvider` turns it
 * into the SPI's `create` / `connect` / `list` / `destroy`, with the shared rules:
 *
 * - a profile or ref of another provider is refused (`CONFIG_INVALID`);
 * - a new sandbox carries the caller's labels plus the service's own (owner, profile, instance,
 *   the settings `connect` reads back), see labels.ts;
 * - `connect` refuses a sandbox without the owner label (`BAD_REQUEST`), lets the backend revive
 *   it (`revive`: start a stopped one, refuse one that cannot serve) and rebuilds the handle's
 *   settings (cwd, concurrency bound) from the labels;
 * - `list` adds the owner label to the filter and checks every answer against it again (a filter
 *   the backend ignored must never hand someone else's sandbox to a reaper);
 * - a sandbox whose create failed half-way (or was aborted after the backend made it) is closed
 *   and destroyed before the error (or the abort reason) is thrown;
 * - an abort wins over the error it caused: the caller sees its own reason.
 */
import { AppError } from '../errors.js'
import {
  LABELS,
  type LabelSettings,
  OWNER,
  isOwned,
  matchesLabels,
  ownedLabels,
  ownerFilter,
  settingsOf,
} from './labels.js'
import type { ResolvedProfile } from './profiles.js'
import type { CreateOptions, Labels, Sandbox, SandboxProvider, SandboxRef } from './types.js'

/** Throws `CONFIG_INVALID` unless `profile` targets `providerId`. */
export function assertProfileFor(providerId: string, profile: ResolvedProfile): void {
  if (profile.provider !== providerId) {
    throw new AppError(
      'CONFIG_INVALID',
      `profile ${profile.name} targets provider '${profile.provider}', not '${providerId}'`,
    )
  }
}

/** Throws `CONFIG_INVALID` unless `ref` belongs to `providerId`. */
export function assertRefFor(providerId: string, ref: SandboxRef): void {
  if (ref.providerId !== providerId) {
    throw new AppError(
      'CONFIG_INVALID',
      `ref ${ref.id} belongs to provider '${ref.providerId}', not '${providerId}'`,
    )
  }
}

/** `promise`, or the abort reason as soon as `signal` aborts (the promise itself keeps going). */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(signal.reason as unknown)
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => reject(signal.reason as unknown)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort)
        resolve(value)
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort)
        reject(err)
      },
    )
  })
}

/** One sandbox as the backend sees it: its id, and the backend's own object for it (`N`). */
export interface BackendSandbox<N> {
  /** Provider-native id (what {@link SandboxRef.id} becomes). */
  id: string
  /** The backend's object (an SDK handle, an inspect answer): handed back to `open` and `discard`. */
  native: N
}

/** A sandbox `find` located for `connect`: also its labels, which the owner check reads. */
export interface FoundSandbox<N> extends BackendSandbox<N> {
  labels: Labels
}

/** What {@link ProviderBackend.createFailed} knows about the create that failed. */
export interface FailedCreate<N, H extends Sandbox> {
  ref: SandboxRef
  native: N
  profile: ResolvedProfile
  /** The handle, when `open` made it (already closed). */
  handle: H | undefined
}

/** One sandbox of a `list` answer. */
export interface ListedSandbox {
  id: string
  labels: Labels
}

/**
 * The backend half of a provider: the calls to its SDK or engine. Every method throws `AppError`s
 * mapped at this edge (`SANDBOX_LOST` for a sandbox that is gone, `SANDBOX_CREATE_FAILED` for a
 * refused create, retryable when transient, `CONFIG_INVALID` for bad credentials). `N` is the
 * backend's object for one sandbox, `H` its handle class.
 */
export interface ProviderBackend<N, H extends Sandbox = Sandbox> {
  /** How messages name one of its sandboxes, e.g. `` (id) => `E2B sandbox ${id}` ``. */
  describe(id: string): string
  /** What the backend calls its labels in messages (`label`, `metadata`). @default 'label' */
  labelNoun?: string
  /** Working directory of a handle reconnected from labels that name none. */
  defaultCwd: string
  /** Labels of the backend's own to add on create (beside the caller's and the service's). */
  createLabels?(profile: ResolvedProfile): Labels
  /**
   * Makes the sandbox, carrying `labels`. Takes no abort signal: an aborted create call could still
   * leave a sandbox behind, so the abort is honoured once it returned. When it throws, it must
   * have left nothing (or cleaned up itself).
   */
  create(profile: ResolvedProfile, labels: Labels): Promise<BackendSandbox<N>>
  /**
   * A handle on a sandbox `create` made or `find` found, with the settings read from its labels.
   * When it throws, it has closed what it opened.
   */
  open(ref: SandboxRef, native: N, settings: LabelSettings, signal?: AbortSignal): Promise<H>
  /**
   * Starts a sandbox `create` made, before its handle is opened: for a backend whose create only
   * makes it (Docker's create-then-start), or that must attach something of its own first (a proxy
   * the sandbox talks through). A failure is handled as one of `open`'s: mapped by `createFailed`,
   * the sandbox discarded.
   */
  start?(ref: SandboxRef, native: N, profile: ResolvedProfile, signal?: AbortSignal): Promise<void>
  /**
   * Makes a sandbox `connect` found usable again, after the owner check and before its handle is
   * opened: starts one that stopped, takes over what another process attached, or refuses one that
   * cannot serve (`SANDBOX_LOST`). `ref` is the owned ref, with the sandbox's labels.
   */
  revive?(ref: SandboxRef, native: N, signal?: AbortSignal): Promise<void>
  /** Readies a new sandbox before it is handed out (e.g. creates the profile's cwd). */
  prepare?(handle: H, native: N, profile: ResolvedProfile, signal?: AbortSignal): Promise<void>
  /**
   * The error a create ends in when `start`, `open` or `prepare` failed (not on abort); called
   * before the sandbox is destroyed, so a probe can still look at it.
   * @default `CONFIG_INVALID` as it is, anything else as a {@link createFailed}
   */
  createFailed?(err: unknown, failed: FailedCreate<N, H>): Promise<Error> | Error
  /** Destroys a sandbox whose create did not finish; errors are ignored (best effort). */
  discard(ref: SandboxRef, native: N): Promise<void>
  /** Looks a sandbox up for `connect` (`SANDBOX_LOST` when it is gone). */
  find(ref: SandboxRef, signal?: AbortSignal): Promise<FoundSandbox<N>>
  /** Sandboxes carrying every one of `labels` (the owner label among them). */
  list(labels: Labels): Promise<ListedSandbox[]>
  /** Destroys the sandbox; one already gone is not an error. */
  destroy(ref: SandboxRef): Promise<void>
}

/** What {@link defineProvider} makes: the SPI's required half. Add capabilities beside it. */
export type DefinedProvider<H extends Sandbox = Sandbox> = Pick<
  SandboxProvider,
  'id' | 'list' | 'destroy'
> & {
  create(profile: ResolvedProfile, opts: CreateOptions): Promise<H>
  connect(ref: SandboxRef, opts?: { signal?: AbortSignal }): Promise<H>
}

/** The definition of a provider: its id, the creating instance, and its backend. */
export interface ProviderDefinition<N, H extends Sandbox = Sandbox> {
  /** Provider id: what profiles' `provider` and refs' `providerId` name. */
  id: string
  /** Stamped as the instance label on what it creates (diagnostics). */
  instanceId?: string
  backend: ProviderBackend<N, H>
}

/** `SANDBOX_CREATE_FAILED` for a sandbox that was made but could not be started or readied. */
export function createFailed(what: string, err: unknown): AppError {
  const message = err instanceof Error ? err.message : String(err)
  return new AppError('SANDBOX_CREATE_FAILED', `${what} failed: ${message}`, {
    retryable: err instanceof AppError ? err.retryable : false,
    cause: err,
  })
}

/**
 * Makes a provider's `create`, `connect`, `list` and `destroy` from its backend, with the edge
 * rules every provider shares (see the top of this file). The author adds what the provider has
 * beside them (`health`, `close`, `pause`, capabilities):
 *
 * ```ts
 * return { ...defineProvider({ id: 'mine', backend }), health, close }
 * ```
 */
export function defineProvider<N, H extends Sandbox = Sandbox>(
  definition: ProviderDefinition<N, H>,
): DefinedProvider<H> {
  const { id, instanceId, backend } = definition

  const failure = async (err: unknown, failed: FailedCreate<N, H>): Promise<unknown> => {
    if (backend.createFailed) return backend.createFailed(err, failed)
    if (err instanceof AppError && err.code === 'CONFIG_INVALID') return err
    return createFailed(`starting ${backend.describe(failed.ref.id)}`, err)
  }

  async function create(profile: ResolvedProfile, { labels, signal }: CreateOptions): Promise<H> {
    assertProfileFor(id, profile)
    signal?.throwIfAborted()
    const all: Labels = { ...ownedLabels(labels, profile, instanceId), ...backend.createLabels?.(profile) }
    const made = await backend.create(profile, all)
    const ref: SandboxRef = { providerId: id, id: made.id, profile: profile.name, labels: all }
    let handle: H | undefined
    try {
      signal?.throwIfAborted()
      await backend.start?.(ref, made.native, profile, signal)
      handle = await backend.open(ref, made.native, settingsOf(all, profile.cwd), signal)
      await backend.prepare?.(handle, made.native, profile, signal)
      signal?.throwIfAborted()
      return handle
    } catch (err) {
      await handle?.close().catch(() => undefined)
      const mapped = signal?.aborted
        ? (signal.reason as unknown)
        : await failure(err, { ref, native: made.native, profile, handle })
      await backend.discard(ref, made.native).catch(() => undefined)
      throw mapped
    }
  }

  async function connect(ref: SandboxRef, { signal }: { signal?: AbortSignal } = {}): Promise<H> {
    assertRefFor(id, ref)
    let found: FoundSandbox<N>
    try {
      found = await backend.find(ref, signal)
    } catch (err) {
      signal?.throwIfAborted()
      throw err
    }
    if (!isOwned(found.labels)) {
      throw new AppError(
        'BAD_REQUEST',
        `${backend.describe(ref.id)} is not a ${OWNER} sandbox (no ${LABELS.owner} ${backend.labelNoun ?? 'label'})`,
      )
    }
    const owned: SandboxRef = {
      providerId: id,
      id: found.id,
      profile: found.labels[LABELS.profile] ?? ref.profile,
      labels: found.labels,
    }
    try {
      await backend.revive?.(owned, found.native, signal)
      return await backend.open(owned, found.native, settingsOf(found.labels, backend.defaultCwd), signal)
    } catch (err) {
      signal?.throwIfAborted()
      throw err
    }
  }

  async function list(filter: { labels: Labels }): Promise<SandboxRef[]> {
    const wanted = ownerFilter(filter.labels)
    const refs: SandboxRef[] = []
    for (const s of await backend.list(wanted)) {
      if (!matchesLabels(s.labels, wanted)) continue
      refs.push({ providerId: id, id: s.id, profile: s.labels[LABELS.profile] ?? '', labels: s.labels })
    }
    return refs
  }

  return { id, create, connect, list, destroy: (ref) => backend.destroy(ref) }
}
