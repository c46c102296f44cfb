/**
 * The backpressure cases of the provider conformance suite (registered by the background-process
 * cases): with `backpressure`, a writer faster than its reader is held back and the reader gets every
 * byte in order; without it, or once nobody read for the idle time, the buffer drops the oldest
 * bytes and says how many; a held-back process nobody reads is still killable, its end is
 * recorded, and removing it leaves nothing behind. Imports vitest: not re-exported
 * from the sandbox index.
 */
import { createHash, randomUUID } from 'node:crypto'
import { expect } from 'vitest'
import { PROCESS_ROOT, REMOTE_PROCESS_ROOT } from '../agent-processes.js'
import type { ConformanceContext } from './io-cases.js'
import type { ProcessTest } from './process-cases.js'
import type { ProcessInfo, SandboxProcesses } from '../types.js'

/** The ring of these cases: the writer writes several times as much. */
const RING = 64 * 1024
/** `seq 1 LINES` writes 288 894 bytes, 4.4 rings. */
const LINES = 50_000
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex')

/** Registers the backpressure cases (gated on the `processes` capability). */
export function registerBackpressureCases(ctx: ConformanceContext, procTest: ProcessTest): void {
  const { run, processGone } = ctx
  const limits = { outputBufferBytes: RING, maxRunning: 8 }
  const newId = (): string => `p-bp-${randomUUID().slice(0, 8)}`
  const expected = Array.from({ length: LINES }, (_, i) => `${i + 1}\n`).join('')

  /** The process as the list shows it (not a read: a read would count as someone reading). */
  const stateOf = async (p: SandboxProcesses, id: string): Promise<ProcessInfo> => {
    const info = (await p.list()).find((x) => x.id === id)
    if (!info) throw new Error(`process ${id} is not listed`)
    return info
  }

  /** Polls the process (bounded) until `done` holds; each poll is one round trip to the sandbox. */
  const until = async (
    p: SandboxProcesses,
    id: string,
    done: (info: ProcessInfo) => boolean,
  ): Promise<ProcessInfo> => {
    for (let i = 0; i < 200; i++) {
      const info = await stateOf(p, id)
      if (done(info)) return info
      await new Promise((r) => setTimeout(r, 25))
    }
    throw new Error(
      `process ${id} never reached the awaited state; last: ${JSON.stringify(await stateOf(p, id))}`,
    )
  }

  /** Reads both streams to the end in slices of `slice` bytes; fails on any dropped byte. */
  const readAll = async (
    p: SandboxProcesses,
    id: string,
    slice: number,
  ): Promise<{ stdout: string; stderr: string; reads: number; last: ProcessInfo }> => {
    let stdout = ''
    let stderr = ''
    const at = { stdoutOffset: 0, stderrOffset: 0 }
    for (let reads = 1; reads < 2000; reads++) {
      const o = await p.read(id, { ...at, maxBytes: slice, waitMs: 5_000 })
      expect(o.stdout.dropped, `stdout dropped at offset ${at.stdoutOffset}`).toBe(0)
      expect(o.stderr.dropped, `stderr dropped at offset ${at.stderrOffset}`).toBe(0)
      stdout += o.stdout.data
      stderr += o.stderr.data
      at.stdoutOffset = o.stdout.nextOffset
      at.stderrOffset = o.stderr.nextOffset
      const info = o.process
      if (
        info.state !== 'running' &&
        at.stdoutOffset >= info.stdoutBytes &&
        at.stderrOffset >= info.stderrBytes
      )
        return { stdout, stderr, reads, last: info }
    }
    throw new Error(`no end in sight after 2000 reads of process ${id}`)
  }

  procTest('backpressure holds the writer back and the reader gets every byte in order', async (p) => {
    const id = newId()
    await p.start(id, { ...limits, backpressure: true, command: `seq 1 ${LINES}; echo done >&2` })
    // Nobody reads: the ring fills up to its size and no further, and the writer waits (a writer not
    // held back would have written all 288 894 bytes and ended by now).
    const full = await until(p, id, (info) => info.stdoutBytes >= RING || info.state !== 'running')
    expect(full).toMatchObject({ state: 'running', stdoutBytes: RING })
    for (let look = 0; look < 3; look++)
      expect(await stateOf(p, id)).toMatchObject({ state: 'running', stdoutBytes: RING })
    // A slow reader (16 KiB a read) gets everything, in order, without a dropped byte.
    const all = await readAll(p, id, 16 * 1024)
    expect(all.last).toMatchObject({ state: 'exited', exitCode: 0, stdoutBytes: expected.length })
    expect(all.stdout.length).toBe(expected.length)
    expect(sha256(all.stdout)).toBe(sha256(expected))
    expect(all.stderr).toBe('done\n')
    expect(all.reads).toBeGreaterThanOrEqual(expected.length / (16 * 1024))
    await p.remove(id)
  })

  procTest(
    'without backpressure the writer is not held back and the reader sees what was dropped',
    async (p) => {
      const id = newId()
      await p.start(id, { ...limits, command: `seq 1 ${LINES}` })
      const end = await until(p, id, (info) => info.state !== 'running')
      expect(end).toMatchObject({ state: 'exited', exitCode: 0, stdoutBytes: expected.length })
      const o = await p.read(id, { stdoutOffset: 0, stderrOffset: 0, maxBytes: RING })
      expect(o.stdout).toMatchObject({ offset: expected.length - RING, dropped: expected.length - RING })
      expect(o.stdout.data).toBe(expected.slice(-RING))
      await p.remove(id)
    },
  )

  procTest('once nobody reads for the idle time, the writer is no longer held back', async (p) => {
    const id = newId()
    await p.start(id, {
      ...limits,
      backpressure: true,
      backpressureIdleMs: 1_000,
      command: `seq 1 ${LINES}`,
    })
    // No read at all: after a second the ring drops the oldest bytes, and the writer finishes.
    const end = await until(p, id, (info) => info.state !== 'running')
    expect(end).toMatchObject({ state: 'exited', exitCode: 0, stdoutBytes: expected.length })
    const o = await p.read(id, { stdoutOffset: 0, stderrOffset: 0, maxBytes: RING })
    expect(o.stdout).toMatchObject({ offset: expected.length - RING, dropped: expected.length - RING })
    await p.remove(id)
  })

  procTest(
    'a held-back process nobody reads is killable, and a reader still gets its last bytes',
    async (p) => {
      const id = newId()
      await p.start(id, { ...limits, backpressure: true, command: 'yes 0123456789abcdef' })
      await until(p, id, (info) => info.stdoutBytes >= RING || info.state !== 'running')
      const killed = await p.signal(id, 'SIGKILL', 5_000)
      expect(killed).toMatchObject({ state: 'exited', signal: 'SIGKILL' })
      // What its pipe held at the kill counts, and reads get it: whole lines up to the last one.
      expect(killed.stdoutBytes).toBeGreaterThanOrEqual(RING)
      const all = await readAll(p, id, RING)
      expect(all.stdout.length).toBe(killed.stdoutBytes)
      expect(all.stdout.replaceAll('0123456789abcdef\n', '')).toBe(
        '0123456789abcdef\n'.slice(0, killed.stdoutBytes % 17),
      )
      await p.remove(id)
      expect((await p.list()).map((x) => x.id)).not.toContain(id)
    },
  )

  procTest('removing a held-back process nobody read ends its supervisor too', async (p) => {
    const id = newId()
    await p.start(id, { ...limits, backpressure: true, command: 'yes' })
    await until(p, id, (info) => info.stdoutBytes >= RING || info.state !== 'running')
    // The agent's supervisor (second field of its meta file; absent for another implementation).
    const pidFile = `sup-${id}.pid`
    const meta = `${PROCESS_ROOT}/${id}/meta ${REMOTE_PROCESS_ROOT}/${id}/meta`
    const sup = (await run(`cat ${meta} 2>/dev/null | cut -d' ' -f2 | tee ${pidFile}`)).stdout.trim()
    expect(await p.remove(id)).toMatchObject({ state: 'exited', signal: 'SIGKILL' })
    if (sup) expect(await processGone(pidFile)).toBe('gone')
  })
}
