import { type Daytona, DaytonaRateLimitError, type Sandbox as RemoteSandbox } from '@daytonaio/sdk'
import { randomUUID } from 'node:crypto'
import {
  AppError,
  type ListedSandbox,
  PROVIDER_LABELS,
  type ProviderBackend,
  raceAbort,
  type ResolvedProfile,
} from '../../src/sandbox/index.js'
import { buildCreateParams } from './create-params.js'
import { isSandboxGone, mapCreateError, mapDaytonaError } from './errors.js'
import type { Reviver } from './revive.js'
import { DaytonaSandbox, type HandleContext } from './sandbox.js'
import { isGoing } from './states.js'

/** What the backend shares with its provider. */
export interface DaytonaBackendDeps {
  daytona: Daytona
  /** What every handle gets (error scope, options, the lost check and revive). */
  context: HandleContext
  reviver: Reviver
  /** The open handles (each removes itself on close). */
  handles: Set<DaytonaSandbox>
}

/** How messages name a create for `profile`. */
const creating = (profile: ResolvedProfile): string =>
  `creating a Daytona sandbox for profile ${profile.name}`

/**
 * The Daytona backend of `defineProvider`: the SDK calls and their error mapping. A create carries
 * a create id label, so what a failed create call left behind is found and deleted; `connect`
 * starts a stopped sandbox again (its files kept); `list` leaves out sandboxes on their way out.
 */
export function daytonaBackend({
  daytona,
  context,
  reviver,
  handles,
}: DaytonaBackendDeps): ProviderBackend<RemoteSandbox, DaytonaSandbox> {
  const { scope, options: opts } = context
  const createTimeoutSec = Math.ceil(opts.createTimeoutMs / 1000)

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

  return {
    describe: (id) => `Daytona sandbox ${id}`,
    defaultCwd: '/tmp',
    createLabels: () => ({ [PROVIDER_LABELS.createId]: randomUUID() }),

    async create(profile, labels) {
      try {
        const remote = await daytona.create(buildCreateParams(profile, labels, opts), {
          timeout: createTimeoutSec,
        })
        return { id: remote.id, native: remote }
      } catch (err) {
        const mapped = mapCreateError(err, scope, creating(profile))
        // A refused create (429, other 4xx) left nothing; a timeout, 5xx or failed start may have.
        const createId = labels[PROVIDER_LABELS.createId]
        if (mapped.retryable && !(err instanceof DaytonaRateLimitError) && createId) {
          await cleanupCreate(createId)
        }
        throw mapped
      }
    },

    open(ref, remote, settings) {
      const sandbox = new DaytonaSandbox(ref, remote, settings, context, (closed) => handles.delete(closed))
      handles.add(sandbox)
      return Promise.resolve(sandbox)
    },

    prepare: (sandbox, _remote, profile) => sandbox.ensureDir(profile.cwd),

    createFailed(err, { profile }) {
      const mapped = err instanceof AppError ? err : mapCreateError(err, scope, creating(profile))
      if (mapped.code === 'CONFIG_INVALID') return mapped
      return new AppError('SANDBOX_CREATE_FAILED', `${creating(profile)}: ${mapped.message}`, {
        retryable: mapped.retryable,
        cause: err,
      })
    },

    discard: (_ref, remote) => deleteQuietly(remote),

    async find(ref, signal) {
      try {
        const remote = await raceAbort(daytona.get(ref.id), signal)
        return { id: remote.id, labels: remote.labels ?? {}, native: remote }
      } catch (err) {
        signal?.throwIfAborted()
        throw mapDaytonaError(err, scope, `connecting to sandbox ${ref.id}`, ref.id)
      }
    },

    async revive(ref, remote, signal) {
      await reviver.revive(remote, `connecting to sandbox ${ref.id}`, signal, false)
    },

    async list(labels) {
      const found: ListedSandbox[] = []
      try {
        for await (const remote of daytona.list({ labels })) {
          if (!isGoing(remote)) found.push({ id: remote.id, labels: remote.labels ?? {} })
        }
      } catch (err) {
        throw mapDaytonaError(err, scope, 'listing Daytona sandboxes')
      }
      return found
    },

    async destroy(ref) {
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
    },
  }
}
