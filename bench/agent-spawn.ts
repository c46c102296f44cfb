/**
 * What one warm command costs inside the sandbox: the CPU its container's cgroup spends (the agent,
 * the `bash -c` it starts, the kernel work of both) per `echo hi` through the Docker provider's agent
 * channel, for one agent binary or two side by side. The binaries take turns in blocks of `--block`
 * commands (one sandbox per binary), so a machine whose speed drifts slows both alike; prints CPU µs
 * per command (cgroup v1 `cpuacct.usage` or v2 `cpu.stat`), wall-clock p50 of each, and the ratio.
 *
 *   npx tsx bench/agent-spawn.ts                                           # .sbx/sbx-agent alone
 *   npx tsx bench/agent-spawn.ts --candidate /tmp/sbx-agent-new            # against .sbx/sbx-agent
 *   npx tsx bench/agent-spawn.ts --baseline /tmp/old --candidate .sbx/sbx-agent --commands 2000
 *
 * Needs the Docker engine on this machine (the cgroup files are read from /sys/fs/cgroup).
 */
import { existsSync, readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { parseArgs } from 'node:util'
import { createDockerProvider } from '../providers/docker/index.js'
import { defaultAgentBinary } from '../providers/docker/agent-volume.js'
import { resolveProfile } from '../src/sandbox/profiles.js'
import { percentile } from './lib/percentile.js'

const { values: flags } = parseArgs({
  options: {
    baseline: { type: 'string' },
    candidate: { type: 'string' },
    commands: { type: 'string', default: '1000' },
    block: { type: 'string', default: '50' },
  },
})
const baseline = flags.baseline ?? defaultAgentBinary()
if (!baseline) throw new Error('no .sbx/sbx-agent: run `npm run setup`, or pass --baseline <path>')
/** The binaries measured: the baseline alone, or it and the candidate side by side. */
const binaries: Record<string, string> = {
  baseline: resolve(baseline),
  ...(flags.candidate ? { candidate: resolve(flags.candidate) } : {}),
}
const commands = Math.max(10, Number(flags.commands) || 1000)
const block = Math.max(1, Number(flags.block) || 50)

/** CPU ns the container's cgroup has used so far. */
function cgroupCpuNs(id: string): number {
  const v1 = `/sys/fs/cgroup/cpuacct/docker/${id}/cpuacct.usage`
  if (existsSync(v1)) return Number(readFileSync(v1, 'utf8'))
  for (const dir of [`/sys/fs/cgroup/system.slice/docker-${id}.scope`, `/sys/fs/cgroup/docker/${id}`]) {
    const stat = `${dir}/cpu.stat`
    if (existsSync(stat))
      return Number(/usage_usec (\d+)/.exec(readFileSync(stat, 'utf8'))?.[1] ?? NaN) * 1000
  }
  throw new Error(`no cgroup CPU accounting found for container ${id}`)
}

const arms = await Promise.all(
  Object.entries(binaries).map(async ([name, binary]) => {
    const provider = createDockerProvider({ agentBinary: binary })
    const sandbox = await provider.create(resolveProfile('bench', { provider: 'docker' }), {
      labels: { 'sandbox-router.bench': 'agent-spawn' },
    })
    return { name, binary, provider, sandbox, cpuNs: 0, n: 0, latencies: [] as number[] }
  }),
)
try {
  const request = { command: 'echo hi', timeoutMs: 10_000, outputCapBytes: 1 << 20 }
  for (const arm of arms) for (let i = 0; i < 20; i++) await arm.sandbox.exec(request)
  for (let done = 0; done < commands; done += block) {
    for (const arm of arms) {
      const before = cgroupCpuNs(arm.sandbox.ref.id)
      for (let i = 0; i < block; i++) {
        const t = performance.now()
        const r = await arm.sandbox.exec(request)
        arm.latencies.push(performance.now() - t)
        if (r.stdout !== 'hi\n') throw new Error(`${arm.name}: unexpected output ${JSON.stringify(r.stdout)}`)
      }
      arm.cpuNs += cgroupCpuNs(arm.sandbox.ref.id) - before
      arm.n += block
    }
  }
  for (const arm of arms)
    console.log(
      `${arm.name.padEnd(9)} ${(arm.cpuNs / arm.n / 1000).toFixed(0).padStart(6)} µs sandbox CPU/command  p50 ${percentile(arm.latencies, 50).toFixed(2)} ms  (${arm.binary})`,
    )
  const [a, b] = arms
  if (a && b)
    console.log(`candidate/baseline sandbox CPU per command: ${(b.cpuNs / b.n / (a.cpuNs / a.n)).toFixed(2)}`)
} finally {
  for (const arm of arms) {
    await arm.provider.destroy(arm.sandbox.ref).catch(() => undefined)
    await arm.provider.close()
  }
}
