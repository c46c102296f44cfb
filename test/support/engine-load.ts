/*
 * Load on a many-engine fleet while one engine (or its whole host) dies, for the disruptive suites
 * (issue 17): sessions placed at once, each running commands back to back through `POST /v1/exec`
 * with an `Idempotency-Key` per command (a refused POST is retried with the same key, as the docs
 * say), and the tally a test asserts on: jobs lost, run twice, changed on a second look, and how long
 * the lost engine's sessions took to complete a command again. HTTP only.
 */
import { performance } from 'node:perf_hooks'
import { afterAll, beforeAll } from 'vitest'
import { startEngineFleet } from './engine-fleet.js'
import type { EngineFleet } from './engine-fleet.js'
import { removeScopeAt, startSecondEngine } from './second-engine.js'

/**
 * A two-engine fleet for a suite that kills the second engine: started before the suite's tests,
 * stopped after them, and the second engine started again for the next suite with this suite's
 * containers removed from it. Returns a getter of the fleet.
 */
export function killableFleet(tag: string): () => EngineFleet {
  let fleet: EngineFleet | undefined
  beforeAll(async () => {
    fleet = await startEngineFleet(tag)
  }, 180_000)
  afterAll(async () => {
    await fleet?.stop()
    const second = await startSecondEngine()
    if (fleet) await removeScopeAt(second.host, fleet.prefix)
  }, 120_000)
  return () => {
    if (!fleet) throw new Error(`the ${tag} fleet did not start`)
    return fleet
  }
}

/** A job as `GET /v1/jobs/:id` and `POST /v1/exec` show it (the fields these tests read). */
export interface JobView {
  id: string
  state: string
  result?: { stdout: string; sandboxId: string; sandboxReplaced?: { filesLost: boolean; reason: string } }
  error?: { code: string; message: string }
}

/** One accepted (or refused) `POST /v1/exec` and how it ended. */
export interface Call {
  readonly session: string
  readonly key: string
  readonly status: number
  readonly jobId?: string
  view?: JobView
  /** The response body of a refused POST (not 200), for failure messages. */
  readonly refusal?: string
  readonly at: number
}

const FINAL = new Set(['completed', 'failed', 'interrupted', 'cancelled'])

/** `POST /v1/exec` on the fleet's API, keyed by `key`. */
export async function execOn(
  fleet: EngineFleet,
  session: string,
  key: string,
  command: string,
): Promise<Call> {
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
    ...(res.status === 200 ? { view: body } : { refusal: JSON.stringify(body) }),
    at: performance.now(),
  }
}

/**
 * {@link execOn}, with a refused POST retried with the same key (as a client does after a 429 or 503);
 * refusals on the way are printed, so a test's log shows them.
 */
export async function execSettled(
  fleet: EngineFleet,
  session: string,
  key: string,
  command: string,
): Promise<Call> {
  let call = await execOn(fleet, session, key, command)
  for (let retry = 0; call.status !== 200 && retry < 50; retry++) {
    console.log(
      `POST /v1/exec ${key} refused (${call.status}): ${call.refusal ?? ''}; retrying with the same key`,
    )
    await new Promise((r) => setTimeout(r, 200))
    call = await execOn(fleet, session, key, command)
  }
  return call
}

/** GET /v1/jobs/:id, waiting out the API's rate limit (429 + Retry-After). */
export async function getJob(fleet: EngineFleet, id: string): Promise<{ status: number; view?: JobView }> {
  for (;;) {
    const res = await fleet.api.fetch(`/v1/jobs/${id}`)
    if (res.status !== 429)
      return { status: res.status, ...(res.status === 200 ? { view: (await res.json()) as JobView } : {}) }
    await res.body?.cancel()
    await new Promise((r) => setTimeout(r, 1_000 * Number(res.headers.get('retry-after') ?? '1')))
  }
}

/** The final view of an accepted job: polled past a wait that ran out (undefined: no final state in 60 s). */
export async function finalView(fleet: EngineFleet, call: Call): Promise<JobView | undefined> {
  let view = call.view
  const deadline = performance.now() + 60_000
  while (call.jobId && (!view || !FINAL.has(view.state)) && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 200))
    const got = await getJob(fleet, call.jobId)
    if (got.view) view = got.view
  }
  return view && FINAL.has(view.state) ? view : undefined
}

/** Where each of `count` sessions (`s0`…) landed after a first command placed them all at once. */
export async function placeSessions(
  fleet: EngineFleet,
  count: number,
): Promise<{ main: string[]; second: string[]; unplaced: string[] }> {
  const first = await Promise.all(
    Array.from({ length: count }, (_, i) =>
      execOn(fleet, `s${i}`, `s${i}-init`, `echo kept > f.txt; echo s${i}`),
    ),
  )
  const out = { main: [] as string[], second: [] as string[], unplaced: [] as string[] }
  for (const c of first) {
    if (c.view?.state !== 'completed')
      throw new Error(`placing ${c.session} failed: ${JSON.stringify(c.view)}`)
    const engine = await fleet.engineOf(c.view.result?.sandboxId ?? '')
    out[engine ?? 'unplaced'].push(c.session)
  }
  return out
}

/** What a load run saw. */
export interface LoadOutcome {
  /** Every POST, refused ones included. */
  readonly calls: Call[]
  /** Per session, ms from the disruption to its first command completed after it. */
  readonly recovered: Map<string, number>
  /** Completed commands when the disruption began. */
  readonly completedAtDisruption: number
}

/**
 * Runs `command(key)` back to back on every session; once each session has completed
 * `warmupPerSession` commands, calls `disrupt`, then keeps the load on until every session completed a
 * command after it (or `recoveryLimitMs` passed).
 */
export async function loadThrough(
  fleet: EngineFleet,
  sessions: readonly string[],
  opts: {
    command: (key: string) => string
    disrupt: () => Promise<void>
    warmupPerSession?: number
    recoveryLimitMs?: number
  },
): Promise<LoadOutcome> {
  const calls: Call[] = []
  const killed: { at?: number } = {}
  const recovered = new Map<string, number>()
  let stop = false
  const loop = async (session: string): Promise<void> => {
    for (let n = 0; !stop || (killed.at !== undefined && !recovered.has(session)); n++) {
      const key = `${session}-${n}`
      let call = await execOn(fleet, session, key, opts.command(key))
      for (let retry = 0; call.status !== 200 && retry < 100; retry++) {
        calls.push(call)
        await new Promise((r) => setTimeout(r, 200))
        call = await execOn(fleet, session, key, opts.command(key))
      }
      calls.push(call)
      const view = await finalView(fleet, call)
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
  const loops = sessions.map(loop)
  const done = (): number => calls.filter((c) => c.view?.state === 'completed').length
  while (done() < sessions.length * (opts.warmupPerSession ?? 3)) await new Promise((r) => setTimeout(r, 50))
  const completedAtDisruption = done()
  killed.at = performance.now()
  await opts.disrupt()
  const limit = opts.recoveryLimitMs ?? 120_000
  while (recovered.size < sessions.length && performance.now() - killed.at < limit)
    await new Promise((r) => setTimeout(r, 100))
  stop = true
  await Promise.all(loops)
  return { calls, recovered, completedAtDisruption }
}

/** The tally of a load run: the figures the disruptive tests assert and print. */
export interface LoadTally {
  readonly accepted: number
  readonly refused: number
  readonly byState: Record<string, number>
  /** Accepted jobs with no final state. */
  readonly lost: number
  /** One key with two jobs, or a completed job whose output is not its command's once. */
  readonly twice: number
  /** Jobs whose state or output differs on a second look (something finished them again). */
  readonly changed: number
  /** Views of the jobs that did not complete, for the log. */
  readonly notCompleted: JobView[]
}

/** Tallies `calls`; `expectedStdout(key)` is a completed command's whole output. */
export async function tally(
  fleet: EngineFleet,
  calls: readonly Call[],
  expectedStdout: (key: string) => string,
): Promise<LoadTally> {
  const accepted = calls.filter((c) => c.status === 200 && c.jobId)
  const views = await Promise.all(
    accepted.map(async (c) => ({ c, v: c.view ?? (await finalView(fleet, c)) })),
  )
  const byState: Record<string, number> = {}
  for (const { v } of views) {
    if (!v) continue
    const k = `${v.state}${v.error ? `:${v.error.code}` : ''}`
    byState[k] = (byState[k] ?? 0) + 1
  }
  const jobsByKey = new Map<string, Set<string>>()
  for (const c of accepted)
    jobsByKey.set(c.key, (jobsByKey.get(c.key) ?? new Set<string>()).add(c.jobId ?? ''))
  const twice =
    [...jobsByKey.values()].filter((s) => s.size > 1).length +
    views.filter(({ c, v }) => v?.state === 'completed' && v.result?.stdout !== expectedStdout(c.key)).length
  let changed = 0
  for (const { c, v } of views) {
    const later = await getJob(fleet, c.jobId ?? '')
    if (later.view?.state !== v?.state || later.view?.result?.stdout !== v?.result?.stdout) changed++
  }
  return {
    accepted: accepted.length,
    refused: calls.length - accepted.length,
    byState,
    lost: views.filter(({ v }) => v === undefined).length,
    twice,
    changed,
    notCompleted: views.flatMap(({ v }) => (v && v.state !== 'completed' ? [v] : [])),
  }
}
