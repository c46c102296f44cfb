import { CommandExitError, ConnectionConfig, E2B, type Sandbox as E2BSdkSandbox } from 'e2b'
import { ZodError } from 'zod'
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
import { type ErrorContext, mapE2BError } from './errors.js'
import { Lifetime } from './lifetime.js'
import {
  type E2BProviderOptions,
  E2BProviderOptionsSchema,
  type ResolvedE2BProviderOptions,
} from './options.js'
import { E2BSandbox } from './sandbox.js'
import { shellQuote } from './wrapper.js'
import { assertProfileFor, assertRefFor } from '../../src/sandbox/provider-kit.js'
import {
  OWNER,
  PROVIDER_LABELS,
  ownedLabels,
  ownerFilter,
  positiveIntLabel,
  settingsOf,
} from '../../src/sandbox/labels.js'
import { e2bNetwork } from '../../src/egress/remote.js'

/** Provider id of the E2B provider. */
export const E2B_PROVIDER_ID = 'e2b'

/** The E2B provider: the SPI plus health and close. */
export interface E2BProvider extends SandboxProvider {
  health(): Promise<SandboxHealth>
  /** Closes every handle this provider opened; sandboxes keep running (until their lifetime ends). */
  close(): Promise<void>
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
    settings: { cwd: string; maxConcurrentExecs: number; lifetime: Lifetime },
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

  async function create(profile: ResolvedProfile, { labels, signal }: CreateOptions): Promise<Sandbox> {
    assertProfileFor(E2B_PROVIDER_ID, profile)
    signal?.throwIfAborted()
    const template = profile.template ?? opts.defaultTemplate
    const metadata: Labels = {
      ...ownedLabels(labels, profile, opts.instanceId),
      [PROVIDER_LABELS.idleTtlMs]: String(profile.idleTtlMs),
    }
    const initialMs = Lifetime.initialFor(profile.idleTtlMs, opts.lifetimeSlackMs)
    // Throws for a policy E2B cannot enforce (start-up refuses such a profile first).
    const { allowInternetAccess, ...egressRules } = e2bNetwork(profile.network)
    const start = Date.now()
    let sdk: E2BSdkSandbox
    try {
      // No abort signal on the create call: an aborted request could still leave a sandbox behind.
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
      throw mapE2BError(err, { what: `creating a sandbox from template '${template}'`, create: true }, errors)
    }
    const ref: SandboxRef = {
      providerId: E2B_PROVIDER_ID,
      id: sdk.sandboxId,
      profile: profile.name,
      labels: metadata,
    }
    const sandbox = handle(sdk, ref, {
      cwd: profile.cwd,
      maxConcurrentExecs: profile.maxConcurrentExecs,
      lifetime: lifetimeOf(sdk, profile.idleTtlMs, start + initialMs),
    })
    try {
      signal?.throwIfAborted()
      await ensureCwd(sdk, profile.cwd)
      signal?.throwIfAborted()
      return sandbox
    } catch (err) {
      await sandbox.close()
      // Classified before the kill: the probe of an ambiguous error must still find the sandbox.
      const mapped =
        signal?.aborted || (err instanceof AppError && err.code === 'CONFIG_INVALID')
          ? undefined
          : await sandbox.classify(err, { what: 'preparing the sandbox', sandboxId: ref.id, envd: true })
      await client.Sandbox.kill(ref.id, request).catch(() => undefined)
      if (signal?.aborted) throw signal.reason
      if (!mapped) throw err
      throw new AppError(
        'SANDBOX_CREATE_FAILED',
        `starting a sandbox from template '${template}' failed: ${mapped.message}`,
        { retryable: mapped.retryable, cause: mapped },
      )
    }
  }

  async function connect(ref: SandboxRef, { signal }: { signal?: AbortSignal } = {}): Promise<Sandbox> {
    assertRefFor(E2B_PROVIDER_ID, ref)
    const site = { what: `connecting to sandbox ${ref.id}`, sandboxId: ref.id }
    const guessTtl = positiveIntLabel(ref.labels?.[PROVIDER_LABELS.idleTtlMs], opts.defaultIdleTtlMs)
    const asked = Lifetime.initialFor(guessTtl, opts.lifetimeSlackMs)
    const start = Date.now()
    const call = { ...request, ...(signal ? { signal } : {}) }
    let info: Awaited<ReturnType<typeof client.Sandbox.getInfo>>
    let sdk: E2BSdkSandbox
    try {
      // connect only ever extends a running sandbox's lifetime.
      ;[info, sdk] = await Promise.all([
        client.Sandbox.getInfo(ref.id, call),
        client.Sandbox.connect(ref.id, { ...call, timeoutMs: asked }),
      ])
    } catch (err) {
      signal?.throwIfAborted()
      throw mapE2BError(err, site, errors)
    }
    if (info.metadata[LABELS.owner] !== OWNER) {
      throw new AppError(
        'BAD_REQUEST',
        `E2B sandbox ${ref.id} is not a sandbox-router sandbox (no ${LABELS.owner} metadata)`,
      )
    }
    const ttl = positiveIntLabel(info.metadata[PROVIDER_LABELS.idleTtlMs], opts.defaultIdleTtlMs)
    return handle(
      sdk,
      {
        providerId: E2B_PROVIDER_ID,
        id: ref.id,
        profile: info.metadata[LABELS.profile] ?? ref.profile,
        labels: info.metadata,
      },
      {
        ...settingsOf(info.metadata, '/'),
        lifetime: lifetimeOf(sdk, ttl, start + asked),
      },
    )
  }

  async function list(filter: { labels: Labels }): Promise<SandboxRef[]> {
    const paginator = client.Sandbox.list({
      query: { metadata: ownerFilter(filter.labels) },
      limit: 100,
      ...request,
    })
    const refs: SandboxRef[] = []
    try {
      while (paginator.hasNext) {
        for (const s of await paginator.nextItems()) {
          refs.push({
            providerId: E2B_PROVIDER_ID,
            id: s.sandboxId,
            profile: s.metadata[LABELS.profile] ?? '',
            labels: s.metadata,
          })
        }
      }
    } catch (err) {
      throw mapE2BError(err, { what: 'listing sandboxes' }, errors)
    }
    return refs
  }

  async function destroy(ref: SandboxRef): Promise<void> {
    try {
      // false when E2B no longer knows the sandbox: already gone is fine.
      await client.Sandbox.kill(ref.id, request)
    } catch (err) {
      throw mapE2BError(err, { what: `destroying sandbox ${ref.id}` }, errors)
    }
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

  return { id: E2B_PROVIDER_ID, create, connect, list, destroy, health, close }
}
