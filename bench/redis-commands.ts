/**
 * What one routed command costs Redis in fleet mode: a redis-server of its own (free port, so no other
 * traffic is counted), `sbx api` and one `sbx worker` as child processes, one warm session, and
 * `--iterations` sequential `POST /v1/exec` (`echo hi`, wait for the result), for each queue driver
 * (`--driver bullmq|redis`; both by default, one after the other, each with its own processes and
 * prefix on the same redis-server). Prints, per routed command and driver:
 *
 * - commands by `INFO commandstats` (every command Redis ran, those inside Lua scripts included),
 *   before/after the timed loop, with the idle background (heartbeats, stalled checks, blocking waits)
 *   measured over the same wall time and shown beside it;
 * - round trips from the service: the API and the worker reach Redis through a counting TCP proxy in
 *   this process, and every read the proxy gets from a client socket is one round trip (a pipeline
 *   or MULTI sent in one write is one);
 * - the top commands by count, and p50/p99 latency of the HTTP call.
 *
 *   npx tsx bench/redis-commands.ts                     # needs the Docker engine and redis-server
 *   npx tsx bench/redis-commands.ts --iterations 500
 *   npx tsx bench/redis-commands.ts --driver redis      # one driver only
 *   npx tsx bench/redis-commands.ts --trace             # also prints a MONITOR trace of one routed command
 */
import { once } from 'node:events'
import { createConnection, createServer } from 'node:net'
import type { Socket } from 'node:net'
import { parseArgs } from 'node:util'
import { RedisServer, commandCalls, freePort, redisCommand } from '../test/support/redis-server.js'
import {
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const { values: flags } = parseArgs({
  options: {
    iterations: { type: 'string', default: '300' },
    trace: { type: 'boolean', default: false },
    driver: { type: 'string' },
  },
})
const iterations = Math.max(20, Number(flags.iterations) || 300)
type Driver = 'bullmq' | 'redis'
const drivers: Driver[] =
  flags.driver === undefined
    ? ['bullmq', 'redis']
    : flags.driver === 'bullmq' || flags.driver === 'redis'
      ? [flags.driver]
      : (() => {
          throw new Error(`--driver must be bullmq or redis, not ${flags.driver}`)
        })()

/** A TCP proxy in front of Redis that counts client writes (round trips) of every connection through it. */
async function countingProxy(target: number): Promise<{
  port: number
  trips: () => number
  close: () => Promise<void>
}> {
  let trips = 0
  const sockets = new Set<Socket>()
  const server = createServer((client) => {
    const upstream = createConnection({ host: '127.0.0.1', port: target, noDelay: true })
    client.setNoDelay(true)
    sockets.add(client).add(upstream)
    client.on('data', (d) => {
      trips++
      upstream.write(d)
    })
    upstream.on('data', (d) => client.write(d))
    const end = (): void => {
      client.destroy()
      upstream.destroy()
      sockets.delete(client)
      sockets.delete(upstream)
    }
    client.on('close', end).on('error', end)
    upstream.on('close', end).on('error', end)
  })
  const port = await freePort()
  server.listen(port, '127.0.0.1')
  await once(server, 'listening')
  return {
    port,
    trips: () => trips,
    close: async () => {
      for (const s of sockets) s.destroy()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}

const diff = (a: Map<string, number>, b: Map<string, number>): Map<string, number> => {
  const out = new Map<string, number>()
  for (const [k, v] of b) if (v - (a.get(k) ?? 0) > 0) out.set(k, v - (a.get(k) ?? 0))
  return out
}
const total = (m: Map<string, number>): number => [...m.values()].reduce((s, v) => s + v, 0)

const redis = await RedisServer.start()
// The fixture fsyncs every write; latency here is about the Redis path, not this machine's disk.
await redisCommand(redis.port, 'CONFIG SET appendfsync everysec')
const proxy = await countingProxy(redis.port)

/** One driver's fleet (api + worker) on the shared redis-server, with a prefix of its own. */
async function startFleet(driver: Driver) {
  const prefix = uniqueName('rcmd')
  const config = fleetConfig(prefix, {
    queue: { driver, redisUrl: `redis://127.0.0.1:${proxy.port}`, prefix },
    quotas: { requestsPerSecond: 100_000, maxConcurrentJobs: 1_000 },
  } as never)
  const api = await startSbxServer('api', { config })
  const worker = await startSbxWorker({ config })
  const exec = async (): Promise<void> => {
    const res = await api.post('/v1/exec', {
      provider: 'docker',
      profile: 'default',
      sessionId,
      command: 'echo hi',
    })
    const job = (await res.json()) as { state?: string; result?: { stdout?: string } }
    if (res.status !== 200 || job.state !== 'completed')
      throw new Error(`exec: ${res.status} ${JSON.stringify(job)}`)
  }
  const stop = async (): Promise<void> => {
    await api.fetch(`/v1/sessions/${sessionId}`, { method: 'DELETE' }).catch(() => undefined)
    await worker.stop()
    await api.stop()
    await removeScopeContainers(prefix)
  }
  return { exec, stop }
}
const sessionId = 'rc-warm'

/** Prints what MONITOR sees during one routed command (commands inside scripts marked `lua`). */
async function traceOne(exec: () => Promise<void>): Promise<void> {
  const mon = createConnection({ host: '127.0.0.1', port: redis.port })
  const lines: string[] = []
  let buf = ''
  mon.on('data', (d: Buffer) => {
    buf += d.toString('utf8')
    let nl: number
    while ((nl = buf.indexOf('\r\n')) >= 0) {
      lines.push(buf.slice(0, nl))
      buf = buf.slice(nl + 2)
    }
  })
  mon.write('MONITOR\r\n')
  await new Promise((resolve) => setTimeout(resolve, 200))
  await exec()
  await new Promise((resolve) => setTimeout(resolve, 200))
  mon.destroy()
  for (const l of lines.slice(1)) console.log(l.replace(/^\+\d+\.\d+ /, '').slice(0, 200))
}

/** Measures one driver: the timed loop, then an idle window of the same wall time. */
async function measure(driver: Driver): Promise<{ row: string; idleRow: string; top: string[] }> {
  const fleet = await startFleet(driver)
  try {
    for (let i = 0; i < 20; i++) await fleet.exec() // the session's sandbox is created and warm
    if (flags.trace) {
      console.log(`\n# MONITOR trace of one routed command, driver ${driver}`)
      await traceOne(fleet.exec)
    }
    const latencies: number[] = []
    const before = await commandCalls(redis.port)
    const trips0 = proxy.trips()
    const t0 = performance.now()
    for (let i = 0; i < iterations; i++) {
      const t = performance.now()
      await fleet.exec()
      latencies.push(performance.now() - t)
    }
    const wall = performance.now() - t0
    const after = await commandCalls(redis.port)
    const trips = proxy.trips() - trips0
    const idleBefore = await commandCalls(redis.port)
    const idleTrips0 = proxy.trips()
    await new Promise((resolve) => setTimeout(resolve, wall)) // idle window: nothing routed
    const idle = diff(idleBefore, await commandCalls(redis.port))
    const idleTrips = proxy.trips() - idleTrips0
    const used = diff(before, after)
    return {
      row: `| ${driver} | ${(total(used) / iterations).toFixed(1)} | ${(trips / iterations).toFixed(1)} | ${percentile(latencies, 50).toFixed(2)} | ${percentile(latencies, 99).toFixed(2)} | ${(wall / 1000).toFixed(1)} s |`,
      idleRow: `| ${driver}: idle background, same wall time | ${(total(idle) / iterations).toFixed(1)} | ${(idleTrips / iterations).toFixed(1)} | | | |`,
      top: [...used]
        .sort((a, b) => b[1] - a[1])
        .slice(0, 25)
        .map(([k, v]) => `  ${k.padEnd(20)} ${(v / iterations).toFixed(2)}`),
    }
  } finally {
    await fleet.stop()
  }
}

try {
  const results = []
  for (const driver of drivers) results.push({ driver, ...(await measure(driver)) })
  console.log(`\n# sbx api + 1 sbx worker, own redis-server, warm session, ${iterations} × echo hi`)
  console.log(
    '| per routed command (driver) | commands (commandstats) | round trips (api + worker) | p50 ms | p99 ms | loop |',
  )
  console.log('|---|---:|---:|---:|---:|---:|')
  for (const r of results) console.log(r.row)
  for (const r of results) console.log(r.idleRow)
  for (const r of results) {
    console.log(`\ntop commands per routed command (${r.driver}):`)
    for (const line of r.top) console.log(line)
  }
} finally {
  await proxy.close()
  await redis.destroy()
}
