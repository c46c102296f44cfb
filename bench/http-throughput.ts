/**
 * Throughput of warm routed commands through the HTTP API with many sessions at once: `sbx serve`
 * (embedded) against `sbx api` + `sbx worker` (fleet, separate processes on one Redis), both started
 * as child processes. `--sessions` warm sessions (default 24), one client loop per session, each
 * `POST /v1/exec` of `echo hi` (wait for the result) after the previous one answered, for `--seconds`
 * per phase (the client: `node:http`, kept-alive connections); phases alternate between the paths for `--rounds` rounds, so a noisy neighbour slows
 * each alike. The fleet runs once per queue driver of `--drivers` (each its own api + worker and
 * prefix). Prints commands/s per phase and each fleet's ratio to embedded, and the CPU time the
 * service's own processes spent per command (user + system, from /proc: `sbx serve`, or `sbx api` +
 * `sbx worker` + the Redis server, each also shown on its own; and the bench's own, the client), which a busy machine disturbs less
 * than it does throughput; for a fleet also the Redis commands per routed command under this load
 * (`INFO commandstats` around the phase, Lua scripts' commands included).
 *
 *   npx tsx bench/http-throughput.ts                        # needs the Docker engine and Redis (REDIS_URL)
 *   npx tsx bench/http-throughput.ts --sessions 24 --seconds 10 --rounds 3
 *   npx tsx bench/http-throughput.ts --drivers redis        # one fleet driver (default: bullmq,redis)
 *   npx tsx bench/http-throughput.ts --shell persistent     # in each session's persistent shell (default: fresh)
 *   npx tsx bench/http-throughput.ts --baseline /work/wt-base  # each path also from another checkout, side by side
 *   npx tsx bench/http-throughput.ts --profile /tmp/prof    # CPU profiles of each server process per phase
 *
 * `--shell fresh` (the default) starts a `bash -c` per command, so on a small machine the sandbox's
 * process starts bound the rate; `--shell persistent` runs each command in the session's long-lived
 * shell (what `/v1/tool-calls` and MCP use), where `echo` is a builtin and starts no process, so the
 * service's own path is what is measured.
 *
 * With `--baseline <checkout>`, every path also runs from that checkout's `bin/sbx.js` (its phases
 * alternate with this checkout's in each round), and the bench prints this checkout's rate and CPU per
 * command against the baseline's, path by path.
 *
 * With `--profile <dir>`, every `sbx serve`/`api`/`worker` the bench starts writes a V8 CPU profile
 * of each measured phase of its path to `<dir>` (bench/lib/cpu-profile-preload.mjs; the profiler
 * costs some throughput itself, so compare profiled runs with each other).
 */
import { existsSync, mkdirSync } from 'node:fs'
import http from 'node:http'
import { Redis } from 'ioredis'
import { join, resolve } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'
import { REDIS_URL } from './lib/routed-path.js'
import { removeScopeContainers, startSbxServer, startSbxWorker } from '../test/support/sbx-cli.js'
import type { ConfigInput } from '../src/config/schema.js'
import { percentile } from './lib/percentile.js'
import { cpuMs } from './lib/proc-cpu.js'

const { values: flags } = parseArgs({
  options: {
    sessions: { type: 'string', default: '24' },
    seconds: { type: 'string', default: '10' },
    rounds: { type: 'string', default: '3' },
    drivers: { type: 'string', default: 'bullmq,redis' },
    profile: { type: 'string' },
    shell: { type: 'string', default: 'fresh' },
    baseline: { type: 'string' },
  },
})
const drivers = flags.drivers.split(',').map((d) => {
  if (d !== 'bullmq' && d !== 'redis') throw new Error(`--drivers: bullmq or redis, not ${d}`)
  return d
})
if (flags.shell !== 'fresh' && flags.shell !== 'persistent')
  throw new Error(`--shell: fresh or persistent, not ${flags.shell}`)
const sessions = Math.max(1, Number(flags.sessions) || 24)
const seconds = Math.max(1, Number(flags.seconds) || 10)
const rounds = Math.max(1, Number(flags.rounds) || 3)

type Server = Awaited<ReturnType<typeof startSbxServer>>

const tag = `bthr${Date.now().toString(36)}`
/** Each checkout whose paths run: this one, and the baseline's (` [baseline]` after its paths' names). */
const checkouts: { suffix: string; sbx?: string }[] = [{ suffix: '' }]
if (flags.baseline !== undefined) {
  const sbx = join(resolve(flags.baseline), 'bin/sbx.js')
  if (!existsSync(sbx)) throw new Error(`--baseline: no ${sbx}; give a checkout of this repository`)
  checkouts.push({ suffix: ' [baseline]', sbx })
}
const profileDir = flags.profile === undefined ? undefined : resolve(flags.profile)
if (profileDir) mkdirSync(profileDir, { recursive: true })
const quiet: Record<string, string> = {
  LOG_LEVEL: 'warn',
  ...(profileDir
    ? {
        SBX_BENCH_PROFILE_DIR: profileDir,
        NODE_OPTIONS: `--import ${pathToFileURL(fileURLToPath(new URL('./lib/cpu-profile-preload.mjs', import.meta.url))).href}`,
      }
    : {}),
}
// Room for every session and their in-flight jobs: the bench measures the path, not the quotas.
const base: Partial<ConfigInput> = {
  quotas: {
    maxSandboxes: sessions + 8,
    maxConcurrentJobs: sessions * 4,
    requestsPerSecond: 100_000,
  },
} as Partial<ConfigInput>

/**
 * The load's client: `node:http` over kept-alive connections, one per session. It is part of what the
 * machine runs, so it is the leanest client Node has (undici's fetch builds web streams per call and
 * cost this client about as much CPU as the embedded service itself).
 */
const agent = new http.Agent({ keepAlive: true, maxSockets: sessions + 4 })

async function exec(server: Server, sessionId: string): Promise<void> {
  const body = JSON.stringify({
    provider: 'docker',
    profile: 'default',
    sessionId,
    command: 'echo hi',
    shell: flags.shell,
  })
  const text = await new Promise<string>((resolve, reject) => {
    const req = http.request(
      `${server.url}/v1/exec`,
      {
        method: 'POST',
        agent,
        headers: {
          authorization: `Bearer ${server.key}`,
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
        res.on('error', reject)
      },
    )
    req.on('error', reject)
    req.end(body)
  })
  const job = JSON.parse(text) as { state: string }
  if (job.state !== 'completed') throw new Error(`job ${job.state}: ${text}`)
}

/** Every session runs commands back to back for `ms`; returns commands/s and p50/p99 latency. */
async function phase(server: Server, prefix: string, ms: number) {
  const end = Date.now() + ms
  const latencies: number[] = []
  const start = performance.now()
  await Promise.all(
    Array.from({ length: sessions }, async (_, i) => {
      while (Date.now() < end) {
        const t = performance.now()
        await exec(server, `${prefix}${i}`)
        latencies.push(performance.now() - t)
      }
    }),
  )
  const elapsedS = (performance.now() - start) / 1000
  return {
    n: latencies.length,
    perS: latencies.length / elapsedS,
    p50: percentile(latencies, 50),
    p99: percentile(latencies, 99),
  }
}

/** The Redis server's pid, when it runs on this machine (its CPU counts to the fleet's). */
async function redisPid(): Promise<number | undefined> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await client.connect()
    const info = await client.info('server')
    const pid = Number(/process_id:(\d+)/.exec(info)?.[1])
    return pid > 0 && cpuMs(pid) > 0 ? pid : undefined
  } catch {
    return undefined
  } finally {
    client.disconnect()
  }
}

/** Commands the Redis server has run so far (`INFO commandstats`, those inside Lua scripts included). */
async function redisCalls(): Promise<number> {
  const client = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 1 })
  try {
    await client.connect()
    const stats = await client.info('commandstats')
    return [...stats.matchAll(/calls=(\d+)/g)].reduce((sum, m) => sum + Number(m[1]), 0)
  } catch {
    return NaN
  } finally {
    client.disconnect()
  }
}

const procs: { stop(): Promise<void> }[] = []
/** The label scope of each started path's sandboxes (removed at the end). */
const scopes: string[] = []
/** The processes serving each path (their profilers are toggled around its phases). */
const pids = new Map<string, number[]>()
const toggleProfilers = (name: string): void => {
  if (profileDir) for (const pid of pids.get(name) ?? []) process.kill(pid, 'SIGUSR2')
}
try {
  const paths: [string, Server][] = []
  for (const [k, { suffix, sbx }] of checkouts.entries()) {
    const scope = `${tag}${k}e`
    scopes.push(scope)
    const serve = await startSbxServer('serve', {
      config: { ...base, queue: { prefix: scope, concurrency: sessions } } as ConfigInput,
      env: quiet,
      ...(sbx ? { sbx } : {}),
    })
    procs.push(serve)
    const embeddedName = `HTTP → sbx serve (embedded)${suffix}`
    paths.push([embeddedName, serve])
    pids.set(embeddedName, [serve.child.child.pid ?? 0])
    for (const driver of drivers) {
      const fleetScope = `${tag}${k}${driver[0]}`
      scopes.push(fleetScope)
      const fleet = {
        ...base,
        queue: { driver, redisUrl: REDIS_URL, prefix: fleetScope, concurrency: sessions },
      } as ConfigInput
      const api = await startSbxServer('api', { config: fleet, env: quiet, ...(sbx ? { sbx } : {}) })
      procs.push(api)
      const worker = await startSbxWorker({ config: fleet, env: quiet, ...(sbx ? { sbx } : {}) })
      procs.push(worker)
      const name = `HTTP → sbx api + sbx worker (fleet, ${driver})${suffix}`
      paths.push([name, api])
      pids.set(name, [api.child.child.pid ?? 0, worker.child.pid ?? 0])
    }
  }
  // Warm: bind every session (sandbox created), then a short run to settle the processes.
  for (const [, server] of paths) {
    await Promise.all(Array.from({ length: sessions }, (_, i) => exec(server, `s${i}`)))
    await phase(server, 's', 2_000)
  }
  const redisServer = await redisPid()
  /** CPU ms so far of each process serving `name` (`sbx serve`; or `sbx api`, `sbx worker`, Redis). */
  const cpuOf = (name: string): number[] =>
    [...(pids.get(name) ?? []), ...(name.includes('fleet') && redisServer ? [redisServer] : [])].map(cpuMs)
  const sum = (xs: number[]): number => xs.reduce((a, b) => a + b, 0)
  const results = new Map<string, number[]>()
  const cpuPerCommand = new Map<string, number[]>()
  for (let r = 1; r <= rounds; r++) {
    for (const [name, server] of paths) {
      toggleProfilers(name)
      const cpu0 = cpuOf(name)
      const calls0 = name.includes('fleet') ? await redisCalls() : NaN
      const client0 = process.cpuUsage()
      const f = await phase(server, 's', seconds * 1000)
      const client = process.cpuUsage(client0)
      const clientPerCommand = (client.user + client.system) / 1000 / f.n
      const callsPerCommand = ((await redisCalls()) - calls0) / f.n
      const perProcess = cpuOf(name).map((ms, i) => (ms - (cpu0[i] ?? 0)) / f.n)
      const cpuPerCommandOfPhase = sum(perProcess)
      // Fleet: api + worker (+ Redis), each process's own share.
      const split = perProcess.length > 1 ? ` (${perProcess.map((ms) => ms.toFixed(2)).join(' + ')})` : ''
      toggleProfilers(name)
      ;(results.get(name) ?? results.set(name, []).get(name))?.push(f.perS)
      ;(cpuPerCommand.get(name) ?? cpuPerCommand.set(name, []).get(name))?.push(cpuPerCommandOfPhase)
      console.log(
        `round ${r}  ${name.padEnd(38)} ${f.perS.toFixed(0).padStart(5)} commands/s  p50 ${f.p50.toFixed(2)} ms  p99 ${f.p99.toFixed(2)} ms  service CPU ${cpuPerCommandOfPhase.toFixed(2)} ms/command${split}  client ${clientPerCommand.toFixed(2)}${Number.isNaN(callsPerCommand) ? '' : `  Redis ${callsPerCommand.toFixed(1)} commands/command`}`,
      )
    }
  }
  const perRound = (a: number[], b: number[]): string =>
    a.map((v, i) => (v / (b[i] ?? NaN)).toFixed(2)).join(', ')
  for (const { suffix } of checkouts) {
    const embedded = results.get(`HTTP → sbx serve (embedded)${suffix}`) ?? []
    for (const driver of drivers) {
      const fleet = results.get(`HTTP → sbx api + sbx worker (fleet, ${driver})${suffix}`) ?? []
      console.log(
        `${sessions} sessions, ${seconds} s per phase${suffix}: fleet (${driver})/embedded per round ${perRound(fleet, embedded)}`,
      )
    }
  }
  if (checkouts.length > 1)
    for (const [name] of paths.filter(([n]) => !n.endsWith(' [baseline]'))) {
      const mine = results.get(name) ?? []
      const theirs = results.get(`${name} [baseline]`) ?? []
      const cpu = (n: string) => cpuPerCommand.get(n) ?? []
      console.log(
        `${name}: this checkout/baseline commands/s per round ${perRound(mine, theirs)}; service CPU per command ${perRound(cpu(name), cpu(`${name} [baseline]`))}`,
      )
    }
} finally {
  for (const p of procs.reverse()) await p.stop()
  for (const scope of scopes) await removeScopeContainers(scope).catch(() => undefined)
}
