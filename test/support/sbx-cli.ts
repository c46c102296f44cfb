/*
 * The service as a user starts it: `node bin/sbx.js serve|api|worker …` as child processes, each with
 * a config file of its own in a temporary directory (the process's cwd), talked to only over HTTP and
 * its output lines. Tests wait on lines and answers, never on sleeps.
 */
import { execFile } from 'node:child_process'
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import type { ConfigInput } from '../../src/config/schema.js'
import { LineChild, SBX } from './redis-child.js'
import { freePort } from './redis-server.js'
import { FLEET_DRIVER } from './redis.js'

export { LineChild, SBX }
export type { ChildLine } from './redis-child.js'

const run = promisify(execFile)

/** The machine's shared Redis (every test keeps to a `queue.prefix` of its own). */
export const SHARED_REDIS = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'

/** A fresh name for one test's keys and containers: `<tag>-<8 hex>` (a valid `queue.prefix`). */
export function uniqueName(tag: string): string {
  return `${tag}-${randomUUID().slice(0, 8)}`
}

/** A directory holding `sandbox-router.config.json` written from `config`. */
export function configDir(config: ConfigInput): string {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-cli-'))
  writeFileSync(join(dir, 'sandbox-router.config.json'), JSON.stringify(config, null, 2))
  return dir
}

/** A running `sbx serve` or `sbx api`: its URL, the key it was started with, and a fetch that sends it. */
export interface SbxServer {
  readonly child: LineChild
  readonly url: string
  readonly key: string
  /** `fetch(url + path)` with `Authorization: Bearer <key>` (unless `init.headers` sets one). */
  fetch(path: string, init?: RequestInit & { key?: string }): Promise<Response>
  /** POST `body` as JSON. */
  post(path: string, body: unknown, init?: RequestInit & { key?: string }): Promise<Response>
  stop(graceMs?: number): Promise<void>
  kill(): Promise<void>
}

/** Options of {@link startSbxServer} and {@link startSbxWorker}. */
export interface SbxProcessOptions {
  /** The config file's content; `queue.prefix` should be unique to the test. */
  readonly config: ConfigInput
  /** Extra environment (e.g. `SBX_API_KEY`, model keys). */
  readonly env?: Record<string, string>
  /** Extra CLI arguments. */
  readonly args?: readonly string[]
  /** Directory to run in (holds the config file). @default a new one from {@link configDir} */
  readonly cwd?: string
  /** How long to wait for the ready line. @default 120 000 ms */
  readonly readyTimeoutMs?: number
  /** The `bin/sbx.js` to run (another checkout's, for a side-by-side bench). @default this checkout's */
  readonly sbx?: string
}

/**
 * Starts `node bin/sbx.js serve` (or `api`) on a free loopback port and resolves once it printed
 * `listening on`. The key is `SBX_API_KEY` from `opts.env`, else a fresh one passed that way (the
 * embedded default key of tenant `default`, admin), unless the config names `apiKeys`.
 */
export async function startSbxServer(
  command: 'serve' | 'api',
  opts: SbxProcessOptions & { port?: number },
): Promise<SbxServer> {
  const port = opts.port ?? (await freePort())
  const key = opts.env?.['SBX_API_KEY'] ?? `sbx_test_${randomUUID().replace(/-/g, '')}`
  const cwd = opts.cwd ?? configDir(opts.config)
  const child = LineChild.spawn(
    `sbx ${command}`,
    [opts.sbx ?? SBX, command, '--host', '127.0.0.1', '--port', String(port), ...(opts.args ?? [])],
    { SBX_API_KEY: key, ...(opts.env ?? {}) },
    cwd,
  )
  await readyOrKilled(
    child,
    child.next(
      (l) => l.stream === 'stderr' && l.text.includes('listening on'),
      opts.readyTimeoutMs ?? 120_000,
    ),
  )
  const url = `http://127.0.0.1:${port}`
  const doFetch = (path: string, init: RequestInit & { key?: string } = {}): Promise<Response> => {
    const headers = new Headers(init.headers)
    if (!headers.has('authorization')) headers.set('authorization', `Bearer ${init.key ?? key}`)
    return fetch(url + path, { ...init, headers })
  }
  return {
    child,
    url,
    key,
    fetch: doFetch,
    post: (path, body, init = {}) => {
      const headers = new Headers(init.headers)
      headers.set('content-type', 'application/json')
      return doFetch(path, { ...init, method: 'POST', headers, body: JSON.stringify(body) })
    },
    stop: (graceMs) => child.stop(graceMs),
    kill: () => child.kill(),
  }
}

/** Starts `node bin/sbx.js worker` (`--agent` in `opts.args` for an agent-run worker) and resolves once it is consuming. */
export async function startSbxWorker(opts: SbxProcessOptions): Promise<LineChild> {
  const cwd = opts.cwd ?? configDir(opts.config)
  const child = LineChild.spawn('sbx worker', [opts.sbx ?? SBX, 'worker', ...(opts.args ?? [])], opts.env ?? {}, cwd)
  await readyOrKilled(
    child,
    child.next((l) => l.stream === 'stderr' && /consuming/.test(l.text), opts.readyTimeoutMs ?? 120_000),
  )
  return child
}

/** Waits for `ready`; a child that never got there is killed (not left running past the test), then the error is thrown. */
async function readyOrKilled(child: LineChild, ready: Promise<unknown>): Promise<void> {
  try {
    await ready
  } catch (err) {
    await child.kill().catch(() => undefined)
    throw err
  }
}

/** Runs `node bin/sbx.js <args>` to its end: exit code, stdout and stderr. */
export async function runSbx(
  args: readonly string[],
  opts: { cwd?: string; env?: Record<string, string>; timeoutMs?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [SBX, ...args], {
      cwd: opts.cwd ?? process.cwd(),
      env: { ...process.env, NO_COLOR: '1', ...(opts.env ?? {}) },
      timeout: opts.timeoutMs ?? 120_000,
      maxBuffer: 64 * 1024 * 1024,
    })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code?: number | string; stdout?: string; stderr?: string }
    return { code: typeof e.code === 'number' ? e.code : 1, stdout: e.stdout ?? '', stderr: e.stderr ?? '' }
  }
}

/**
 * Removes every container of one test's scope (the `sandbox-router.scope` label, which is the
 * config's `queue.prefix`) and returns how many were left to remove.
 */
export async function removeScopeContainers(scope: string): Promise<number> {
  const { stdout } = await run('docker', ['ps', '-aq', '--filter', `label=sandbox-router.scope=${scope}`])
  const ids = stdout.split('\n').filter(Boolean)
  if (ids.length) await run('docker', ['rm', '-f', ...ids]).catch(() => undefined)
  return ids.length
}

/**
 * Removes what one test left of its scope: its containers (as {@link removeScopeContainers}) and its
 * keys on the shared Redis (`<scope>:*`, the config's `queue.prefix`).
 */
export async function removeScope(scope: string, redisUrl: string = SHARED_REDIS): Promise<void> {
  await removeScopeContainers(scope)
  const redis = new Redis(redisUrl)
  try {
    let cursor = '0'
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${scope}:*`, 'COUNT', 500)
      cursor = next
      if (keys.length > 0) await redis.del(...keys)
    } while (cursor !== '0')
  } finally {
    redis.disconnect()
  }
}

/** Running containers of one test's scope. */
export async function scopeContainers(scope: string, all = false): Promise<string[]> {
  const { stdout } = await run('docker', [
    'ps',
    ...(all ? ['-a'] : []),
    '-q',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
  ])
  return stdout.split('\n').filter(Boolean)
}

/** A fleet config on the shared Redis with its own prefix (queue driver {@link FLEET_DRIVER} unless `extra` sets one). */
export function fleetConfig(prefix: string, extra: Partial<ConfigInput> = {}): ConfigInput {
  return {
    ...extra,
    queue: { driver: FLEET_DRIVER, redisUrl: SHARED_REDIS, prefix, ...(extra.queue ?? {}) },
  } as ConfigInput
}
