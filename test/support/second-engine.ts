/*
 * A second Docker engine beside the machine's own, for multi-engine tests (issue 17): its own socket,
 * data root, exec root, pid file and containerd namespace, its own network namespace, no bridge and
 * no iptables rules, so it never touches the main engine's containers or network. Started once (as root) and reused while it
 * runs; the base image is copied in with `docker save | docker load`. Only this engine may ever be
 * killed by a test: never the main engine at /var/run/docker.sock.
 */
import { execFile, spawn } from 'node:child_process'
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'
import { setTimeout as sleep } from 'node:timers/promises'
import { promisify } from 'node:util'

const run = promisify(execFile)

/** Where the second engine lives; fixed so every test (and a rerun) reuses one engine. */
export const SECOND_ENGINE = {
  socket: '/run/sbx-test-engine-2.sock',
  host: 'unix:///run/sbx-test-engine-2.sock',
  dataRoot: '/var/lib/docker-2',
  execRoot: '/run/docker-2',
  pidFile: '/run/docker-2.pid',
  configFile: '/run/docker-2.json',
  logFile: '/var/log/sbx-test-engine-2.log',
} as const

/** The main engine: tests never stop or kill it. */
export const MAIN_ENGINE_HOST = 'unix:///var/run/docker.sock'

/** A running second engine. */
export interface SecondEngine {
  /** `DOCKER_HOST` value for processes that should reach it. */
  readonly host: string
  /** The engine's own ID (`docker info`). */
  readonly engineId: string
  /** The dockerd's pid. */
  readonly pid: number
}

/** `docker -H <host> …`. */
export async function dockerAt(host: string, args: readonly string[], timeoutMs = 120_000) {
  return run('docker', ['-H', host, ...args], { timeout: timeoutMs, maxBuffer: 256 * 1024 * 1024 })
}

/** The engine ID of the engine at `host` (throws when it does not answer). */
export async function engineIdAt(host: string): Promise<string> {
  const { stdout } = await dockerAt(host, ['info', '--format', '{{.ID}}'], 10_000)
  return stdout.trim()
}

/**
 * The pid of the running second engine's dockerd, from its pid file: undefined when the pid is dead, a
 * zombie, or (pids wrap at 32768 on this machine) now some other process's.
 */
function pidOf(): number | undefined {
  try {
    const pid = Number(readFileSync(SECOND_ENGINE.pidFile, 'utf8').trim())
    if (!Number.isInteger(pid) || pid <= 0) return undefined
    process.kill(pid, 0)
    return isZombie(pid) || !isSecondDockerd(pid) ? undefined : pid
  } catch {
    return undefined
  }
}

function isSecondDockerd(pid: number): boolean {
  try {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8')
    return cmdline.includes('dockerd') && cmdline.includes(SECOND_ENGINE.socket)
  } catch {
    return false
  }
}

function isZombie(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]?.startsWith('Z') ?? false
  } catch {
    return true
  }
}

/** The last lines of the engine's log, for an error a CI log shows in full. */
function logTail(lines = 15): string {
  try {
    return readFileSync(SECOND_ENGINE.logFile, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return '(no log)'
  }
}

async function answers(): Promise<boolean> {
  return engineIdAt(SECOND_ENGINE.host).then(
    () => true,
    () => false,
  )
}

/** Spawns the second engine's dockerd and resolves once it answers; throws with the end of its log when it exits or hangs. */
async function launch(): Promise<void> {
  const log = openSync(SECOND_ENGINE.logFile, 'a')
  // In a network namespace of its own: a dockerd started with `--bridge none` deletes the host's
  // `docker0` (it tidies the default bridge away), which would cut the main engine's bridge
  // networks. Its sandboxes have no network anyway; its API is a unix socket.
  const child = spawn(
    'unshare',
    [
      '--net',
      'dockerd',
      '--host',
      SECOND_ENGINE.host,
      '--data-root',
      SECOND_ENGINE.dataRoot,
      '--exec-root',
      SECOND_ENGINE.execRoot,
      '--pidfile',
      SECOND_ENGINE.pidFile,
      '--config-file',
      SECOND_ENGINE.configFile,
      '--containerd-namespace',
      'sbx-engine-2',
      '--containerd-plugins-namespace',
      'sbx-engine-2-plugins',
      '--bridge',
      'none',
      '--iptables=false',
      '--ip-masq=false',
    ],
    { detached: true, stdio: ['ignore', log, log] },
  )
  child.unref()
  closeSync(log)
  const deadline = performance.now() + 60_000
  while (!(await answers())) {
    if (child.exitCode !== null)
      throw new Error(
        `dockerd of the second engine exited (${child.exitCode}); the end of ${SECOND_ENGINE.logFile}:\n${logTail()}`,
      )
    if (performance.now() > deadline)
      throw new Error(
        `the second engine did not answer within 60 s; the end of ${SECOND_ENGINE.logFile}:\n${logTail()}`,
      )
    await sleep(100)
  }
}

/**
 * Starts the second engine unless it runs already (idempotent), waits until it answers, and loads
 * `images` into it from the main engine when it lacks them.
 */
export async function startSecondEngine(
  images: readonly string[] = ['sandbox-router/base:latest'],
): Promise<SecondEngine> {
  if (process.getuid?.() !== 0) throw new Error('the second test engine needs root (dockerd)')
  if (!(pidOf() !== undefined && (await answers()))) {
    for (const dir of [SECOND_ENGINE.dataRoot, SECOND_ENGINE.execRoot]) mkdirSync(dir, { recursive: true })
    // A killed dockerd leaves its pid file, and dockerd refuses to start while the pid in it shows
    // in /proc — which a killed one whose parent is gone does, as a zombie nobody reaps, when the
    // machine's pid 1 is not an init. Its pid is dead, a zombie or another process's here (pidOf): the file
    // is stale.
    if (pidOf() === undefined) rmSync(SECOND_ENGINE.pidFile, { force: true })
    // The main engine's runtimes (gVisor's runsc, when set up), so runsc profiles work there too.
    let runtimes: unknown
    try {
      runtimes =
        (JSON.parse(readFileSync('/etc/docker/daemon.json', 'utf8')) as { runtimes?: unknown }).runtimes ?? {}
    } catch {
      runtimes = {}
    }
    // Its own trust key: the engine ID (`docker info`) comes from it, and must differ from the main one's.
    writeFileSync(
      SECOND_ENGINE.configFile,
      JSON.stringify({ runtimes, 'deprecated-key-path': `${SECOND_ENGINE.dataRoot}/key.json` }),
    )
    // One retry when the first start fails: the error of the first is printed, not hidden.
    try {
      await launch()
    } catch (err) {
      console.warn(`[second-engine] the first start failed, starting again: ${(err as Error).message}`)
      if (pidOf() === undefined) rmSync(SECOND_ENGINE.pidFile, { force: true })
      await launch()
    }
  }
  for (const image of images) {
    const has = await dockerAt(SECOND_ENGINE.host, ['image', 'inspect', image], 10_000).then(
      () => true,
      () => false,
    )
    if (!has)
      await run('bash', [
        '-o',
        'pipefail',
        '-c',
        `docker save ${image} | docker -H ${SECOND_ENGINE.host} load`,
      ])
  }
  const pid = pidOf()
  if (pid === undefined) throw new Error(`no pid in ${SECOND_ENGINE.pidFile}`)
  return { host: SECOND_ENGINE.host, engineId: await engineIdAt(SECOND_ENGINE.host), pid }
}

/**
 * SIGKILLs the second engine's dockerd (only ever that one: the pid from its own pid file, checked to
 * be a dockerd serving the second socket) and resolves once it is gone.
 */
export async function killSecondEngine(): Promise<void> {
  // pidOf checked it is a dockerd serving the second socket: never another process.
  const pid = pidOf()
  if (pid === undefined) return
  process.kill(pid, 'SIGKILL')
  const deadline = performance.now() + 30_000
  while (pidOf() === pid) {
    if (performance.now() > deadline) throw new Error(`dockerd ${pid} did not die within 30 s`)
    await sleep(20)
  }
}

/** Removes the containers, volumes and images of one scope (`sandbox-router.scope` label) from the engine at `host`. */
export async function removeScopeAt(host: string, scope: string): Promise<void> {
  const { stdout } = await dockerAt(host, [
    'ps',
    '-aq',
    '--filter',
    `label=sandbox-router.scope=${scope}`,
  ]).catch(() => ({ stdout: '' }))
  const ids = stdout.split('\n').filter(Boolean)
  if (ids.length) await dockerAt(host, ['rm', '-f', ...ids]).catch(() => undefined)
  // Workspace and snapshot volumes, and snapshot and session images, carry the scope label too.
  const list = async (args: string[]) =>
    (await dockerAt(host, args).catch(() => ({ stdout: '' }))).stdout.split('\n').filter(Boolean)
  const volumes = await list(['volume', 'ls', '-q', '--filter', `label=sandbox-router.scope=${scope}`])
  if (volumes.length) await dockerAt(host, ['volume', 'rm', '-f', ...volumes]).catch(() => undefined)
  const images = await list(['images', '-q', '--filter', `label=sandbox-router.scope=${scope}`])
  if (images.length) await dockerAt(host, ['rmi', '-f', ...new Set(images)]).catch(() => undefined)
}
