import { randomBytes } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'
import { dockerAt } from '../support/second-engine.js'

/*
 * Issue 17: a session deleted while its engine is down. Its engine is "down" as the fleet sees it —
 * no healthy worker beside it (the worker stopped; its dockerd keeps running, so the sandbox is still
 * there). DELETE answers at once and removes the session; nothing on the dead engine can go then.
 * When a worker beside that engine comes back, its reaper (every `reapIntervalMs`, 60 s; sandboxes
 * older than `reapGraceMs`) finds the sandbox bound to no session and destroys it.
 */
interface EngineLs {
  engines: { id: string; state: string }[]
}

let fleet: EngineFleet

beforeAll(async () => {
  fleet = await startEngineFleet('engdowndel', { fleet: { secret: randomBytes(32).toString('hex') } })
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
}, 120_000)

const containerAt = async (host: string, id: string) =>
  (await dockerAt(host, ['ps', '-aq', '--no-trunc', '--filter', `id=${id}`])).stdout.trim()

/** Polls `check` until it holds or `ms` pass (then fails saying what was awaited). */
async function until(what: string, check: () => Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`)
    await new Promise((r) => setTimeout(r, 500))
  }
}

const stateOf = async (id: string) =>
  (JSON.parse((await fleet.engineCli(['ls', '--json'])).stdout) as EngineLs).engines.find((e) => e.id === id)
    ?.state

describe('a session deleted while its engine is down', () => {
  test('DELETE removes it at once; the sandbox goes when a worker of its engine comes back', async () => {
    // Place the session on the second engine (the main one drained meanwhile).
    expect((await fleet.engineCli(['drain', fleet.ids.main])).code).toBe(0)
    let sandboxId = ''
    try {
      const created = await fleet.api.post('/v1/sessions', { id: 'dead1', provider: 'docker' })
      expect(created.status, await created.clone().text()).toBe(201)
      const res = await fleet.api.post('/v1/exec', {
        provider: 'docker',
        profile: 'default',
        sessionId: 'dead1',
        command: 'true',
      })
      const job = (await res.json()) as { state: string; result?: { sandboxId: string } }
      expect(job.state, JSON.stringify(job)).toBe('completed')
      sandboxId = job.result?.sandboxId ?? ''
    } finally {
      expect((await fleet.engineCli(['undrain', fleet.ids.main])).code).toBe(0)
    }
    expect(await fleet.engineOf(sandboxId)).toBe('second')
    const bornAt = Date.now()

    // The second engine's only worker stops: the engine reads as down.
    await fleet.workers.second.stop()
    await until(
      'the second engine to read as down',
      async () => (await stateOf(fleet.ids.second)) === 'down',
      20_000,
    )

    const del = await fleet.api.fetch('/v1/sessions/dead1', { method: 'DELETE' })
    expect(del.status, await del.clone().text()).toBe(200)
    expect((await fleet.api.fetch('/v1/sessions/dead1')).status).toBe(404)
    // Nothing reached the dead engine: its sandbox is still there.
    expect(await containerAt(fleet.second.host, sandboxId)).not.toBe('')

    // A worker beside it comes back; its reaper removes the sandbox no session holds.
    await fleet.addWorker('second')
    const backAt = Date.now()
    await until(
      `sandbox ${sandboxId} to be reaped on the second engine`,
      async () => (await containerAt(fleet.second.host, sandboxId)) === '',
      150_000,
    )
    console.log(
      `reaped ${((Date.now() - backAt) / 1000).toFixed(1)} s after the worker came back ` +
        `(${((Date.now() - bornAt) / 1000).toFixed(1)} s after the sandbox was made)`,
    )
  }, 240_000)
})
