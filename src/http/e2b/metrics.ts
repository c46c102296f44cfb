/**
 * E2B's sandbox metrics (`GET /sandboxes/{id}/metrics?start=&end=`, the SDK's `getMetrics`): CPU and
 * memory from the provider's own figures (Docker: the engine's stats of the container), disk from
 * `df` of the sandbox's writable filesystems (its working directory and `/tmp`) run in it. A
 * figure is sampled when asked, at most one per {@link SAMPLE_EVERY_MS} per running sandbox, and
 * every sample is kept for the sandbox's life, so a later request over a time range gets the ones
 * taken in it. A paused sandbox is not sampled (nothing runs), as E2B collects none then.
 */
import type { Context } from 'hono'
import type { App } from '../app.js'
import { principalOf } from './control-plane.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError, e2bErrorResponse } from './errors.js'
import { runHelper as runShort } from './sandbox-helper.js'
import type { E2BSandbox, E2BSandboxStore } from './sandboxes.js'

/** The shortest time between two samples of one sandbox (ms): E2B collects every 5 s. */
export const SAMPLE_EVERY_MS = 5_000
/** Samples kept per sandbox (a day at one per {@link SAMPLE_EVERY_MS}). */
const MAX_SAMPLES = 17_280

/** One metric entry as E2B answers it (`SandboxMetric`). */
interface Sample {
  timestamp: string
  timestampUnix: number
  cpuCount: number
  cpuUsedPct: number
  memUsed: number
  memTotal: number
  memCache: number
  diskUsed: number
  diskTotal: number
}

/** `start` / `end` (Unix seconds) of the query; 400 naming the field when not one. */
function seconds(c: Context, name: 'start' | 'end'): number | undefined {
  const raw = c.req.query(name)
  if (raw === undefined || raw === '') return undefined
  const n = Number(raw)
  if (!Number.isInteger(n) || n < 0)
    throw new E2BApiError(
      400,
      `${name} must be a Unix time in whole seconds (e.g. ${Math.floor(Date.now() / 1000)})`,
    )
  return n
}

/** Bytes used and in total on the sandbox's writable filesystems, each counted once (`df -P -k`). */
async function diskOf(deps: E2BRouteDeps, s: E2BSandbox): Promise<{ used: number; total: number }> {
  const r = await runShort(deps, s, 'df -P -k "$@"', [...new Set([s.cwd, '/tmp'])])
  if (r.exitCode !== 0) throw new E2BApiError(500, `df in sandbox ${s.sandboxId} failed: ${r.stderr.trim()}`)
  const seen = new Set<string>()
  let used = 0
  let total = 0
  for (const line of r.stdout.trim().split('\n').slice(1)) {
    const f = line.trim().split(/\s+/)
    const mount = f[5] ?? ''
    if (f.length < 6 || seen.has(mount)) continue
    seen.add(mount)
    total += Number(f[1]) * 1024
    used += Number(f[2]) * 1024
  }
  return { used, total }
}

/** Registers `GET /sandboxes/{id}/metrics`; samples live as long as the sandbox's record. */
export function registerMetrics(app: App, deps: E2BRouteDeps, store: E2BSandboxStore): void {
  const samples = new Map<string, Sample[]>()
  /** Takes a sample of a running sandbox now; undefined while it holds no figures. */
  const sample = async (s: E2BSandbox): Promise<Sample | undefined> => {
    const statsOf = deps.e2b.sandboxStats
    if (!statsOf) return undefined
    const at = Date.now()
    // The disk first: it binds a sandbox to a session that has none yet (E2B's is up from create).
    const disk = await diskOf(deps, s)
    const stats = await statsOf(s.tenant, s.sandboxId)
    if (!stats) return undefined
    return {
      timestamp: new Date(at).toISOString(),
      timestampUnix: Math.floor(at / 1000),
      cpuCount: stats.cpuCount,
      cpuUsedPct: stats.cpuUsedPct,
      memUsed: stats.memUsedBytes,
      memTotal: stats.memTotalBytes,
      memCache: stats.memCacheBytes,
      diskUsed: disk.used,
      diskTotal: disk.total,
    }
  }
  const forget = async () => {
    for (const id of samples.keys()) if (await store.gone(id)) samples.delete(id)
  }

  for (const prefix of ['/sandboxes/:id', '/v2/sandboxes/:id'])
    app.get(`${prefix}/metrics`, async (c) => {
      try {
        const p = await principalOf(c, deps)
        const id = c.req.param('id') ?? ''
        const s = await store.get(p.tenant, id)
        if (!s) throw new E2BApiError(404, `sandbox "${id}" doesn't exist or you don't have access to it`)
        if (!deps.e2b.sandboxStats)
          throw new E2BApiError(
            501,
            `metrics are not available here: provider '${s.provider}' (profile '${s.profile}') has no figures, or this server does not hold the sandboxes (sbx api)`,
          )
        const start = seconds(c, 'start')
        const end = seconds(c, 'end')
        if (start !== undefined && end !== undefined && start > end)
          throw new E2BApiError(400, 'start must not be after end')
        const list = samples.get(id) ?? []
        const last = list.at(-1)
        // Sample only when the range reaches now: a range in the past is answered from what was kept.
        const nowS = Math.floor(Date.now() / 1000)
        const reachesNow = end === undefined || end >= nowS - SAMPLE_EVERY_MS / 1000
        if (
          !s.paused &&
          reachesNow &&
          (!last || Date.now() - Date.parse(last.timestamp) >= SAMPLE_EVERY_MS)
        ) {
          const fresh = await sample(s)
          if (fresh) {
            if (!samples.has(id)) await forget()
            list.push(fresh)
            if (list.length > MAX_SAMPLES) list.shift()
            samples.set(id, list)
          }
        }
        return c.json(
          list.filter(
            (m) =>
              (start === undefined || m.timestampUnix >= start) &&
              (end === undefined || m.timestampUnix <= end),
          ),
        )
      } catch (err) {
        return e2bErrorResponse(err)
      }
    })
}
