import { posix } from 'node:path'
import { AppError } from '../errors.js'
import type { ExecRequest } from './types.js'

/** An exec request checked and with its defaults applied: what a provider hands to its transport. */
export interface ResolvedExec {
  command: string
  /** Absolute. */
  cwd: string
  env: Record<string, string>
  stdin: Uint8Array
  timeoutMs: number
  outputCapBytes: number
}

/** The rules of one provider for {@link resolveExecRequest}. */
export interface ExecRequestRules {
  /** The sandbox's working directory; a relative request cwd resolves against it. */
  cwd: string
  /** Largest command line the provider carries (bytes). */
  maxCommandBytes: number
  /** Whether an env variable name is acceptable. @default non-empty, without '=' or NUL */
  envName?: (name: string) => boolean
  /** How the accepted names are described in the error. @default "names are non-empty without '=' or NUL" */
  envRule?: string
  /** The provider's name in errors (e.g. when it has no persistent shell). */
  providerName?: string
  /** Whether the provider takes `shell: 'persistent'` (then env names must be shell identifiers). @default false */
  persistentShell?: boolean
}

const anyName = (name: string): boolean => /^[^=\0]+$/.test(name)

/**
 * Checks an exec request the way every remote provider must before sending it (persistent shell only where the provider has one, positive timeout,
 * cap ≥ 0, no NUL bytes, command size, env names) and fills in the defaults: cwd resolved against
 * the sandbox's, env `{}`, stdin as bytes. Errors are `BAD_REQUEST` / `PAYLOAD_TOO_LARGE` that say
 * what to change.
 */
export function resolveExecRequest(request: ExecRequest, rules: ExecRequestRules): ResolvedExec {
  if (request.shell === 'persistent' && !rules.persistentShell) {
    throw new AppError(
      'BAD_REQUEST',
      `${rules.providerName ?? 'this provider'} has no persistent shells yet; run the command with shell: 'fresh' ` +
        "(or set the profile's shell to 'fresh')",
    )
  }
  if (!(request.timeoutMs > 0) || !(request.outputCapBytes >= 0)) {
    throw new AppError('BAD_REQUEST', 'exec needs timeoutMs > 0 and outputCapBytes >= 0')
  }
  if (request.command.includes('\0') || request.cwd?.includes('\0')) {
    throw new AppError('BAD_REQUEST', 'command and cwd must not contain NUL bytes')
  }
  const commandBytes = Buffer.byteLength(request.command)
  if (commandBytes > rules.maxCommandBytes) {
    throw new AppError(
      'PAYLOAD_TOO_LARGE',
      `command of ${commandBytes} bytes exceeds ${rules.maxCommandBytes}; ` +
        'write the script with writeFile and run the file instead',
    )
  }
  const envName = rules.envName ?? anyName
  for (const [key, value] of Object.entries(request.env ?? {})) {
    if (request.shell === 'persistent' && !/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) {
      throw new AppError(
        'BAD_REQUEST',
        `invalid env variable ${JSON.stringify(key)} for a persistent shell, which exports it: use letters, digits and '_', not starting with a digit (or run with shell: 'fresh')`,
      )
    }
    if (!envName(key) || value.includes('\0')) {
      throw new AppError(
        'BAD_REQUEST',
        `invalid env variable ${JSON.stringify(key)}: ${rules.envRule ?? "names are non-empty without '=' or NUL"}, values without NUL`,
      )
    }
  }
  return {
    command: request.command,
    cwd: request.cwd ? posix.resolve(rules.cwd, request.cwd) : rules.cwd,
    env: request.env ?? {},
    stdin:
      typeof request.stdin === 'string'
        ? Buffer.from(request.stdin, 'utf8')
        : (request.stdin ?? new Uint8Array()),
    timeoutMs: request.timeoutMs,
    outputCapBytes: request.outputCapBytes,
  }
}

/** A file path of a sandbox operation, resolved against its cwd; empty or NUL-bearing paths are `BAD_REQUEST`. */
export function resolveSandboxPath(cwd: string, path: string): string {
  if (!path || path.includes('\0')) {
    throw new AppError('BAD_REQUEST', 'a file path must be non-empty without NUL bytes')
  }
  return posix.resolve(cwd, path)
}
