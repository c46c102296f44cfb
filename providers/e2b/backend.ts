import type { E2B, Sandbox as E2BSdkSandbox } from 'e2b'
import {
  AppError,
  e2bNetwork,
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
}

/**
 * The E2B backend of `defineProvider`: every sandbox carries the create labels as metadata and a
 * server-side lifetime (the profile's idle TTL, killed on expiry, refreshed on use); a new one gets
 * the profile's cwd; a failed start is classified by probing the sandbox before it is killed.
 */
export function e2bBackend({
  client,
  opts,
  errors,
  handle,
}: E2BBackendDeps): ProviderBackend<E2BNative, E2BSandbox> {
  const request = { requestTimeoutMs: opts.requestTimeoutMs }
  const lifetimeOf = (sdk: E2BSdkSandbox, ttlMs: number, expiresAt: number): Lifetime =>
    new Lifetime(ttlMs, opts.lifetimeSlackMs, (ms) => sdk.setTimeout(ms, request), expiresAt)

  return {
    describe: (id) => `E2B sandbox ${id}`,
    labelNoun: 'metadata',
    defaultCwd: '/',
    createLabels: (profile) => ({ [PROVIDER_LABELS.idleTtlMs]: String(profile.idleTtlMs) }),

    async create(profile, metadata) {
      const template = profile.template ?? opts.defaultTemplate
      const initialMs = Lifetime.initialFor(profile.idleTtlMs, opts.lifetimeSlackMs)
      // Throws for a policy E2B cannot enforce (start-up refuses such a profile first).
      const { allowInternetAccess, ...egressRules } = e2bNetwork(profile.network)
      const start = Date.now()
      let sdk: E2BSdkSandbox
      try {
        sdk = await client.Sandbox.create(template, {
          metadata,
          envs: profile.env,
          timeoutMs: initialMs,
          lifecycle: { onTimeout: 'kill' },
          allowInternetAccess,
          // Preview hosts only with the traffic token: the service is the gatekeeper of ports.
          network: { allowPublicTraffic: false, ...egressRules },
          ...request,
        })
      } catch (err) {
        throw mapE2BError(
          err,
          { what: `creating a sandbox from template '${template}'`, create: true },
          errors,
        )
      }
      return {
        id: sdk.sandboxId,
        native: { sdk, lifetime: lifetimeOf(sdk, profile.idleTtlMs, start + initialMs) },
      }
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
          native: { sdk, lifetime: lifetimeOf(sdk, ttl, start + asked) },
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
