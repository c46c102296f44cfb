import { ConnectionConfig, E2B, type Sandbox as E2BSdkSandbox } from 'e2b'
import {
  defineProvider,
  type LabelSettings,
  type SandboxHealth,
  type SandboxProvider,
  type SandboxRef,
} from '../../src/sandbox/index.js'
import { e2bBackend } from './backend.js'
import { type ErrorContext, mapE2BError } from './errors.js'
import type { Lifetime } from './lifetime.js'
import { type E2BProviderOptions, parseE2BProviderOptions } from './options.js'
import { e2bPause } from './pause.js'
import { E2BSandbox } from './sandbox.js'
import { e2bSnapshots } from './snapshots.js'

/** Provider id of the E2B provider. */
export const E2B_PROVIDER_ID = 'e2b'

/** The E2B provider: the SPI plus health and close. */
export interface E2BProvider extends SandboxProvider {
  health(): Promise<SandboxHealth>
  /** Closes every handle this provider opened; sandboxes keep running (until their lifetime ends). */
  close(): Promise<void>
}

/**
 * Creates the E2B provider (id `e2b`) on the `e2b` SDK. Every sandbox carries the create labels as
 * metadata and a server-side lifetime (the profile's idle TTL, killed on expiry, refreshed on use);
 * commands run through an in-sandbox wrapper that owns timeouts and cancellation. Snapshots are
 * E2B's own (snapshots.ts).
 */
export function createE2BProvider(options: E2BProviderOptions): E2BProvider {
  const opts = parseE2BProviderOptions(options)
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

  async function health(): Promise<SandboxHealth> {
    try {
      await client.Sandbox.list({ limit: 1, requestTimeoutMs: opts.requestTimeoutMs }).nextItems()
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: mapE2BError(err, { what: 'reaching the E2B API' }, errors).message }
    }
  }

  async function close(): Promise<void> {
    await Promise.all([...handles].map((h) => h.close()))
  }

  const { snapshots, takeSeed } = e2bSnapshots({ client, opts, errors })
  const backend = e2bBackend({ client, opts, errors, handle, seeds: { takeSeed } })
  return {
    ...defineProvider({ id: E2B_PROVIDER_ID, instanceId: opts.instanceId, backend }),
    ...e2bPause(client, opts.requestTimeoutMs, errors),
    snapshots,
    health,
    close,
  }
}
