/**
 * The output, cancellation and file cases of the provider conformance suite (split from
 * `index.ts` to keep files small). Imports vitest: not re-exported from the sandbox index.
 */
import { randomBytes } from 'node:crypto'
import { expect, test } from 'vitest'
import { droppedMarker, outputSplit } from '../output-cap.js'
import type { ResolvedProfile } from '../profiles.js'
import type { ExecRequest, ExecResult, Sandbox } from '../types.js'

/** What the cases need from the suite that registers them. */
export interface ConformanceContext {
  /** The suite's shared sandbox (created in its beforeAll). */
  sandbox: () => Sandbox
  run: (command: string, extra?: Partial<ExecRequest>) => Promise<ExecResult>
  /** Polls inside the sandbox (bounded) until the process whose pid is in the file is gone. */
  processGone: (pidFile: string) => Promise<string>
  base: Pick<ExecRequest, 'timeoutMs' | 'outputCapBytes'>
  profile: ResolvedProfile
  timeout: number
  largeBytes: number
}

/** The error a promise rejects with (fails when it resolves). */
export async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise
  } catch (err) {
    return err
  }
  throw new Error('expected the promise to reject')
}

/**
 * 5 MiB of numbered lines under a 1 MiB cap: the result has the first line, the last line and one
 * marker at the end of the head, and holds exactly the cap plus the marker.
 */
export async function expectHeadAndTail(
  run: (command: string, extra?: Partial<ExecRequest>) => Promise<ExecResult>,
): Promise<void> {
  const lines = 700_000
  let total = 0
  for (let i = 1; i <= lines; i++) total += String(i).length + 1
  const cap = 1024 * 1024
  const r = await run(`seq 1 ${lines}; echo done >&2`, { outputCapBytes: cap })
  expect(r.exitCode).toBe(0)
  expect(r.truncated).toBe(true)
  expect(r.stdout.startsWith('1\n2\n3\n')).toBe(true)
  expect(r.stdout.endsWith(`\n${lines - 1}\n${lines}\n`)).toBe(true)
  const marker = droppedMarker(total - cap)
  expect(r.stdout.indexOf(marker)).toBe(outputSplit(cap).head)
  expect(Buffer.byteLength(r.stdout)).toBe(cap + marker.length)
  expect(r.stderr).toBe('done\n')
}

/** Registers large output, timeout, cap, signal, live output, cancel and file cases. */
export function registerIoCases(ctx: ConformanceContext): void {
  const { sandbox, run, processGone, base, profile, timeout, largeBytes } = ctx

  test(
    'large output arrives whole under the cap',
    async () => {
      const r = await run(`head -c ${largeBytes} /dev/zero | tr '\\0' x`, {
        outputCapBytes: largeBytes * 2,
      })
      expect(r.exitCode).toBe(0)
      expect(r.truncated).toBe(false)
      expect(r.stdout.length).toBe(largeBytes)
      expect(r.stdout.replace(/x/g, '')).toBe('')
    },
    timeout,
  )

  test(
    'timeout kills the whole process group and keeps partial output',
    async () => {
      const r = await run('echo started; sleep 300 & echo $! > bg.pid; sleep 300', { timeoutMs: 1000 })
      expect(r.timedOut).toBe(true)
      expect(r.stdout).toBe('started\n')
      expect(r.durationMs).toBeLessThan(15_000)
      expect(await processGone('bg.pid')).toBe('gone')
    },
    timeout,
  )

  test(
    'output cap sets truncated and does not block the process',
    async () => {
      const r = await run(`head -c 3000000 /dev/zero | tr '\\0' y; echo finished >&2`, {
        outputCapBytes: 1000,
      })
      expect(r.exitCode).toBe(0)
      expect(r.truncated).toBe(true)
      expect(r.stdout).toBe('y'.repeat(500) + droppedMarker(3_000_000 - 1000) + 'y'.repeat(500))
      expect(r.stderr).toBe('finished\n')
    },
    timeout,
  )

  test(
    'past the cap the result keeps the head and the tail, with a marker saying what was dropped',
    () => expectHeadAndTail(run),
    timeout,
  )

  test(
    'past the cap, the live output adds up to the result (head live, then marker and tail)',
    async () => {
      let live = ''
      const r = await sandbox().exec(
        { ...base, command: 'seq 1 100000', outputCapBytes: 4096 },
        { onStdout: (chunk) => (live += chunk) },
      )
      expect(r.truncated).toBe(true)
      expect(r.stdout.endsWith('\n99999\n100000\n')).toBe(true)
      expect(live).toBe(r.stdout)
      // 10-byte lines of 2-, 3- and 4-byte characters: the head ends inside a character.
      let multi = ''
      const m = await sandbox().exec(
        { ...base, command: "yes 'é語😀' | head -n 3000", outputCapBytes: 4096 },
        { onStdout: (chunk) => (multi += chunk) },
      )
      expect(m.stdout.endsWith('é語😀\né語😀\n')).toBe(true)
      expect(multi).toBe(m.stdout)
    },
    timeout,
  )

  test(
    'a process ended by a signal reports the signal',
    async () => {
      const r = await run('kill -9 $$')
      expect(r.exitCode).toBeNull()
      expect(r.signal).toBe('SIGKILL')
    },
    timeout,
  )

  test(
    'live onStdout delivers output while the command still runs',
    async () => {
      await run('rm -f go.flag')
      let seen = ''
      let sawFirst!: () => void
      const first = new Promise<void>((resolve) => (sawFirst = resolve))
      const pending = sandbox().exec(
        { ...base, command: 'echo first; while [ ! -f go.flag ]; do sleep 0.02; done; echo second' },
        {
          onStdout: (chunk) => {
            seen += chunk
            if (seen.includes('first')) sawFirst()
          },
        },
      )
      await first
      await sandbox().writeFile('go.flag', '')
      const r = await pending
      expect(r.stdout).toBe('first\nsecond\n')
      expect(seen).toBe('first\nsecond\n')
    },
    timeout,
  )

  test(
    'cancel via AbortSignal kills the process group and rejects with the reason',
    async () => {
      const controller = new AbortController()
      const reason = new Error('cancelled by test')
      const pending = sandbox().exec(
        { ...base, command: 'sleep 300 & echo $! > cancel.pid; echo ready; wait' },
        { signal: controller.signal, onStdout: (c) => c.includes('ready') && controller.abort(reason) },
      )
      expect(await rejectionOf(pending)).toBe(reason)
      expect(await processGone('cancel.pid')).toBe('gone')
      const already = AbortSignal.abort(reason)
      expect(await rejectionOf(sandbox().exec({ ...base, command: 'echo no' }, { signal: already }))).toBe(
        reason,
      )
    },
    timeout,
  )

  test(
    'files: binary round trip, nested directories, absolute paths, utf-8 strings',
    async () => {
      const all = new Uint8Array(256).map((_, i) => i)
      await sandbox().writeFile('bin/all.bytes', all)
      expect(Buffer.from(await sandbox().readFile('bin/all.bytes')).equals(Buffer.from(all))).toBe(true)
      const big = randomBytes(3 * 1024 * 1024 + 17)
      await sandbox().writeFile('d1/d2/d3/big.bin', big)
      expect(Buffer.from(await sandbox().readFile(`${profile.cwd}/d1/d2/d3/big.bin`)).equals(big)).toBe(true)
      expect((await run('wc -c < d1/d2/d3/big.bin')).stdout.trim()).toBe(String(big.length))
      await sandbox().writeFile('/tmp/abs/ü.txt', 'héllo 😀')
      expect(Buffer.from(await sandbox().readFile('/tmp/abs/ü.txt')).toString('utf8')).toBe('héllo 😀')
      await sandbox().writeFile('bin/all.bytes', 'shorter')
      expect(Buffer.from(await sandbox().readFile('bin/all.bytes')).toString()).toBe('shorter')
      await sandbox().writeFile('empty', new Uint8Array())
      expect((await sandbox().readFile('empty')).length).toBe(0)
    },
    timeout,
  )

  test(
    'files: reading a missing file fails with NOT_FOUND',
    async () => {
      expect(await rejectionOf(sandbox().readFile('no/such/file'))).toMatchObject({ code: 'NOT_FOUND' })
    },
    timeout,
  )
}
