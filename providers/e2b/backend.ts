import type { E2B, Sandbox as E2BSdkSandbox } from 'e2b'
import {
  AppError,
  type LabelSettings,
  type ListedSandbox,
  positiveIntLabel,
  PROVIDER_LABELS,
  type ProviderBackend,
  type SandboxRef,
} from '../../src/sandbox/index.js'
import { ensureCwd } from './ensure-cwd.js'
import { type ErrorContext, mapE2BError } from './errors.js'
import { Lifetime } from './lifetime.js'
import type { ResolvedE2BProviderOptions } from './options.js'
import type { E2BSandbox } from './sandbox.js'
import type { E2BSnapshots } from './snapshots.js'
import { lifetimeOf, startE2BSandbox } from './start.js'

/** The backend's object for one sandbox: the SDK handle and the lifetime it was given. */
export interface E2BNative {
  sdk: E2BSdkSandbox
  lifetime: Lifetime
}

/** What the backend shares with its provider. */
export interface E2BBackendDeps {
  client: E2B
  opts: ResolvedE2BProviderOptions
  /** What error messages name (and scrub). */
  errors: ErrorContext
  /** A handle on `sdk`, registered with the provider (which closes it on `close`). */
  handle(sdk: E2BSdkSandbox, ref: SandboxRef, settings: LabelSettings & { lifetime: Lifetime }): E2BSandbox
  /** Where a session's create finds the sandbox a snapshot restore started for it. */
  seeds: Pick<E2BSnapshots, 'takeSeed'>
}

/**
 * The E2B backend of `defineProvider`: every sandbox carries the create labels as metadata and a
 * server-side lifetime (the profile's idle TTL, killed on expiry, refreshed on use); a new one gets
 * the profile's cwd; a failed start is classified by probing the sandbox before it is killed. A
 * session started from a snapshot takes the sandbox the restore started (snapshots.ts).
 */
export function e2bBackend({
  client,
  opts,
  errors,
  handle,
  seeds,
}: E2BBackendDeps): ProviderBackend<E2BNative, E2BSandbox> {
  const request = { requestTimeoutMs: opts.requestTimeoutMs }

  return {
    describe: (id) => `E2B sandbox ${id}`,
    labelNoun: 'metadata',
    defaultCwd: '/',
    createLabels: (profile) => ({ [PROVIDER_LABELS.idleTtlMs]: String(profile.idleTtlMs) }),

    async create(profile, metadata) {
      const seed = await seeds.takeSeed(metadata)
      const made =
        seed ??
        (await startE2BSandbox(
          { client, opts, errors },
          profile.template ?? opts.defaultTemplate,
          profile,
          metadata,
        ))
      return { id: made.sdk.sandboxId, native: made }
    },

    open: (ref, { sdk, lifetime }, settings) => Promise.resolve(handle(sdk, ref, { ...settings, lifetime })),

    prepare: (_handle, { sdk }, profile) => ensureCwd(sdk, profile.cwd, opts),

    // Classified before the kill: the probe of an ambiguous error must still find the sandbox.
    async createFailed(err, { ref, profile, handle: sandbox }) {
      if ((err instanceof AppError && err.code === 'CONFIG_INVALID') || !sandbox) return err as Error
      const mapped = await sandbox.classify(err, {
        what: 'preparing the sandbox',
        sandboxId: ref.id,
        envd: true,
      })
      const template = profile.template ?? opts.defaultTemplate
      return new AppError(
        'SANDBOX_CREATE_FAILED',
        `starting a sandbox from template '${template}' failed: ${mapped.message}`,
        { retryable: mapped.retryable, cause: mapped },
      )
    },

    discard: async (ref) => {
      await client.Sandbox.kill(ref.id, request)
    },

    async find(ref, signal) {
      const guessTtl = positiveIntLabel(ref.labels?.[PROVIDER_LABELS.idleTtlMs], opts.defaultIdleTtlMs)
      const asked = Lifetime.initialFor(guessTtl, opts.lifetimeSlackMs)
      const start = Date.now()
      const call = { ...request, ...(signal ? { signal } : {}) }
      try {
        // connect only ever extends a running sandbox's lifetime.
        const [info, sdk] = await Promise.all([
          client.Sandbox.getInfo(ref.id, call),
          client.Sandbox.connect(ref.id, { ...call, timeoutMs: asked }),
        ])
        const ttl = positiveIntLabel(info.metadata[PROVIDER_LABELS.idleTtlMs], opts.defaultIdleTtlMs)
        return {
          id: ref.id,
          labels: info.metadata,
          native: { sdk, lifetime: lifetimeOf(sdk, opts, ttl, start + asked) },
        }
      } catch (err) {
        signal?.throwIfAborted()
        throw mapE2BError(err, { what: `connecting to sandbox ${ref.id}`, sandboxId: ref.id }, errors)
      }
    },

    async list(metadata) {
      const paginator = client.Sandbox.list({ query: { metadata }, limit: 100, ...request })
      const found: ListedSandbox[] = []
      try {
        while (paginator.hasNext) {
          for (const s of await paginator.nextItems()) found.push({ id: s.sandboxId, labels: s.metadata })
        }
      } catch (err) {
        throw mapE2BError(err, { what: 'listing sandboxes' }, errors)
      }
      return found
    },

    async destroy(ref) {
      try {
        // false when E2B no longer knows the sandbox: already gone is fine.
        await client.Sandbox.kill(ref.id, request)
      } catch (err) {
        throw mapE2BError(err, { what: `destroying sandbox ${ref.id}` }, errors)
      }
    },
  }
}
