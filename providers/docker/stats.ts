/**
 * A container's CPU and memory use from the engine's stats (`GET /containers/{id}/stats`, one
 * reading: the engine takes two samples a second apart, so the CPU share is over that second).
 */
import type Docker from 'dockerode'
import { AppError, type SandboxRef, type SandboxStats } from '../../src/sandbox/index.js'
import { engineStatus, mapEngineError } from './errors.js'

/** The fields of the engine's stats answer read here (cgroup v1 and v2). */
interface EngineStats {
  cpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number; online_cpus?: number }
  precpu_stats?: { cpu_usage?: { total_usage?: number }; system_cpu_usage?: number }
  memory_stats?: { usage?: number; limit?: number; stats?: Record<string, number | undefined> }
}

/** The figures of {@link SandboxStats} out of the engine's answer; `nanoCpus` is the container's CPU limit. */
export function statsOf(raw: EngineStats, nanoCpus: number): SandboxStats {
  const cpu = raw.cpu_stats ?? {}
  const pre = raw.precpu_stats ?? {}
  const online = cpu.online_cpus ?? 1
  const cpuDelta = (cpu.cpu_usage?.total_usage ?? 0) - (pre.cpu_usage?.total_usage ?? 0)
  const systemDelta = (cpu.system_cpu_usage ?? 0) - (pre.system_cpu_usage ?? 0)
  const cpuCount = nanoCpus > 0 ? Math.max(1, Math.ceil(nanoCpus / 1e9)) : online
  // The share of the host's CPUs, then of the sandbox's own (as E2B reports it: of its vCPUs).
  const hostPct = systemDelta > 0 && cpuDelta > 0 ? (cpuDelta / systemDelta) * online * 100 : 0
  const cpuUsedPct = Math.min(100, hostPct / cpuCount)
  const mem = raw.memory_stats ?? {}
  const s = mem.stats ?? {}
  // As `docker stats`: reclaimable file pages do not count as used (v1: total_inactive_file; v2: inactive_file).
  const inactive = s.total_inactive_file ?? s.inactive_file ?? 0
  const usage = mem.usage ?? 0
  return {
    cpuUsedPct: Math.round(cpuUsedPct * 100) / 100,
    cpuCount,
    memUsedBytes: Math.max(0, usage - inactive),
    memTotalBytes: mem.limit ?? 0,
    memCacheBytes: s.total_cache ?? s.cache ?? s.file ?? 0,
  }
}

/** The engine's stats of the sandbox's container; `NOT_FOUND` when it is gone, `CONFLICT` when not running. */
export async function containerStats(docker: Docker, ref: SandboxRef): Promise<SandboxStats> {
  const c = docker.getContainer(ref.id)
  try {
    const info = await c.inspect()
    if (!info.State.Running || info.State.Paused)
      throw new AppError('CONFLICT', `sandbox ${ref.id} is not running (${info.State.Status}): no figures`)
    const raw = (await c.stats({ stream: false })) as EngineStats
    return statsOf(raw, info.HostConfig.NanoCpus ?? 0)
  } catch (err) {
    if (err instanceof AppError) throw err
    if (engineStatus(err) === 404)
      throw new AppError('NOT_FOUND', `sandbox ${ref.id} is gone`, { cause: err })
    throw mapEngineError(err, `reading the stats of sandbox ${ref.id}`)
  }
}
