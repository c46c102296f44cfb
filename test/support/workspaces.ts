/*
 * Shared steps of the persistent-workspace and snapshot e2e tests: commands through `/v1/exec`,
 * and what the engine holds of a scope (volumes, snapshot images), asked of the docker CLI.
 */
import { execFile } from 'node:child_process'
import { promisify } from 'node:util'
import { expect } from 'vitest'
import type { SbxServer } from './sbx-cli.js'

const run = promisify(execFile)

/** The persistent-workspace profile the tests configure. */
export const PWS = 'pws'

/** A job's result as the tests read it. */
export interface ExecJob {
  state: string
  result?: {
    stdout: string
    exitCode: number | null
    sandboxId: string
    sandboxReplaced?: { filesLost: boolean; workspaceKept?: boolean; previousSandboxId: string }
  }
  error?: { code: string; message: string }
}

/** Runs `command` in session `sessionId` of profile {@link PWS} (or `profile`), waiting for its end. */
export async function execIn(
  srv: SbxServer,
  sessionId: string,
  command: string,
  opts: { key?: string; profile?: string } = {},
): Promise<ExecJob> {
  const res = await srv.post(
    '/v1/exec',
    { provider: 'docker', profile: opts.profile ?? PWS, sessionId, command },
    opts.key ? { key: opts.key } : {},
  )
  expect(res.status, await res.clone().text()).toBe(200)
  const job = (await res.json()) as ExecJob
  expect(job.state, JSON.stringify(job)).toBe('completed')
  return job
}

/** Names of the engine's volumes of a scope (by the label the service puts on them). */
export async function scopeVolumes(scope: string): Promise<string[]> {
  const { stdout } = await run('docker', [
    'volume',
    'ls',
    '-q',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
  ])
  return stdout.split('\n').filter(Boolean)
}

/** Snapshot and session images made from a scope's containers. */
export async function scopeImages(scope: string): Promise<string[]> {
  const { stdout } = await run('docker', ['images', '-q', '--filter', `label=sandbox-router.scope=${scope}`])
  return stdout.split('\n').filter(Boolean)
}

/** Removes what a test left of its scope on the engine: volumes and images (containers first). */
export async function removeScopeData(scope: string): Promise<void> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=sandbox-router.scope=${scope}`])
  const ids = stdout.split('\n').filter(Boolean)
  if (ids.length) await run('docker', ['rm', '-f', ...ids]).catch(() => undefined)
  const vols = await scopeVolumes(scope)
  if (vols.length) await run('docker', ['volume', 'rm', '-f', ...vols]).catch(() => undefined)
  const imgs = await scopeImages(scope)
  if (imgs.length) await run('docker', ['rmi', '-f', ...new Set(imgs)]).catch(() => undefined)
}

/** The running container of a sandbox id, checked to be of the scope. */
export async function containerOf(scope: string, sandboxId: string): Promise<string> {
  const { stdout } = await run('docker', [
    'ps',
    '-q',
    '--no-trunc',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
  ])
  const id = stdout.split('\n').find((c) => c === sandboxId)
  if (!id) throw new Error(`no running container ${sandboxId} in scope ${scope}`)
  return id
}

/** `docker <args>`. */
export async function docker(...args: string[]): Promise<string> {
  return (await run('docker', args)).stdout
}
