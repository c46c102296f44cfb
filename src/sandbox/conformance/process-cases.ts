/**
 * The background-process cases of the provider conformance suite: what a provider whose handles
 * carry `processes` must do (start, list, output from offsets with a capped buffer, stdin, signals
 * to the whole group, remove; backpressure in backpressure-cases.ts). A provider without them
 * has no `processes` and the cases pass trivially (the service answers UNSUPPORTED). Imports
 * vitest: not re-exported from the sandbox index.
 */
import { randomUUID } from 'node:crypto'
import { expect, test } from 'vitest'
import { AppError } from '../../errors.js'
import { registerBackpressureCases } from './backpressure-cases.js'
import { type ConformanceContext, rejectionOf } from './io-cases.js'
import type { ProcessOutput, SandboxProcesses } from '../types.js'

/** Registers one case of the background-process suite (skipped where the provider has no processes). */
export type ProcessTest = (name: string, fn: (p: SandboxProcesses) => Promise<void>) => void

/** Registers the background-process cases (gated on the `processes` capability). */
export function registerProcessCases(ctx: ConformanceContext): void {
  const { sandbox, timeout } = ctx
  const limits = { outputBufferBytes: 1024, maxRunning: 8 }
  const newId = (): string => `p-conf-${randomUUID().slice(0, 8)}`
  /** Reads on from the offsets (each read waits for news) until `done` holds for the text so far. */
  const collect = async (
    p: SandboxProcesses,
    id: string,
    done: (stdout: string, last: ProcessOutput) => boolean,
  ): Promise<{ stdout: string; stderr: string; last: ProcessOutput }> => {
    let stdout = ''
    let stderr = ''
    const at = { stdoutOffset: 0, stderrOffset: 0 }
    for (let i = 0; i < 50; i++) {
      const last = await p.read(id, { ...at, maxBytes: 65_536, waitMs: 5_000 })
      stdout += last.stdout.data
      stderr += last.stderr.data
      at.stdoutOffset = last.stdout.nextOffset
      at.stderrOffset = last.stderr.nextOffset
      if (done(stdout, last)) return { stdout, stderr, last }
    }
    throw new Error(`no end in sight; stdout so far ${JSON.stringify(stdout)}`)
  }
  const procTest: ProcessTest = (name, fn) =>
    test(
      `background processes: ${name}`,
      async () => {
        const p = sandbox().processes
        if (!p) return expect(p).toBeUndefined()
        await fn(p)
      },
      timeout,
    )

  procTest('start, list, read from offsets, exit code, separate stderr', async (p) => {
    const id = newId()
    const info = await p.start(id, {
      ...limits,
      command: 'echo one; echo two >&2; read -r x; echo "[$x]"; exit 4',
    })
    expect(info).toMatchObject({ id, state: 'running', exitCode: null })
    expect((await p.list()).map((x) => x.id)).toContain(id)
    await collect(p, id, (s) => s === 'one\n')
    await p.writeStdin(id, new TextEncoder().encode('in\n'), true)
    const end = await collect(p, id, (_s, last) => last.process.state === 'exited')
    expect(end.stdout).toBe('one\n[in]\n')
    expect(end.stderr).toBe('two\n')
    expect(end.last.process).toMatchObject({ exitCode: 4, signal: null, stdinClosed: true })
    const mid = await p.read(id, { stdoutOffset: 4, stderrOffset: 0, maxBytes: 2 })
    expect(mid.stdout).toMatchObject({ data: '[i', offset: 4, nextOffset: 6, dropped: 0 })
    await p.remove(id)
    expect((await p.list()).map((x) => x.id)).not.toContain(id)
  })

  procTest('the buffer keeps the newest bytes and says how many were dropped', async (p) => {
    const id = newId()
    await p.start(id, { ...limits, command: 'seq 1 2000' })
    const end = await collect(p, id, (_s, last) => last.process.state === 'exited')
    const total = end.last.process.stdoutBytes
    const o = await p.read(id, { stdoutOffset: 0, stderrOffset: 0, maxBytes: 1 << 20 })
    expect(o.stdout).toMatchObject({ offset: total - 1024, nextOffset: total, dropped: total - 1024 })
    expect(o.stdout.data.endsWith('1999\n2000\n')).toBe(true)
    await p.remove(id)
  })

  procTest('a signal reaches the whole group; the limit and unknown ids are clear errors', async (p) => {
    const id = newId()
    await p.start(id, { ...limits, command: 'sleep 300 & sleep 300; wait' })
    const killed = await p.signal(id, 'SIGTERM', 5_000)
    expect(killed).toMatchObject({ state: 'exited', signal: 'SIGTERM' })
    // The background sleep was in the group: nothing of it is left to signal.
    const again = await rejectionOf(p.signal(id, 'SIGTERM', 0))
    expect((again as AppError).code).toBe('CONFLICT')
    const unknown = await rejectionOf(p.read('p-none', { stdoutOffset: 0, stderrOffset: 0, maxBytes: 1 }))
    expect(unknown).toBeInstanceOf(AppError)
    expect((unknown as AppError).code).toBe('NOT_FOUND')
    const one = { ...limits, maxRunning: 1 }
    const a = newId()
    await p.start(a, { ...one, command: 'sleep 300' })
    const over = await rejectionOf(p.start(newId(), { ...one, command: 'sleep 300' }))
    expect((over as AppError).code).toBe('QUOTA_EXCEEDED')
    await p.remove(a)
    await p.remove(id)
  })

  registerBackpressureCases(ctx, procTest)
}
