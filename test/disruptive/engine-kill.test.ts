/*
 * A fleet over two Docker engines loses one (issue 17): `sbx api` + one `sbx worker` per engine, 16
 * sessions spread over both, commands running on all of them, then the second engine's dockerd is
 * SIGKILLed (the test's own engine, never the machine's main one). Every accepted job ends with a
 * result (none lost), none ran twice, and the second engine's sessions continue on the main engine in
 * a fresh sandbox whose results say the files are gone. Disruptive (it kills an engine): runs alone,
 * after the main pass (vitest.disruptive.config.ts).
 */
import { performance } from 'node:perf_hooks'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startEngineFleet } from '../support/engine-fleet.js'
import type { EngineFleet } from '../support/engine-fleet.js'
import { killSecondEngine, removeScopeAt, startSecondEngine } from '../support/second-engine.js'

interface JobView {
  id: string
  state: string
  result?: { stdout: string; sandboxId: string; sandboxReplaced?: { filesLost: boolean; reason: string } }
  error?: { code: string; message: string }
}

const SESSIONS = 16
const FINAL = new Set(['completed', 'failed', 'interrupted', 'cancelled'])

let fleet: EngineFleet

beforeAll(async () => {
  fleet = await startEngineFleet('engkill')
}, 180_000)

afterAll(async () => {
  await fleet?.stop()
  // The killed engine comes back for the next suite; this suite's containers there are removed.
  const second = await startSecondEngine()
  if (fleet) await removeScopeAt(second.host, fleet.prefix)
}, 120_000)

/** One accepted (or refused) POST /v1/exec and how it ended. */
interface Call {
  readonly session: string
  readonly key: string
  readonly status: number
  readonly jobId?: string
  view?: JobView
  readonly at: number
}

async function exec(session: string, key: string, command: string): Promise<Call> {
  const res = await fleet.api.post(
    '/v1/exec',
    { provider: 'docker', profile: 'default', sessionId: session, command, timeoutMs: 30_000 },
    { headers: { 'idempotency-key': key } },
  )
  const jobId = res.headers.get('x-job-id') ?? undefined
  const body = (await res.json()) as JobView
  return {
    session,
    key,
    status: res.status,
    ...(jobId ? { jobId } : {}),
    ...(res.status === 200 ? { view: body } : {}),
    at: performance.now(),
  }
}

/** GET /v1/jobs/:id, waiting out the API's rate limit (429 + Retry-After). */
async function getJob(id: string): Promise<{ status: number; view?: JobView }> {
  for (;;) {
    const res = await fleet.api.fetch(`/v1/jobs/${id}`)
    if (res.status !== 429)
      return { status: res.status, ...(res.status === 200 ? { view: (await res.json()) as JobView } : {}) }
    await res.body?.cancel()
    await new Promise((r) => setTimeout(r, 1_000 * Number(res.headers.get('retry-after') ?? '1')))
  }
}

/** The final view of an accepted job: polled past a wait that ran out. */
async function finalView(call: Call): Promise<JobView | undefined> {
  let view = call.view
  const deadline = performance.now() + 60_000
  while (call.jobId && (!view || !FINAL.has(view.state)) && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200))
    const got = await getJob(call.jobId)
    if (got.view) view = got.view
  }
  return view && FINAL.has(view.state) ? view : undefined
}

describe('SIGKILL of one engine of two under load', () => {
  test("0 accepted jobs lost, 0 run twice, the lost engine's sessions rebind on the other", async () => {
    // 16 sessions, placed at once: the fleet spreads them evenly.
    const first = await Promise.all(
      Array.from({ length: SESSIONS }, (_, i) =>
        exec(`s${i}`, `s${i}-init`, `echo kept > f.txt; echo s${i}`),
      ),
    )
    for (const c of first) expect(c.view?.state, JSON.stringify(c.view)).toBe('completed')
    const home = new Map<string, 'main' | 'second' | undefined>()
    for (const c of first) home.set(c.session, await fleet.engineOf(c.view?.result?.sandboxId ?? ''))
    const onSecond = [...home].filter(([, e]) => e === 'second').map(([s]) => s)
    const onMain = [...home].filter(([, e]) => e === 'main').map(([s]) => s)
    console.log(`placement: ${onMain.length} sessions on the main engine, ${onSecond.length} on the second`)
    expect(Math.abs(onMain.length - onSecond.length)).toBeLessThanOrEqual(2)
    expect(onSecond.length + onMain.length).toBe(SESSIONS)

    // Load: each session runs commands one after another (a client retries a refused POST with the
    // same Idempotency-Key, as the docs say); the second engine is killed mid-way.
    const calls: Call[] = []
    const killed: { at?: number } = {}
    const recovered = new Map<string, number>()
    let stop = false
    const loop = async (session: string): Promise<void> => {
      for (let n = 0; !stop || (killed.at !== undefined && !recovered.has(session)); n++) {
        const key = `${session}-${n}`
        let call = await exec(session, key, `echo ${key}; sleep 0.1`)
        for (let retry = 0; call.status !== 200 && retry < 100; retry++) {
          calls.push(call)
          await new Promise((r) => setTimeout(r, 200))
          call = await exec(session, key, `echo ${key}; sleep 0.1`)
        }
        calls.push(call)
        const view = await finalView(call)
        call.view = view
        if (
          killed.at !== undefined &&
          call.at > killed.at &&
          view?.state === 'completed' &&
          !recovered.has(session)
        )
          recovered.set(session, performance.now() - killed.at)
        if (n > 400) return
      }
    }
    const loops = [...home.keys()].map(loop)
    // Kill once every session has run a few commands under load.
    const done = () => calls.filter((c) => c.view?.state === 'completed').length
    while (done() < SESSIONS * 3) await new Promise((r) => setTimeout(r, 50))
    killed.at = performance.now()
    await killSecondEngine()
    console.log(`killed the second engine's dockerd after ${done()} completed commands`)
    // Keep the load on until every session completed a command after the kill.
    while (recovered.size < SESSIONS && performance.now() - killed.at < 120_000)
      await new Promise((r) => setTimeout(r, 100))
    stop = true
    await Promise.all(loops)

    const accepted = calls.filter((c) => c.status === 200 && c.jobId)
    const views = await Promise.all(accepted.map(async (c) => ({ c, v: c.view ?? (await finalView(c)) })))
    const lost = views.filter(({ v }) => v === undefined)
    const byState: Record<string, number> = {}
    for (const { v } of views)
      if (v)
        byState[`${v.state}${v.error ? `:${v.error.code}` : ''}`] =
          (byState[`${v.state}${v.error ? `:${v.error.code}` : ''}`] ?? 0) + 1
    // Ran twice: one key, two jobs; or one job whose output holds its command's output twice.
    const jobsByKey = new Map<string, Set<string>>()
    for (const c of accepted) {
      const s = jobsByKey.get(c.key) ?? new Set<string>()
      s.add(c.jobId ?? '')
      jobsByKey.set(c.key, s)
    }
    const twice =
      [...jobsByKey.values()].filter((s) => s.size > 1).length +
      views.filter(({ c, v }) => v?.state === 'completed' && v.result?.stdout !== `${c.key}\n`).length
    // A second look at each job gives the same answer (nothing finished it again).
    let changed = 0
    for (const { c, v } of views) {
      const later = await getJob(c.jobId ?? '')
      if (later.view?.state !== v?.state || later.view?.result?.stdout !== v?.result?.stdout) changed++
    }
    const recoveryMs = Math.max(...onSecond.map((s) => recovered.get(s) ?? Number.POSITIVE_INFINITY))
    console.log(
      `accepted ${accepted.length} jobs (refused and retried: ${calls.length - accepted.length}); outcomes ` +
        `${JSON.stringify(byState)}; lost ${lost.length}; ran twice ${twice}; changed on a second look ${changed}; ` +
        `recovery of the second engine's sessions (kill → first completed command on the main engine): ` +
        `${Math.round(recoveryMs)} ms`,
    )
    for (const { v } of views)
      if (v && v.state !== 'completed') console.log(`${v.id}: ${v.state} ${JSON.stringify(v.error)}`)
    expect(lost.length).toBe(0)
    expect(twice).toBe(0)
    expect(changed).toBe(0)
    expect(recovered.size).toBe(SESSIONS)

    // The second engine's sessions now run on the main engine, their results saying the files are gone.
    for (const s of onSecond) {
      const after = await exec(s, `${s}-after`, 'cat f.txt 2>/dev/null || echo no-file')
      expect(after.view?.state).toBe('completed')
      expect(await fleet.engineOf(after.view?.result?.sandboxId ?? '')).toBe('main')
      expect(after.view?.result?.stdout).toBe('no-file\n')
      expect(after.view?.result?.sandboxReplaced?.filesLost).toBe(true)
    }
    // The main engine's sessions kept their sandboxes and files.
    for (const s of onMain) {
      const after = await exec(s, `${s}-after`, 'cat f.txt')
      expect(after.view?.result?.stdout).toBe('kept\n')
      expect(after.view?.result?.sandboxReplaced).toBeUndefined()
    }
    // The fleet knows the second engine is down.
    const ls = await fleet.engineCli(['ls', '--json'])
    const engines = (JSON.parse(ls.stdout) as { engines: { id: string; state: string }[] }).engines
    expect(engines.find((e) => e.id === fleet.ids.second)?.state).toBe('down')
    expect(engines.find((e) => e.id === fleet.ids.main)?.state).toBe('live')
  })
})
