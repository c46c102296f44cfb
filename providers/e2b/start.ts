import type { E2B, Sandbox as E2BSdkSandbox } from 'e2b'
import { type AppError, e2bNetwork, type Labels, type ResolvedProfile } from '../../src/sandbox/index.js'
import { type ErrorContext, mapE2BError } from './errors.js'
import { Lifetime } from './lifetime.js'
import type { ResolvedE2BProviderOptions } from './options.js'

/** An E2B sandbox just started, and the lifetime it was given. */
export interface StartedE2BSandbox {
  sdk: E2BSdkSandbox
  lifetime: Lifetime
}

/** What starting a sandbox needs of the provider. */
export interface StartDeps {
  client: E2B
  opts: ResolvedE2BProviderOptions
  errors: ErrorContext
}

/** The lifetime of a sandbox kept alive through `sdk` (killed `ttlMs` after its last use). */
export function lifetimeOf(
  sdk: E2BSdkSandbox,
  opts: ResolvedE2BProviderOptions,
  ttlMs: number,
  expiresAt: number,
): Lifetime {
  const request = { requestTimeoutMs: opts.requestTimeoutMs }
  return new Lifetime(ttlMs, opts.lifetimeSlackMs, (ms) => sdk.setTimeout(ms, request), expiresAt)
}

/**
 * Starts an E2B sandbox of `profile` from `template` (a template or a snapshot of E2B's) carrying
 * `metadata`: the profile's env and egress, killed when its lifetime (the idle TTL) runs out.
 * `refused` may map an SDK error first (else errors.ts maps it as a create's).
 */
export async function startE2BSandbox(
  { client, opts, errors }: StartDeps,
  template: string,
  profile: ResolvedProfile,
  metadata: Labels,
  refused?: (err: unknown) => AppError | undefined,
): Promise<StartedE2BSandbox> {
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
      requestTimeoutMs: opts.requestTimeoutMs,
    })
  } catch (err) {
    throw (
      refused?.(err) ??
      mapE2BError(err, { what: `creating a sandbox from template '${template}'`, create: true }, errors)
    )
  }
  return { sdk, lifetime: lifetimeOf(sdk, opts, profile.idleTtlMs, start + initialMs) }
}
