/**
 * Fork of a session with a 100 MB workspace, to the fork's first command, against creating a new
 * sandbox and copying the same files in through the file API — both through the HTTP API of a
 * `sbx serve` started as a child process, alternating round by round in one process.
 *
 *   fork:  POST /v1/sessions/{src}/fork {count}, then `ls | wc -l` in each new session
 *   copy:  POST /v1/sessions, PUT /v1/sessions/{id}/files × 100 (1 MiB each), then `ls | wc -l`
 *
 * BENCH_ROUNDS (default 5) rounds; BENCH_FORK_MB (default 100) the workspace size.
 *
 *   npx tsx bench/fork.ts        # needs the Docker engine
 */
import { randomBytes } from 'node:crypto'
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { startSbxServer } from '../test/support/sbx-cli.js'
import type { SbxServer } from '../test/support/sbx-cli.js'
import { percentile } from './lib/percentile.js'

const rounds = Math.min(Math.max(Number(process.env.BENCH_ROUNDS ?? 5) || 5, 1), 50)
const mb = Math.min(Math.max(Number(process.env.BENCH_FORK_MB ?? 100) || 100, 1), 1000)
const run = promisify(execFile)
const scope = `bfork${Date.now().toString(36)}`

async function ok(res: Response, status: number): Promise<unknown> {
  const text = await res.text()
  if (res.status !== status) throw new Error(`HTTP ${res.status} (wanted ${status}): ${text}`)
  return text ? (JSON.parse(text) as unknown) : undefined
}

async function exec(srv: SbxServer, sessionId: string, profile: string, command: string): Promise<string> {
  const job = (await ok(
    await srv.post('/v1/exec', { provider: 'docker', profile, sessionId, command, timeoutMs: 300_000 }),
    200,
  )) as { state: string; result?: { stdout: string; exitCode: number } }
  if (job.state !== 'completed' || job.result?.exitCode !== 0) throw new Error(JSON.stringify(job))
  return job.result.stdout
}

const srv = await startSbxServer('serve', {
  config: {
    queue: { prefix: scope },
    quotas: { requestsPerSecond: 10_000, maxSandboxes: 64 },
    profiles: {
      pws: { provider: 'docker', diskMb: 2048, workspace: { persistent: true } },
      plain: { provider: 'docker', diskMb: 2048 },
    },
  },
  env: { LOG_LEVEL: 'warn' },
})
const files = Array.from({ length: mb }, () => randomBytes(1024 * 1024))
const samples: Record<string, number[]> = { fork1: [], fork3: [], copy: [] }
try {
  // The source: 100 files of 1 MiB of random bytes (incompressible) in its workspace.
  await exec(
    srv,
    'src',
    'pws',
    `mkdir -p /workspace/d && for i in $(seq ${mb}); do head -c 1048576 /dev/urandom > /workspace/d/f$i; done; du -sm /workspace`,
  )
  const count = async (id: string, profile: string) => {
    const n = (await exec(srv, id, profile, 'ls /workspace/d | wc -l')).trim()
    if (n !== String(mb)) throw new Error(`session ${id} holds ${n} files, not ${mb}`)
  }
  const fork = async (n: number): Promise<number> => {
    const t = performance.now()
    const { sessions } = (await ok(await srv.post('/v1/sessions/src/fork', { count: n }), 201)) as {
      sessions: { id: string }[]
    }
    await Promise.all(sessions.map((s) => count(s.id, 'pws')))
    const ms = performance.now() - t
    for (const s of sessions) await ok(await srv.fetch(`/v1/sessions/${s.id}`, { method: 'DELETE' }), 200)
    return ms
  }
  const copy = async (): Promise<number> => {
    const t = performance.now()
    const { id } = (await ok(await srv.post('/v1/sessions', { profile: 'plain' }), 201)) as { id: string }
    for (const [i, data] of files.entries())
      await ok(
        await srv.fetch(`/v1/sessions/${id}/files?path=/workspace/d/f${i + 1}`, {
          method: 'PUT',
          body: data,
        }),
        200,
      )
    await count(id, 'plain')
    const ms = performance.now() - t
    await ok(await srv.fetch(`/v1/sessions/${id}`, { method: 'DELETE' }), 200)
    return ms
  }
  for (let r = 0; r < rounds; r++) {
    samples['fork1']?.push(await fork(1))
    samples['copy']?.push(await copy())
    samples['fork3']?.push(await fork(3))
  }
  const p50 = (k: string) => percentile(samples[k] ?? [], 50)
  console.log(`workspace ${mb} MiB, ${rounds} rounds, ms to the first command (all of them for 3 forks)`)
  const rows: [string, string][] = [
    ['copy: new sandbox + file API upload (baseline)', 'copy'],
    ['fork count 1', 'fork1'],
    ['fork count 3 (all three answered)', 'fork3'],
  ]
  for (const [label, k] of rows) {
    const s = samples[k] ?? []
    console.log(
      `${label.padEnd(48)} p50 ${p50(k).toFixed(0).padStart(6)}  min ${Math.min(...s)
        .toFixed(0)
        .padStart(6)}  max ${Math.max(...s)
        .toFixed(0)
        .padStart(6)}  ratio ${(p50(k) / p50('copy')).toFixed(2)}`,
    )
  }
} finally {
  await srv.stop()
  // An embedded serve removes its sandboxes, workspaces and snapshots on stop; belt and braces:
  const { stdout } = await run('docker', [
    'volume',
    'ls',
    '-q',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
  ])
  const left = stdout.split('\n').filter(Boolean)
  if (left.length) await run('docker', ['volume', 'rm', '-f', ...left]).catch(() => undefined)
}
