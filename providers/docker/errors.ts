import type Docker from 'dockerode'
import { constants } from 'node:os'
import { AppError } from '../../src/sandbox/index.js'
import { IDLE_EXIT_CODE } from './container-spec.js'
import type { ErrFrame } from './protocol.js'

/** The setup hint every "image/engine missing" message carries. */
export const SETUP_HINT = 'run `npm run setup` (scripts/setup.sh)'

const errnoNames = new Map<number, string>(Object.entries(constants.errno).map(([name, n]) => [n, name]))
const signalNames = new Map<number, string>(Object.entries(constants.signals).map(([name, n]) => [n, name]))

/** `ENOENT` for 2 (Linux numbering, the same inside the container). */
export function errnoName(errno: number): string {
  return errnoNames.get(errno) ?? `errno ${errno}`
}

/** `SIGKILL` for 9. */
export function signalName(signal: number): string {
  return signalNames.get(signal) ?? `SIG${signal}`
}

interface EngineErrorShape {
  statusCode?: number
  code?: string
  json?: { message?: string } | null
  message?: string
}

function shape(err: unknown): EngineErrorShape {
  return typeof err === 'object' && err !== null ? (err as EngineErrorShape) : {}
}

/** HTTP status of a dockerode error, if it has one. */
export function engineStatus(err: unknown): number | undefined {
  return shape(err).statusCode
}

function engineMessage(err: unknown): string {
  const e = shape(err)
  return e.json?.message ?? e.message ?? String(err)
}

const UNREACHABLE = new Set([
  'ECONNREFUSED',
  'ENOENT',
  'EACCES',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
])

/**
 * Translates an Engine API error at the provider edge. `what` names the operation for the message.
 * 404 and 409 on an existing sandbox mean it is gone or not running: `SANDBOX_LOST`.
 */
export function mapEngineError(err: unknown, what: string, sandboxId?: string): AppError {
  if (err instanceof AppError) return err
  const e = shape(err)
  if (e.code && UNREACHABLE.has(e.code)) {
    return new AppError(
      'UNAVAILABLE',
      `${what}: cannot reach the Docker engine (${e.code}); start it (${SETUP_HINT}) or set DOCKER_HOST`,
      { retryable: true, cause: err },
    )
  }
  if (sandboxId && (e.statusCode === 404 || e.statusCode === 409)) {
    return new AppError(
      'SANDBOX_LOST',
      `sandbox ${sandboxId} is gone or not running (${engineMessage(err)}); create a new sandbox`,
      { cause: err },
    )
  }
  const retryable = e.statusCode === undefined || e.statusCode >= 500
  return new AppError('INTERNAL', `${what} failed: ${engineMessage(err)}`, { retryable, cause: err })
}

/** `the Docker engine at unix:///var/run/docker.sock` (or `tcp://host:2376`): which engine an error is about. */
export function engineName(docker: Docker): string {
  const m =
    (
      docker as unknown as {
        modem?: { socketPath?: unknown; host?: string; port?: number | string; protocol?: string }
      }
    ).modem ?? {}
  // docker-modem's default socketPath is a function that finds the local socket.
  if (typeof m.socketPath === 'string') return `the Docker engine at unix://${m.socketPath}`
  if (m.host) return `the Docker engine at ${m.protocol ?? 'http'}://${m.host}${m.port ? `:${m.port}` : ''}`
  return `the Docker engine at ${process.env['DOCKER_HOST'] || 'unix:///var/run/docker.sock'}`
}

/** How to get `image` onto the engine: our own images are built here, any other is pulled or loaded. */
function howToGet(image: string): string {
  const repo = image.replace(/@.*$/, '').replace(/:[^/:]*$/, '')
  if (repo === 'sandbox-router/dev')
    return 'build it here with `sbx image build dev` (scripts/build-images.sh dev)'
  if (repo === 'sandbox-router/base') return `build it here with \`sbx image build\` (${SETUP_HINT})`
  return (
    `get it onto that engine with \`docker pull ${image}\` (from a registry it can reach) or ` +
    `\`docker load -i <file>.tar\` (from \`docker save\` elsewhere), or build it there; ` +
    'sandbox-router images are built with `sbx image build` (base) and `sbx image build dev`'
  )
}

/** Translates a failed container create: a missing image names the engine and how to get the image. */
export function mapCreateError(err: unknown, image: string, engine = 'the Docker engine'): AppError {
  if (engineStatus(err) === 404) {
    return new AppError('SANDBOX_CREATE_FAILED', `image ${image} is not on ${engine}; ${howToGet(image)}`, {
      cause: err,
    })
  }
  const mapped = mapEngineError(err, `creating a container from ${image}`)
  return new AppError('SANDBOX_CREATE_FAILED', mapped.message, { retryable: mapped.retryable, cause: err })
}

/** The agent volume a container mounts has no agent (it was removed, and the engine made an empty one). */
export class AgentVolumeEmptyError extends AppError {
  override readonly name = 'AgentVolumeEmptyError'
  constructor(volume: string, cause: unknown) {
    super(
      'SANDBOX_CREATE_FAILED',
      `the agent volume ${volume} has no sbx-agent (removed while the service ran, e.g. by docker volume prune?); ` +
        'the next create fills it again: retry',
      { retryable: true, cause },
    )
  }
}

/**
 * Translates a failed container start. The runtime's own text (`OCI runtime create failed: … stat
 * /usr/local/bin/sbx-agent: no such file or directory`) becomes what is wrong and how to fix it.
 * `volume`: the agent volume the container mounts, if any.
 */
export function mapStartError(err: unknown, image: string, agentPath: string, volume?: string): AppError {
  const message = engineMessage(err)
  const agentMissing =
    engineStatus(err) !== undefined && message.includes(agentPath) && /no such file|not found/i.test(message)
  if (agentMissing && volume) return new AgentVolumeEmptyError(volume, err)
  if (agentMissing) {
    return new AppError(
      'CONFIG_INVALID',
      `image ${image} has no ${agentPath}, and this service has no agent binary to bring into it; ` +
        `${SETUP_HINT} (it compiles .sbx/sbx-agent), set SBX_AGENT_BIN, or use an image built FROM sandbox-router/base`,
      { cause: err },
    )
  }
  if (engineStatus(err) !== undefined && /OCI runtime|runc/i.test(message)) {
    return new AppError(
      'SANDBOX_CREATE_FAILED',
      `the container runtime could not start a sandbox from ${image} (${message.replace(/^.*?: /, '').slice(0, 300)}); ` +
        "check that the image is a Linux image for this machine's architecture",
      { cause: err },
    )
  }
  return mapEngineError(err, `starting a sandbox from ${image}`)
}

/** What the agent names in `detail` when a path is not a regular file. */
const FILE_KINDS = new Set([
  'fifo',
  'socket',
  'character device',
  'block device',
  'directory',
  'special file',
])

/**
 * `exited, exit code 137` for a container that is not running; a sandbox that ended itself (the
 * agent's idle exit) says so, so the caller knows nothing killed it.
 */
export function stoppedState(status: string, exitCode: number): string {
  const why =
    status === 'exited' && exitCode === IDLE_EXIT_CODE
      ? ': it ended itself after nothing was attached for its idleTtlMs plus providers.docker.idleExitSlackMs'
      : ''
  return `${status}, exit code ${exitCode}${why}`
}

/** Translates an ERR frame of a file operation (`action` names it in the message). */
export function fileError(
  sandboxId: string,
  path: string,
  err: ErrFrame,
  action: 'read' | 'write' | 'use' = 'use',
): AppError {
  const name = errnoName(err.errno)
  const where = `${path} in sandbox ${sandboxId}`
  if (FILE_KINDS.has(err.detail)) {
    const article = err.detail === 'fifo' ? 'a FIFO (named pipe)' : `a ${err.detail}`
    return new AppError(
      'BAD_REQUEST',
      `cannot ${action} ${where}: it is ${article}, not a regular file (${name}); pass the path of a regular file`,
    )
  }
  switch (name) {
    case 'ENOENT':
      return new AppError('NOT_FOUND', `no such file: ${where} (${err.op}: ${name})`)
    case 'EROFS':
    case 'EACCES':
    case 'EPERM':
      return new AppError(
        'BAD_REQUEST',
        `cannot ${err.op} ${where}: ${name} (the root filesystem is read-only and commands run as a ` +
          `non-root user); use a path under the working directory or /tmp`,
      )
    case 'ENOSPC':
    case 'EDQUOT':
      return new AppError(
        'NO_SPACE',
        `sandbox ${sandboxId} is out of space (${name}); delete files, or raise the profile's diskMb (/workspace) or tmpMb (/tmp)`,
      )
    case 'EISDIR':
    case 'ENOTDIR':
    case 'EINVAL':
    case 'ENAMETOOLONG':
      return new AppError(
        'BAD_REQUEST',
        `cannot ${err.op} ${where}: ${name}; pass the path of a regular file`,
      )
    default:
      // Any other errno (EIO on /proc files, ELOOP, EFBIG…) comes from the path the caller chose
      // inside their own sandbox: a request error, not a service fault.
      return new AppError(
        'BAD_REQUEST',
        `cannot ${err.op} ${where}: ${name} ${err.detail}`.trim() + '; pass the path of a regular file',
      )
  }
}

/** Translates an ERR frame of a command the agent could not start. */
export function execError(sandboxId: string, err: ErrFrame): AppError {
  const name = errnoName(err.errno)
  switch (err.op) {
    case 'chdir':
      return new AppError(
        'BAD_REQUEST',
        `cannot use working directory ${err.detail} in sandbox ${sandboxId} (${name}); create it first or pass an existing cwd`,
      )
    case 'fork':
    case 'pipe':
    case 'limit':
      return new AppError(
        'QUOTA_EXCEEDED',
        `cannot start a process in sandbox ${sandboxId} (${err.op}: ${name}); its process limit is reached: ` +
          `wait for running commands, kill background processes, or raise the profile's pidsLimit`,
        { retryable: true },
      )
    case 'shell-busy':
      return new AppError(
        'CONFLICT',
        `another command runs in the persistent shell of sandbox ${sandboxId}; wait for it to end ` +
          `(calls through one handle queue for the shell), or run this one with shell: 'fresh'`,
        { retryable: true },
      )
    case 'stdin':
      if (name === 'ENOSPC')
        return new AppError(
          'NO_SPACE',
          `no room in /tmp of sandbox ${sandboxId} to hand stdin to the persistent shell (ENOSPC); ` +
            `delete files in /tmp, raise the profile's tmpMb, or run the call with shell: 'fresh'`,
        )
      return new AppError(
        'INTERNAL',
        `sandbox ${sandboxId}: could not hand stdin to the persistent shell through /tmp (${name}); ` +
          `run the call with shell: 'fresh'`,
      )
    case 'exec':
      if (name === 'E2BIG')
        return new AppError(
          'BAD_REQUEST',
          `the command and its environment are too large to start in sandbox ${sandboxId} (E2BIG: the ` +
            `kernel's limit on arguments and environment); send a long script as stdin or a file instead`,
        )
      if (err.detail.includes('persistent shell'))
        return new AppError(
          'CONFIG_INVALID',
          `sandbox ${sandboxId} has no /bin/bash (${name}), which persistent shells need; run the call ` +
            `with shell: 'fresh' (it uses /bin/sh) or use an image with bash`,
        )
      return new AppError(
        'CONFIG_INVALID',
        `sandbox ${sandboxId} has neither /bin/bash nor /bin/sh (${name}), which commands run with; use an image with a shell`,
      )
    default:
      return new AppError('INTERNAL', `sandbox ${sandboxId} agent error (${err.op}: ${name} ${err.detail})`)
  }
}
