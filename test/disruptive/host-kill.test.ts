/*
 * A fleet over two Docker engines loses a whole host (issue 17): the second engine's dockerd and the
 * `sbx worker` beside it are SIGKILLed at the same instant, with commands running on that worker.
 * Nobody hands those jobs back: their locks lapse, the main engine's worker adopts the dead engine's
 * lane, and each job's fence decides — a command that had begun is not run again (the job ends
 * `interrupted`, saying so), one that had not runs on the main engine. Every accepted job ends with a
 * result (none lost), none ran twice, and the dead host's sessions continue on the main engine in a
 * fresh sandbox whose results say the files are gone. Disruptive: runs alone, after the main pass.
 */
import { describe, expect, test } from 'vitest'
import { execSettled, killableFleet, loadThrough, placeSessions, tally } from '../support/engine-load.js'
import { killSecondEngine } from '../support/second-engine.js'

const SESSIONS = 16

const fleetOf = killableFleet('hostkill')

describe('SIGKILL of a whole host (engine and worker) under load', () => {
  test("0 accepted jobs lost, 0 run twice, begun commands end interrupted, the host's sessions rebind", async () => {
    const fleet = fleetOf()
    const placed = await placeSessions(fleet, SESSIONS)
    console.log(
      `placement: ${placed.main.length} sessions on the main engine, ${placed.second.length} on the second`,
    )
    expect(Math.abs(placed.main.length - placed.second.length)).toBeLessThanOrEqual(2)

    // Commands of a second, so several are running on the dying worker at the kill.
    const run = await loadThrough(fleet, [...placed.main, ...placed.second], {
      command: (key) => `echo ${key}; sleep 1`,
      warmupPerSession: 2,
      disrupt: async () => {
        await Promise.all([fleet.workers.second.kill(), killSecondEngine()])
      },
    })
    const t = await tally(fleet, run.calls, (key) => `${key}\n`)
    const recoveryMs = Math.max(...placed.second.map((s) => run.recovered.get(s) ?? Number.POSITIVE_INFINITY))
    console.log(
      `host killed after ${run.completedAtDisruption} completed commands; accepted ${t.accepted} jobs (refused ` +
        `and retried: ${t.refused}); outcomes ${JSON.stringify(t.byState)}; lost ${t.lost}; ran twice ${t.twice}; ` +
        `changed on a second look ${t.changed}; recovery of the host's sessions (kill → first completed ` +
        `command on the main engine): ${Math.round(recoveryMs)} ms`,
    )
    for (const v of t.notCompleted) console.log(`${v.id}: ${v.state} ${JSON.stringify(v.error)}`)
    expect(t.lost).toBe(0)
    expect(t.twice).toBe(0)
    expect(t.changed).toBe(0)
    expect(run.recovered.size).toBe(SESSIONS)
    // What did not complete says why: interrupted (begun on the dead host, not run again) or the lost sandbox.
    for (const v of t.notCompleted)
      expect(['interrupted:JOB_INTERRUPTED', 'failed:SANDBOX_LOST']).toContain(
        `${v.state}${v.error ? `:${v.error.code}` : ''}`,
      )

    // The dead host's sessions now run on the main engine, their results saying the files are gone.
    for (const s of placed.second) {
      const after = await execSettled(fleet, s, `${s}-after`, 'cat f.txt 2>/dev/null || echo no-file')
      expect(after.view?.state, `${after.status} ${after.refusal ?? JSON.stringify(after.view)}`).toBe(
        'completed',
      )
      expect(await fleet.engineOf(after.view?.result?.sandboxId ?? '')).toBe('main')
      expect(after.view?.result?.stdout).toBe('no-file\n')
      expect(after.view?.result?.sandboxReplaced?.filesLost).toBe(true)
    }
    const ls = await fleet.engineCli(['ls', '--json'])
    const engines = (JSON.parse(ls.stdout) as { engines: { id: string; state: string }[] }).engines
    expect(engines.find((e) => e.id === fleet.ids.second)?.state).toBe('down')
  })
})
