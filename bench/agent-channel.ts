/**
 * The direct agent channel (frames on a socket of ours, providers/docker/direct-channel.ts) against
 * the engine-relayed one (frames through `docker exec`: dockerd and containerd-shim copy each one),
 * side by side in one process: two Docker providers, `--sandboxes` sandboxes each, phases that
 * alternate between them. Each phase keeps one command in flight per sandbox for `--seconds`.
 *
 * Printed per phase: commands/s, p50/p99, and CPU per command of the whole machine and of the
 * engine's relay (`dockerd` + `containerd-shim`, from /proc), then the ratios direct/relayed.
 *
 *   npx tsx bench/agent-channel.ts [--sandboxes 8] [--seconds 6] [--rounds 3] [--op shell|ping]
 *
 * `--op shell` (default): `echo hi` in each sandbox's persistent shell (a bash builtin: no process
 * starts, so the channel's own cost shows). `--op ping`: the agent round trip alone.
 */
import { readFileSync, readdirSync } from 'node:fs'
import { mkdtemp, rm } from 'node:fs/promises'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { type DockerProvider, createDockerProvider } from '../providers/docker/index.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import type { Sandbox } from '../src/sandbox/types.js'

const { values } = parseArgs({
  options: {
    sandboxes: { type: 'string', default: '8' },
    seconds: { type: 'string', default: '6' },
    rounds: { type: 'string', default: '3' },
    op: { type: 'string', default: 'shell' },
  },
})
const sandboxes = Math.max(1, Number(values.sandboxes))
const seconds = Math.max(1, Number(values.seconds))
const rounds = Math.max(1, Number(values.rounds))
const op = values.op === 'ping' ? 'ping' : 'shell'

const TICK_MS = 1000 / 100 // USER_HZ

/** Busy CPU time of the whole machine so far (ms), from /proc/stat. */
function machineBusyMs(): number {
  const cpu = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number)
  const idle = (cpu[3] ?? 0) + (cpu[4] ?? 0)
  return (cpu.reduce((a, v) => a + v, 0) - idle) * TICK_MS
}

/** CPU time so far (ms) of the processes named dockerd or containerd-shim*, by pid. */
function relayCpu(): Map<number, number> {
  const out = new Map<number, number>()
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8')
      const comm = stat.slice(stat.indexOf('(') + 1, stat.lastIndexOf(')'))
      if (comm !== 'dockerd' && !comm.startsWith('containerd-shim')) continue
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
      out.set(Number(name), (Number(fields[11]) + Number(fields[12])) * TICK_MS)
    } catch {
      // gone meanwhile
    }
  }
  return out
}

/** CPU (ms) the relay's processes used between two snapshots (processes alive at both). */
function relayDelta(a: Map<number, number>, b: Map<number, number>): number {
  let sum = 0
  for (const [pid, v] of b) if (a.has(pid)) sum += v - a.get(pid)!
  return sum
}

const percentile = (sorted: number[], p: number): number =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN

interface Phase {
  rate: number
  p50: number
  p99: number
  machineMs: number
  relayMs: number
}

async function phase(boxes: Sandbox[]): Promise<Phase> {
  const samples: number[] = []
  const until = performance.now() + seconds * 1000
  const busy0 = machineBusyMs()
  const relay0 = relayCpu()
  const t0 = performance.now()
  await Promise.all(
    boxes.map(async (sb) => {
      while (performance.now() < until) {
        const t = performance.now()
        if (op === 'ping') {
          if (!(await sb.health()).ok) throw new Error('sandbox unhealthy')
        } else {
          const r = await sb.exec({
            command: 'echo hi',
            timeoutMs: 10_000,
            outputCapBytes: 1 << 20,
            shell: 'persistent',
          })
          if (r.stdout !== 'hi\n') throw new Error(`unexpected output ${JSON.stringify(r.stdout)}`)
        }
        samples.push(performance.now() - t)
      }
    }),
  )
  const wall = performance.now() - t0
  const n = samples.length
  samples.sort((a, b) => a - b)
  return {
    rate: (n / wall) * 1000,
    p50: percentile(samples, 50),
    p99: percentile(samples, 99),
    machineMs: (machineBusyMs() - busy0) / n,
    relayMs: relayDelta(relay0, relayCpu()) / n,
  }
}

const dir = await mkdtemp(join(tmpdir(), 'sbx-bench-direct-'))
const paths: [string, DockerProvider, Sandbox[]][] = [
  ['direct channel (socket of ours)', createDockerProvider({ agentSocketDir: dir }), []],
  ['relayed channel (docker exec)', createDockerProvider({ agentSocketDir: false }), []],
]
const labels = { 'sandbox-router.bench': 'agent-channel' }
try {
  for (const [, provider, boxes] of paths) {
    for (let i = 0; i < sandboxes; i++)
      boxes.push(await provider.create(resolveProfile('bench', { provider: 'docker' }), { labels }))
  }
  for (const [, , boxes] of paths) await phase(boxes) // warm
  const ratios: string[] = []
  for (let r = 1; r <= rounds; r++) {
    const got: Phase[] = []
    for (const [name, , boxes] of paths) {
      const p = await phase(boxes)
      got.push(p)
      console.log(
        `round ${r}  ${name.padEnd(32)} ${p.rate.toFixed(0).padStart(5)} ${op === 'ping' ? 'pings' : 'commands'}/s  ` +
          `p50 ${p.p50.toFixed(2)} ms  p99 ${p.p99.toFixed(2)} ms  ` +
          `machine CPU ${p.machineMs.toFixed(2)} ms/op  dockerd+shim ${p.relayMs.toFixed(2)} ms/op`,
      )
    }
    const [d, e] = got as [Phase, Phase]
    ratios.push(
      `round ${r}: rate ${(d.rate / e.rate).toFixed(2)}, machine CPU/op ${(d.machineMs / e.machineMs).toFixed(2)}, p50 ${(d.p50 / e.p50).toFixed(2)}`,
    )
  }
  console.log(`${sandboxes} sandboxes, ${seconds} s per phase, op ${op}: direct/relayed per round`)
  for (const line of ratios) console.log(`  ${line}`)
} finally {
  for (const [, provider, boxes] of paths) {
    await Promise.all(boxes.map((b) => provider.destroy(b.ref).catch(() => undefined)))
    await provider.close()
  }
  await rm(dir, { recursive: true, force: true })
}
