/**
 * What the tail ring costs: 5 MiB of stdout through the sbx-agent of this tree vs the agent of a
 * baseline commit (before head + tail), both compiled here with setup.sh's flags and run side by
 * side in one container (`docker exec -i`, as the provider runs it), interleaved round by round.
 * Timed from the EXEC frame to the EXIT frame, frames decoded on the host.
 *
 *   npx tsx bench/output-tail.ts     # BENCH_ROUNDS (default 40), BENCH_BASELINE_REF (default 447dca5)
 */
import { execFileSync, spawn } from 'node:child_process'
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Frame, FrameDecoder, encodeExec } from '../providers/docker/protocol.js'

const rounds = Math.min(Math.max(Number(process.env.BENCH_ROUNDS ?? 40) || 40, 5), 500)
const baselineRef = process.env.BENCH_BASELINE_REF ?? '447dca5'
const image = process.env.SBX_BASE_IMAGE ?? 'sandbox-router/base:latest'
const MiB = 1024 * 1024

const dir = mkdtempSync(join(tmpdir(), 'sbx-bench-tail-'))
chmodSync(dir, 0o755) // the container's user reads the binaries from it
const build = (name: string, source: string, header: string): void => {
  writeFileSync(join(dir, `${name}.c`), source)
  writeFileSync(join(dir, 'protocol.h'), header)
  execFileSync('gcc', ['-static', '-O2', '-o', join(dir, name), join(dir, `${name}.c`)])
}
const git = (path: string, ref?: string): string =>
  ref
    ? execFileSync('git', ['show', `${ref}:${path}`], { encoding: 'utf8' })
    : execFileSync('cat', [path], { encoding: 'utf8' })
build(
  'agent-before',
  git('providers/docker/agent/sbx-agent.c', baselineRef),
  git('providers/docker/agent/protocol.h', baselineRef),
)
build('agent-after', git('providers/docker/agent/sbx-agent.c'), git('providers/docker/agent/protocol.h'))

const container = execFileSync(
  'docker',
  [
    'run',
    '-d',
    '--rm',
    '--network',
    'none',
    '--entrypoint',
    'sleep',
    '-v',
    `${dir}:/bench:ro`,
    '--label',
    'sandbox-router.bench=output-tail',
    image,
    'infinity',
  ],
  { encoding: 'utf8' },
).trim()

// Also when the process dies of an exception (an agent that cannot start), not only in `finally`.
process.on('exit', () => execFileSync('docker', ['rm', '-f', container], { stdio: 'ignore' }))

/** One agent channel: sends a command, resolves at its EXIT frame with the elapsed ms and bytes received. */
function openAgent(binary: string) {
  const child = spawn('docker', ['exec', '-i', container, `/bench/${binary}`], {
    stdio: ['pipe', 'pipe', 'inherit'],
  })
  const decoder = new FrameDecoder()
  let waiting: ((bytes: number) => void) | undefined
  let hello: (() => void) | undefined
  const ready = new Promise<void>((resolve) => (hello = resolve))
  let bytes = 0
  child.stdout.on('data', (chunk: Buffer) => {
    for (const f of decoder.push(chunk)) {
      if (f.type === Frame.HELLO) hello?.()
      else if (f.type === Frame.STDOUT || f.type === Frame.TAIL) bytes += f.payload.length
      else if (f.type === Frame.EXIT) waiting?.(bytes)
    }
  })
  let id = 0
  return {
    ready,
    run(command: string, capBytes: number): Promise<{ ms: number; bytes: number }> {
      bytes = 0
      const t = performance.now()
      return new Promise((resolve) => {
        waiting = (n) => resolve({ ms: performance.now() - t, bytes: n })
        child.stdin.write(
          encodeExec(++id, {
            timeoutMs: 60_000,
            capBytes,
            cwd: '/tmp',
            command,
            env: {},
            stdin: new Uint8Array(),
          }),
        )
      })
    },
    close: () => child.kill(),
  }
}

const p50 = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? NaN

try {
  const before = openAgent('agent-before')
  const after = openAgent('agent-after')
  await Promise.all([before.ready, after.ready])
  const command = `head -c ${5 * MiB} /dev/zero`
  const cases = [
    { label: '5 MiB, cap 1 MiB (past the cap: tail ring used)', cap: MiB },
    { label: '5 MiB, cap 8 MiB (under the cap)', cap: 8 * MiB },
  ]
  for (const c of cases) {
    const times = { before: [] as number[], after: [] as number[] }
    let wire = { before: 0, after: 0 }
    for (let i = 0; i < 3; i++) {
      await before.run(command, c.cap)
      await after.run(command, c.cap)
    }
    for (let i = 0; i < rounds; i++) {
      // Alternate which goes first, so neither always runs on a warmer machine.
      const order = i % 2 === 0 ? (['before', 'after'] as const) : (['after', 'before'] as const)
      for (const which of order) {
        const r = await (which === 'before' ? before : after).run(command, c.cap)
        times[which].push(r.ms)
        wire = { ...wire, [which]: r.bytes }
      }
    }
    const b = p50(times.before)
    const a = p50(times.after)
    console.log(
      `${c.label.padEnd(48)} p50 before ${b.toFixed(2).padStart(7)} ms  after ${a.toFixed(2).padStart(7)} ms  ` +
        `ratio ${(a / b).toFixed(3)}  bytes to the host before ${wire.before} after ${wire.after}`,
    )
  }
  before.close()
  after.close()
} finally {
  rmSync(dir, { recursive: true, force: true })
}
