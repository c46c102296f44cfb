import { CommandExitError, ConnectionConfig, E2B, type Sandbox as E2BSdkSandbox } from 'e2b'
import { ZodError } from 'zod'
import { AppError } from '../../src/errors.js'
import type { SandboxHealth, SandboxProvider, SandboxRef } from '../../src/sandbox/types.js'
import { type ErrorContext, mapE2BError } from './errors.js'
import { Lifetime } from './lifetime.js'
import {
  type E2BProviderOptions,
  E2BProviderOptionsSchema,
  type ResolvedE2BProviderOptions,
} from './options.js'
import { E2BSandbox } from './sandbox.js'
import { shellQuote } from './wrapper.js'
import {
  type ListedSandbox,
  type ProviderBackend,
  defineProvider,
} from '../../src/sandbox/define-provider.js'
import { type LabelSettings, PROVIDER_LABELS, positiveIntLabel } from '../../src/sandbox/labels.js'
import { e2bNetwork } from '../../src/egress/remote.js'

/** Provider id of the E2B provider. */
export const E2B_PROVIDER_ID = 'e2b'

/** The E2B provider: the SPI plus health and close. */
export interface E2BProvider extends SandboxProvider {
  health(): Promise<SandboxHealth>
  /** Closes every handle this provider opened; sandboxes keep running (until their lifetime ends). */
  close(): Promise<void>
}

/** The backend's object for one sandbox: the SDK handle and the lifetime it was given. */
interface Native {
  sdk: E2BSdkSandbox
  lifetime: Lifetime
}

function parseOptions(options: E2BProviderOptions): ResolvedE2BProviderOptions {
  try {
    return E2BProviderOptionsSchema.parse(options)
  } catch (err) {
    if (!(err instanceof ZodError)) throw err
    const issues = err.issues.map((i) => `${i.path.join('.') || 'options'}: ${i.message}`).join('; ')
    throw new AppError('CONFIG_INVALID', `invalid E2B provider options (${issues})`)
  }
}

/**
 * Creates the E2B provider (id `e2b`) on the `e2b` SDK. Every sandbox carries the create labels as
 * metadata and a server-side lifetime (the profile's idle TTL, killed on expiry, refreshed on use);
 * commands run through an in-sandbox wrapper that owns timeouts and cancellation.
 */
export function createE2BProvider(options: E2BProviderOptions): E2BProvider {
  const opts = parseOptions(options)
  const connection = {
    apiKey: opts.apiKey,
    debug: false,
    requestTimeoutMs: opts.requestTimeoutMs,
    retries: opts.retries,
    ...(opts.apiUrl ? { apiUrl: opts.apiUrl } : {}),
    ...(opts.sandboxUrl ? { sandboxUrl: opts.sandboxUrl } : {}),
    ...(opts.domain ? { domain: opts.domain } : {}),
  }
  const client = new E2B(connection)
  const resolved = new ConnectionConfig(connection)
  const errors: ErrorContext = {
    apiKey: opts.apiKey,
    apiUrl: resolved.apiUrl,
    sandboxUrl: resolved.sandboxUrl ?? `https://sandbox.${resolved.domain}`,
  }
  const request = { requestTimeoutMs: opts.requestTimeoutMs }
  const handles = new Set<E2BSandbox>()

  const handle = (
    sdk: E2BSdkSandbox,
    ref: SandboxRef,
    settings: LabelSettings & { lifetime: Lifetime },
  ): E2BSandbox => {
    const sandbox = new E2BSandbox(sdk, ref, { ...settings, options: opts, errors }, (closed) =>
      handles.delete(closed),
    )
    handles.add(sandbox)
    return sandbox
  }

  const lifetimeOf = (sdk: E2BSdkSandbox, ttlMs: number, expiresAt: number): Lifetime =>
    new Lifetime(ttlMs, opts.lifetimeSlackMs, (ms) => sdk.setTimeout(ms, request), expiresAt)

  /** Creates the profile's cwd when missing: as the default user, else as root chowned to it. */
  async function ensureCwd(sdk: E2BSdkSandbox, cwd: string): Promise<void> {
    const dir = shellQuote(cwd)
    const run = async (command: string, user?: string): Promise<{ exitCode: number; stdout: string }> => {
      try {
        const r = await sdk.commands.run(command, {
          timeoutMs: opts.helperTimeoutMs,
          ...request,
          ...(user ? { user } : {}),
        })
        return { exitCode: r.exitCode, stdout: r.stdout }
      } catch (err) {
        if (err instanceof CommandExitError) return { exitCode: err.exitCode, stdout: err.stdout }
        throw err
      }
    }
    const first = await run(
      `[ -d ${dir} ] && exit 0; mkdir -p ${dir} 2>/dev/null && exit 0; printf '%s:%s' "$(id -u)" "$(id -g)"; exit 3`,
    )
    if (first.exitCode === 0) return
    const owner = first.stdout.trim()
    const second =
      first.exitCode === 3 && /^\d+:\d+$/.test(owner)
        ? await run(`mkdir -p ${dir} && chown ${owner} ${dir}`, 'root')
        : first
    if (second.exitCode !== 0) {
      throw new AppError(
        'CONFIG_INVALID',
        `cannot create the profile's cwd ${cwd} in the sandbox; use an existing directory`,
      )
    }
  }

  const backend: ProviderBackend<Native, E2BSandbox> = {
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

    prepare: (_handle, { sdk }, profile) => ensureCwd(sdk, profile.cwd),

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

  async function health(): Promise<SandboxHealth> {
    try {
      await client.Sandbox.list({ limit: 1, ...request }).nextItems()
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: mapE2BError(err, { what: 'reaching the E2B API' }, errors).message }
    }
  }

  async function close(): Promise<void> {
    await Promise.all([...handles].map((h) => h.close()))
  }

  return { ...defineProvider({ id: E2B_PROVIDER_ID, instanceId: opts.instanceId, backend }), health, close }
}
