import { randomUUID } from 'node:crypto'
import { AppError } from '../errors.js'
import type { Sandbox, SandboxRef } from '../sandbox/types.js'
import { backoffDelayMs, sleep } from './backoff.js'
import { describeTarget, isLost, isRetryable } from './core.js'
import type { PoolCore, Target } from './core.js'
import type { Deadline } from './deadline.js'
import {
  profileCapReached,
  profileClaim,
  providerCapReached,
  providerClaim,
  tenantClaim,
  tenantQuotaExceeded,
} from './bounds.js'
import { createLabels, EPHEMERAL_SESSION, POOL_LABELS } from './keys.js'
import type { WarmPools } from './warm.js'

/** A sandbox obtained for one tenant: leased (`leaseId`) and counted in its slot sets. */
export interface Obtained {
  readonly ref: SandboxRef
  /** A handle counted as one user in the handle cache. */
  readonly sandbox: Sandbox
  /** From the warm pool (no create). */
  readonly hit: boolean
  readonly slots: readonly string[]
  readonly leaseId: string
}

function createFailed(t: Target, attempts: number, err: unknown): AppError {
  const msg = err instanceof Error ? err.message : String(err)
  return new AppError(
    'SANDBOX_CREATE_FAILED',
    `could not create a sandbox for ${describeTarget(t)} after ${attempts} attempt(s): ${msg}`,
    { retryable: isRetryable(err), cause: err },
  )
}

/**
 * Gets a fresh sandbox for `t`'s tenant: a warm one if any, else a create, retried with backoff
 * while the error is retryable and attempts remain. The tenant quota and the profile cap are
 * enforced atomically in the store and fail at once with `QUOTA_EXCEEDED` (see `bounds.ts`).
 */
export async function obtain(core: PoolCore, warm: WarmPools, t: Target, dl: Deadline): Promise<Obtained> {
  const { store, opts } = core
  const token = `r:${randomUUID()}`
  const quota = tenantClaim(core, t)
  const cap = profileClaim(t)
  const engine = providerClaim(core, t)
  const slots = [quota.name, cap.name, engine.name]
  // Reservations outlive the acquire a little, so a crashed worker's reservation frees itself.
  const holdUntil = () => Date.now() + dl.remainingMs + opts.lockTtlMs
  // Phase 1: a warm sandbox (quota checked in the same atomic claim), else reserve room to create.
  for (;;) {
    dl.check()
    const leaseId = randomUUID()
    const claim = await warm.claim(t, leaseId, { slot: quota, expiresAt: holdUntil() })
    if (claim.quotaFull) throw tenantQuotaExceeded(core, t, claim.quotaFull.count)
    if (claim.entry) {
      const { ref } = claim.entry
      try {
        const sandbox = await core.handles.use(ref, t.provider, dl.signal)
        // A warm sandbox may have been stopped or deleted while it waited (Daytona's auto-stop):
        // the provider looks before its first call, restarting it or reporting it lost.
        await sandbox.ready?.({ signal: dl.signal })
        return { ref, sandbox, hit: true, slots, leaseId }
      } catch (err) {
        await core.destroy(ref, slots, isLost(err) ? 'lost' : undefined)
        if (!isLost(err)) throw err
        continue
      }
    }
    const room = await store.reserveSlots([quota, cap, engine], token, holdUntil(), Date.now())
    if (room.ok) break
    if (room.full === quota.name) throw tenantQuotaExceeded(core, t, room.count)
    if (room.full === cap.name) throw profileCapReached(core, t, room.count)
    throw providerCapReached(core, t, room.count)
  }
  // Phase 2: create, retried with backoff while the error is retryable and attempts remain.
  try {
    for (let failures = 0; ;) {
      const leaseId = randomUUID()
      let sandbox: Sandbox
      try {
        sandbox = await core.create(t, labelsFor(core, t), dl.signal)
      } catch (err) {
        if (dl.signal.aborted) throw err
        dl.lastError = err
        failures++
        if (!isRetryable(err) || failures >= (dl.createAttempts ?? opts.createAttempts))
          throw createFailed(t, failures, err)
        await sleep(backoffDelayMs(failures - 1, opts.createBackoff), dl.signal)
        continue
      }
      try {
        core.handles.put(sandbox)
        await store.addLease(sandbox.ref.id, { leaseId, expiresAt: Date.now() + opts.leaseTtlMs })
        await store.moveSlot(slots, token, sandbox.ref.id, holdUntil())
        const handle = await core.handles.use(sandbox.ref, t.provider)
        return { ref: sandbox.ref, sandbox: handle, hit: false, slots, leaseId }
      } catch (err) {
        await core.destroy(sandbox.ref, slots)
        throw err
      }
    }
  } catch (err) {
    // The reservation did not become a sandbox: give it back.
    await store
      .releaseSlots(slots, token)
      .catch((e: unknown) => core.report(e, 'releasing slot reservations'))
    throw err
  }
}

function labelsFor(core: PoolCore, t: Target) {
  return createLabels({
    scope: core.opts.scope,
    instanceId: core.opts.instanceId,
    profile: t.profile.name,
    tenant: t.key.tenant,
    session: t.session ?? EPHEMERAL_SESSION,
    now: Date.now(),
    ...engineLabel(core, t.key.providerId),
  })
}

/** `{ engine }` for the labels of a sandbox of `providerId`, when the pool keeps it per engine. */
export function engineLabel(core: PoolCore, providerId: string): { engine?: string } {
  const engine = core.opts.providerEngines[providerId]
  return engine === undefined ? {} : { engine }
}

/**
 * A `SANDBOX_LOST` error when a bound sandbox lives on another engine than the one this process
 * reaches (that engine is down, or drained): the session moves here and its files are lost.
 */
export function foreignEngine(core: PoolCore, ref: SandboxRef): AppError | undefined {
  const mine = core.opts.providerEngines[ref.providerId]
  const theirs = ref.labels?.[POOL_LABELS.engine]
  if (mine === undefined || theirs === undefined || theirs === mine) return undefined
  return new AppError(
    'SANDBOX_LOST',
    `sandbox ${ref.id} lives on Docker engine ${theirs}, which is down or drained; the session moved to ` +
      `engine ${mine}`,
  )
}
