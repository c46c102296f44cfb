/*
 * A fleet over two Docker engines loses one (issue 17): `sbx api` + one `sbx worker` per engine, 16
 * sessions spread over both, commands running on all of them, then the second engine's dockerd is
 * SIGKILLed (the test's own engine, never the machine's main one). Every accepted job ends with a
 * result (none lost), none ran twice, and the second engine's sessions continue on the main engine in
 * a fresh sandbox whose results say the files are gone. Disruptive (it kills an engine): runs alone,
 * after the main pass (vitest.disruptive.config.ts). host-kill.test.ts kills the worker too.
 */
import { describe, expect, test } from 'vitest'
import { execSettled, killableFleet, loadThrough, placeSessions, tally } from '../support/engine-load.js'
import { killSecondEngine } from '../support/second-engine.js'

const SESSIONS = 16

const fleetOf = killableFleet('engkill')

describe('SIGKILL of one engine of two under load', () => {
  test("0 accepted jobs lost, 0 run twice, the lost engine's sessions rebind on the other", async () => {
    const fleet = fleetOf()
    // 16 sessions, placed at once: the fleet spreads them evenly.
    const placed = await placeSessions(fleet, SESSIONS)
    console.log(
      `placement: ${placed.main.length} sessions on the main engine, ${placed.second.length} on the second`,
    )
    expect(Math.abs(placed.main.length - placed.second.length)).toBeLessThanOrEqual(2)
    expect(placed.second.length + placed.main.length).toBe(SESSIONS)

    // Load: each session runs commands one after another; the second engine is killed mid-way.
    const run = await loadThrough(fleet, [...placed.main, ...placed.second], {
      command: (key) => `echo ${key}; sleep 0.1`,
      disrupt: async () => {
        await killSecondEngine()
      },
    })
    console.log(`killed the second engine's dockerd after ${run.completedAtDisruption} completed commands`)
    const t = await tally(fleet, run.calls, (key) => `${key}\n`)
    const recoveryMs = Math.max(...placed.second.map((s) => run.recovered.get(s) ?? Number.POSITIVE_INFINITY))
    console.log(
      `accepted ${t.accepted} jobs (refused and retried: ${t.refused}); outcomes ${JSON.stringify(t.byState)}; ` +
        `lost ${t.lost}; ran twice ${t.twice}; changed on a second look ${t.changed}; recovery of the second ` +
        `engine's sessions (kill → first completed command on the main engine): ${Math.round(recoveryMs)} ms`,
    )
    for (const v of t.notCompleted) console.log(`${v.id}: ${v.state} ${JSON.stringify(v.error)}`)
    expect(t.lost).toBe(0)
    expect(t.twice).toBe(0)
    expect(t.changed).toBe(0)
    expect(run.recovered.size).toBe(SESSIONS)

    // The second engine's sessions now run on the main engine, their results saying the files are gone.
    for (const s of placed.second) {
      const after = await execSettled(fleet, s, `${s}-after`, 'cat f.txt 2>/dev/null || echo no-file')
      expect(after.view?.state).toBe('completed')
      expect(await fleet.engineOf(after.view?.result?.sandboxId ?? '')).toBe('main')
      expect(after.view?.result?.stdout).toBe('no-file\n')
      expect(after.view?.result?.sandboxReplaced?.filesLost).toBe(true)
    }
    // The main engine's sessions kept their sandboxes and files.
    for (const s of placed.main) {
      const after = await execSettled(fleet, s, `${s}-after`, 'cat f.txt')
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
