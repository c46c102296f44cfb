/*
 * A fleet over two Docker engines (issue 17): `sbx api` + one `sbx worker` per engine (the second a
 * dockerd of the test's own, see test/support/second-engine.ts). Placement spreads sessions over both;
 * `/v1/providers`, `/metrics` and `sbx engine ls` show each engine's load; `sbx engine drain` sends no
 * new session to an engine while its running command finishes, and moves its sessions on their next
 * call, saying their files are gone.
 */
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'

interface JobView {
  id: string
  state: string
  result?: { stdout: string; sandboxId: string; sandboxReplaced?: { filesLost: boolean; reason: string } }
  error?: { code: string; message: string }
}

let fleet: EngineFleet

beforeAll(async () => {
  fleet = await startEngineFleet('engdrain')
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
}, 120_000)

async function exec(sessionId: string, command: string, wait = true): Promise<JobView> {
  const res = await fleet.api.post(`/v1/exec${wait ? '' : '?wait=false'}`, {
    provider: 'docker',
    profile: 'default',
    sessionId,
    command,
  })
  expect(res.status, await res.clone().text()).toBe(wait ? 200 : 202)
  return (await res.json()) as JobView
}

async function job(id: string): Promise<JobView> {
  return (await (await fleet.api.fetch(`/v1/jobs/${id}`)).json()) as JobView
}

interface EngineLs {
  engines: { id: string; state: string; draining: boolean; running: number }[]
}

describe('two engines: placement, load views, drain', () => {
  test('new sessions spread evenly; /v1/providers, /metrics and sbx engine ls show each engine', async () => {
    expect(fleet.ids.main).not.toBe('')
    expect(fleet.ids.second).not.toBe(fleet.ids.main)
    const views = await Promise.all(
      Array.from({ length: 6 }, (_, i) => exec(`p${i}`, 'echo kept > f.txt; echo ok')),
    )
    for (const v of views) expect(v.state).toBe('completed')
    expect(await fleet.counts()).toEqual({ main: 3, second: 3 })

    const ls = await fleet.engineCli(['ls', '--json'])
    expect(ls.code, ls.stderr).toBe(0)
    const engines = (JSON.parse(ls.stdout) as EngineLs).engines
    expect(engines.map((e) => e.id).sort()).toEqual([fleet.ids.main, fleet.ids.second].sort())
    for (const e of engines) expect(e).toMatchObject({ state: 'live', draining: false })
    // The load the workers report catches up within a heartbeat or two.
    const loads = async () => {
      const body = (await (await fleet.api.fetch('/v1/providers')).json()) as {
        providers: { id: string; engines?: { id: string; running: number; state: string }[] }[]
      }
      return body.providers.find((p) => p.id === 'docker')?.engines ?? []
    }
    let shown = await loads()
    for (let i = 0; i < 50 && !shown.every((e) => e.running === 3); i++) {
      await new Promise((r) => setTimeout(r, 100))
      shown = await loads()
    }
    expect(shown.map((e) => [e.id, e.running, e.state]).sort()).toEqual(
      [
        [fleet.ids.main, 3, 'live'],
        [fleet.ids.second, 3, 'live'],
      ].sort(),
    )
    // Memory: each engine's sandboxes' limits summed (three of the same profile) against its memory.
    const memory = (await loads()) as unknown as { reservedBytes?: number; memoryBytes?: number }[]
    for (const e of memory) {
      expect(e.reservedBytes ?? 0).toBeGreaterThan(0)
      expect(e.reservedBytes! % 3).toBe(0)
      expect(e.memoryBytes).toBeGreaterThan(e.reservedBytes!)
    }
    const metrics = await (await fleet.api.fetch('/metrics')).text()
    expect(metrics).toMatch(
      new RegExp(`sbx_engine_memory_reserved_bytes\\{engine="${fleet.ids.second}"\\} [1-9]`),
    )
    expect(metrics).toContain(`sbx_engine_sandboxes{engine="${fleet.ids.second}"} 3`)
    expect(metrics).toContain(`sbx_engine_up{engine="${fleet.ids.main}",draining="0"} 1`)
  })

  test('drain: the running command finishes, new sessions avoid the engine, its sessions move (files lost)', async () => {
    const first = await exec('d0', 'echo kept > f.txt; echo ok')
    const second = await exec('d1', 'echo kept > f.txt; echo ok')
    const on = new Map([
      ['d0', await fleet.engineOf(first.result?.sandboxId ?? '')],
      ['d1', await fleet.engineOf(second.result?.sandboxId ?? '')],
    ])
    const victim = [...on].find(([, e]) => e === 'second')?.[0]
    const stayer = [...on].find(([, e]) => e === 'main')?.[0]
    expect(victim, JSON.stringify([...on])).toBeDefined()
    expect(stayer).toBeDefined()

    // A command running on the second engine when it is drained.
    const long = await exec(victim ?? '', 'sleep 2; echo finished', false)
    for (let i = 0; i < 100 && (await job(long.id)).state !== 'running'; i++)
      await new Promise((r) => setTimeout(r, 50))
    const drained = await fleet.engineCli(['drain', fleet.ids.second])
    expect(drained.code, drained.stderr).toBe(0)
    expect(drained.stdout).toContain('drained')

    // New sessions all go to the main engine.
    const before = await fleet.counts()
    const fresh = await Promise.all(Array.from({ length: 4 }, (_, i) => exec(`n${i}`, 'echo new')))
    for (const v of fresh) expect(await fleet.engineOf(v.result?.sandboxId ?? '')).toBe('main')
    expect((await fleet.counts()).second).toBe(before.second)

    // The running command finished where it ran.
    let done = await job(long.id)
    for (let i = 0; i < 200 && done.state !== 'completed' && done.state !== 'failed'; i++) {
      await new Promise((r) => setTimeout(r, 50))
      done = await job(long.id)
    }
    expect(done.state, JSON.stringify(done)).toBe('completed')
    expect(done.result?.stdout).toBe('finished\n')

    // The drained engine's session moves on its next call, and is told its files are gone.
    const moved = await exec(victim ?? '', 'cat f.txt 2>/dev/null || echo no-file')
    expect(moved.state).toBe('completed')
    expect(await fleet.engineOf(moved.result?.sandboxId ?? '')).toBe('main')
    expect(moved.result?.stdout).toBe('no-file\n')
    expect(moved.result?.sandboxReplaced).toMatchObject({ filesLost: true })
    expect(moved.result?.sandboxReplaced?.reason).toContain('down or drained')
    // The main engine's session is untouched.
    expect((await exec(stayer ?? '', 'cat f.txt')).result?.stdout).toBe('kept\n')

    const ls = (JSON.parse((await fleet.engineCli(['ls', '--json'])).stdout) as EngineLs).engines
    expect(ls.find((e) => e.id === fleet.ids.second)).toMatchObject({ state: 'live', draining: true })
    const text = await fleet.engineCli(['ls'])
    expect(text.stdout).toContain(`${fleet.ids.second}  live (draining)`)

    // Unknown ids are refused, saying where to look; undrain takes new sessions again.
    const unknown = await fleet.engineCli(['drain', 'no-such-engine'])
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain('sbx engine ls')
    expect((await fleet.engineCli(['undrain', fleet.ids.second])).code).toBe(0)
    const back = await Promise.all(Array.from({ length: 4 }, (_, i) => exec(`u${i}`, 'echo back')))
    const where = await Promise.all(back.map((v) => fleet.engineOf(v.result?.sandboxId ?? '')))
    expect(where).toContain('second')
  })
})
