import { readFileSync } from 'node:fs'

/**
 * CPU time (user + system, ms) the process `pid` has used so far, from `/proc/<pid>/stat`; 0 when
 * /proc cannot tell (not Linux, or the process is gone).
 */
export function cpuMs(pid: number): number {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.split(' ') ?? []
    // utime and stime, in clock ticks (100 per second on Linux).
    return ((Number(fields[11]) || 0) + (Number(fields[12]) || 0)) * 10
  } catch {
    return 0
  }
}
