/*
 * The fake's sandbox lifecycle, after Daytona's API (`apps/api/src/sandbox/managers/sandbox.manager.ts`
 * at v0.190.0): state changes take time and pass through transient states, and a sweep every
 * `minuteMs / 6` (Daytona: a cron every 10 s) applies the lifetimes, all counted from the last
 * activity (a toolbox, preview, create or start request; an open toolbox request counts as
 * activity throughout):
 *  - a `started` sandbox idle `autoStopInterval` minutes (0: never) is stopped, or deleted at once
 *    when `autoDeleteInterval` is 0 (Daytona's "ephemeral" sandbox);
 *  - a `stopped` sandbox idle `autoDeleteInterval` minutes (negative: never) is deleted;
 *  - a `stopped` sandbox idle `autoArchiveInterval` minutes is archived;
 *  - any sandbox older than `ttlMinutes` (wall clock since creation) is deleted, whatever its state.
 * A stop ends what runs in the sandbox, as Daytona's container stop does: toolbox requests in
 * flight answer 502, every process of the sandbox user is killed (sessions included), files stay.
 */
import Docker from 'dockerode'
import type { FakeContext } from './control-plane.js'
import { sendError } from './http-util.js'
import type { FakeSandboxRecord, FakeState } from './records.js'

const docker = new Docker()

/** Daytona's default maximum auto-archive interval (minutes), used for an interval of 0. */
export const MAX_AUTO_ARCHIVE_MINUTES = 43_200

/** The uid:gid every process of a fake sandbox runs as (the Docker profile's default user). */
export const SANDBOX_USER = '1000:1000'

const chains = new WeakMap<FakeSandboxRecord, Promise<void>>()
const busy = new WeakMap<FakeSandboxRecord, number>()

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms))

/** Moves a record to `state`, recording the transition. */
export function setState(record: FakeSandboxRecord, state: FakeState): void {
  if (record.state === state) return
  record.state = state
  record.history.push(state)
  record.updatedAt = new Date().toISOString()
}

/** Counts a request as activity of the sandbox (what auto-stop, -archive and -delete count from). */
export function touch(record: FakeSandboxRecord): void {
  record.lastActivityAt = Date.now()
}

/** Whether a state change of the record is still running. */
export function isBusy(record: FakeSandboxRecord): boolean {
  return (busy.get(record) ?? 0) > 0
}

/** Runs `work` after the record's earlier state changes (tracked, so `close()` can wait for it). */
export function enqueue(
  ctx: FakeContext,
  record: FakeSandboxRecord,
  work: () => Promise<void>,
): Promise<void> {
  busy.set(record, (busy.get(record) ?? 0) + 1)
  const run = (chains.get(record) ?? Promise.resolve())
    .then(work)
    .catch(() => undefined)
    .finally(() => busy.set(record, (busy.get(record) ?? 1) - 1))
  chains.set(record, run)
  ctx.pending.add(run)
  void run.finally(() => ctx.pending.delete(run))
  return run
}

/** Answers every toolbox request in flight on the sandbox with 502, as the proxy does when the daemon goes. */
function dropRequests(ctx: FakeContext, record: FakeSandboxRecord, why: string): void {
  for (const { req, res } of ctx.inflight.get(record.id) ?? []) {
    if (!res.headersSent) sendError(res, req, 502, `bad gateway: ${why}`)
    else res.destroy()
  }
  ctx.inflight.delete(record.id)
}

/** Kills every process of the sandbox user in the container (not its init): what a container stop ends. */
async function killProcesses(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  const backend = record.backend
  if (!backend) return
  ctx.sessions.forget(backend.ref.id)
  const exec = await docker.getContainer(backend.ref.id).exec({
    Cmd: ['/bin/sh', '-c', 'kill -KILL -1 2>/dev/null; true'],
    User: SANDBOX_USER,
    AttachStdout: true,
    AttachStderr: true,
  })
  const stream = await exec.start({})
  await new Promise<void>((resolve) => {
    stream.on('end', resolve)
    stream.on('close', resolve)
    stream.on('error', () => resolve())
    stream.resume()
  })
}

/** `started` → `stopping` → `stopped`: requests in flight fail, processes die, files stay. */
export function stopRecord(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  setState(record, 'stopping')
  dropRequests(ctx, record, `sandbox ${record.id} is stopping`)
  return enqueue(ctx, record, async () => {
    await Promise.all([killProcesses(ctx, record).catch(() => undefined), delay(ctx.transitionMs)])
    if (record.state === 'stopping') setState(record, 'stopped')
  })
}

/** `stopped` → `starting` (`archived` → `restoring`) → `started`, with no process running. */
export function startRecord(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  const via = record.state === 'archived' ? 'restoring' : 'starting'
  setState(record, via)
  touch(record)
  return enqueue(ctx, record, async () => {
    await delay(via === 'restoring' ? 2 * ctx.transitionMs : ctx.transitionMs)
    if (record.state === via) {
      touch(record)
      setState(record, 'started')
    }
  })
}

/** `stopped` → `archiving` → `archived` (the files stay; a start restores it). */
export function archiveRecord(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  setState(record, 'archiving')
  return enqueue(ctx, record, async () => {
    await delay(ctx.transitionMs)
    if (record.state === 'archiving') setState(record, 'archived')
  })
}

/** Removes a record's container at once; the record stays as a `destroyed` tombstone unless `forget`. */
export async function destroyRecord(
  ctx: FakeContext,
  record: FakeSandboxRecord,
  forget: boolean,
): Promise<void> {
  const backend = record.backend
  record.backend = undefined
  setState(record, 'destroyed')
  dropRequests(ctx, record, `sandbox ${record.id} was destroyed`)
  if (forget) ctx.records.delete(record.id)
  if (backend) {
    ctx.sessions.forget(backend.ref.id)
    await backend.close()
    await ctx.docker.destroy(backend.ref)
  }
}

/** Any state → `destroying` → `destroyed` (after earlier state changes of the record have ended). */
export function deleteRecord(ctx: FakeContext, record: FakeSandboxRecord): Promise<void> {
  setState(record, 'destroying')
  dropRequests(ctx, record, `sandbox ${record.id} is being destroyed`)
  return enqueue(ctx, record, async () => {
    await Promise.all([destroyRecord(ctx, record, false), delay(ctx.transitionMs)])
  })
}

/** One pass of Daytona's lifetime checks at time `now`. */
export function sweep(ctx: FakeContext, now: number): void {
  const minutes = (n: number): number => n * ctx.minuteMs
  for (const record of ctx.records.values()) {
    if (isBusy(record) || record.state === 'destroying' || record.state === 'destroyed') continue
    const idle = record.openRequests > 0 ? 0 : now - record.lastActivityAt
    const ttl = record.ttlMinutes ?? 0
    if (ttl > 0 && now - Date.parse(record.createdAt) >= minutes(ttl)) {
      void deleteRecord(ctx, record)
    } else if (
      record.state === 'started' &&
      record.autoStopInterval > 0 &&
      idle >= minutes(record.autoStopInterval)
    ) {
      void (record.autoDeleteInterval === 0 ? deleteRecord(ctx, record) : stopRecord(ctx, record))
    } else if (
      record.state === 'stopped' &&
      record.autoDeleteInterval >= 0 &&
      idle >= minutes(record.autoDeleteInterval)
    ) {
      void deleteRecord(ctx, record)
    } else if (record.state === 'stopped' && idle >= minutes(record.autoArchiveInterval)) {
      void archiveRecord(ctx, record)
    }
  }
}
