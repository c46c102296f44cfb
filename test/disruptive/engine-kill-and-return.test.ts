/*
 * One engine of two dies and comes back (issue 17); the second engine's dockerd is SIGKILLed (the
 * test's own engine, never the machine's main one), its worker left running.
 * - A snapshot is an image and a volume on the engine of the session it was taken from: with that
 *   engine dead, starting a session from it answers 503 UNAVAILABLE saying which engine holds it and
 *   what to do — not a session started empty elsewhere.
 * - A session deleted while its engine is dead: DELETE answers at once, nothing on the dead engine can
 *   go; when the dockerd is back (its containers stopped, not removed), the worker beside it reaps the
 *   sandbox no session holds on its reaper's next pass.
 * Disruptive (it kills an engine): runs alone, after the main pass (vitest.disruptive.config.ts).
 */
import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'
import { dockerAt, killSecondEngine, removeScopeAt, startSecondEngine } from '../support/second-engine.js'
import { PWS } from '../support/workspaces.js'

let fleet: EngineFleet
/** The source session's sandbox, on the second engine. */
let sandboxId = ''
/** The snapshot taken of it there. */
let snapshotId = ''

beforeAll(async () => {
  fleet = await startEngineFleet('engkillsnap', {
    fleet: { secret: randomBytes(32).toString('hex') },
    profiles: { [PWS]: { provider: 'docker', workspace: { persistent: true } } },
  })
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
  // The killed engine comes back for the next suite; this suite's containers, images and volumes there go.
  const second = await startSecondEngine()
  if (fleet) await removeScopeAt(second.host, fleet.prefix)
}, 120_000)

/** Polls `check` until it holds or `ms` pass (then fails saying what was awaited). */
async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 250))
  }
}

/** The image and workspace volume of snapshot `id` on the engine at `host` (empty: none). */
async function snapshotDataAt(host: string, id: string): Promise<string> {
  const image = await dockerAt(host, ['images', '-q', `sandbox-router/snapshot:${id}`])
  const volume = await dockerAt(host, [
    'volume',
    'ls',
    '-q',
    '--filter',
    `label=sandbox-router.snapshot=${id}`,
  ])
  return (image.stdout + volume.stdout).trim()
}

describe('an engine whose dockerd was killed, then comes back', () => {
  test('starting a session from it answers 503 saying which engine holds it and what to do', async () => {
    // The source session on the second engine (the main one drained meanwhile), then its snapshot there.
    expect((await fleet.engineCli(['drain', fleet.ids.main])).code).toBe(0)
    try {
      const created = await fleet.api.post('/v1/sessions', {
        id: 'snapsrc',
        provider: 'docker',
        profile: PWS,
      })
      expect(created.status, await created.clone().text()).toBe(201)
      const res = await fleet.api.post('/v1/exec', {
        provider: 'docker',
        profile: PWS,
        sessionId: 'snapsrc',
        command: 'echo kept > /workspace/note.txt',
      })
      const job = (await res.json()) as { state: string; result?: { sandboxId: string } }
      expect(job.state, JSON.stringify(job)).toBe('completed')
      sandboxId = job.result?.sandboxId ?? ''
      expect(await fleet.engineOf(sandboxId)).toBe('second')
    } finally {
      expect((await fleet.engineCli(['undrain', fleet.ids.main])).code).toBe(0)
    }
    const taken = await fleet.api.post('/v1/sessions/snapsrc/snapshots', {})
    expect(taken.status, await taken.clone().text()).toBe(201)
    const snap = (await taken.json()) as { id: string; state: string }
    expect(snap.state).toBe('ready')
    snapshotId = snap.id
    expect((await snapshotDataAt(fleet.second.host, snap.id)).split('\n')).toHaveLength(2)

    await killSecondEngine()
    const t0 = Date.now()
    await until(
      'the fleet to read the second engine as down',
      async () =>
        (
          JSON.parse((await fleet.engineCli(['ls', '--json'])).stdout) as {
            engines: { id: string; state: string }[]
          }
        ).engines.find((e) => e.id === fleet.ids.second)?.state === 'down',
      30_000,
    )
    console.log(`the second engine read as down ${Date.now() - t0} ms after its dockerd was killed`)

    const refused = await fleet.api.post('/v1/sessions', { snapshot: snap.id })
    expect(refused.status, await refused.clone().text()).toBe(503)
    const err = ((await refused.json()) as { error: { code: string; message: string } }).error
    expect(err.code).toBe('UNAVAILABLE')
    expect(err.message).toContain(
      `snapshot ${snap.id} lives on Docker engine ${fleet.ids.second}, which is down`,
    )
    expect(err.message).toContain('start `sbx worker` beside it')
    expect(err.message).toContain('take a new snapshot of a session on a live engine')
    // No session was made for it anywhere.
    const list = (await (await fleet.api.fetch('/v1/sessions')).json()) as { sessions: { id: string }[] }
    expect(list.sessions.map((s) => s.id)).toEqual(['snapsrc'])
  })

  test('a session and a snapshot deleted while their engine is dead are removed there once it is back', async () => {
    expect(sandboxId).not.toBe('')
    expect(snapshotId).not.toBe('')
    const del = await fleet.api.fetch('/v1/sessions/snapsrc', { method: 'DELETE' })
    expect(del.status, await del.clone().text()).toBe(200)
    expect((await fleet.api.fetch('/v1/sessions/snapsrc')).status).toBe(404)
    // The snapshot's record goes at once; its image and workspace copy wait for the engine.
    const delSnap = await fleet.api.fetch(`/v1/snapshots/${snapshotId}`, { method: 'DELETE' })
    expect(delSnap.status, await delSnap.clone().text()).toBe(200)
    expect((await fleet.api.fetch(`/v1/snapshots/${snapshotId}`)).status).toBe(404)
    const snaps = (await (await fleet.api.fetch('/v1/snapshots')).json()) as { snapshots: { id: string }[] }
    expect(snaps.snapshots.map((x) => x.id)).not.toContain(snapshotId)

    const second = await startSecondEngine()
    const backAt = Date.now()
    const containerThere = async () =>
      (await dockerAt(second.host, ['ps', '-aq', '--no-trunc', '--filter', `id=${sandboxId}`])).stdout.trim()
    // The restarted dockerd kept the container (stopped): nothing removed it while the engine was dead.
    expect(await containerThere()).not.toBe('')
    await until(
      `sandbox ${sandboxId} to be reaped on the returned engine`,
      async () => (await containerThere()) === '',
      // Two reaper passes (60 s apart) at most: the first may come before the sandbox's 60 s grace ends.
      200_000,
    )
    console.log(`reaped ${((Date.now() - backAt) / 1000).toFixed(1)} s after the engine's dockerd came back`)
    await until(
      `snapshot ${snapshotId}'s image and volume to go from the returned engine`,
      async () => (await snapshotDataAt(second.host, snapshotId)) === '',
      // The workers' sweep runs on the reap interval (60 s) too.
      200_000,
    )
    console.log(
      `the deleted snapshot's data went ${((Date.now() - backAt) / 1000).toFixed(1)} s after the engine's dockerd came back`,
    )
  })
})
