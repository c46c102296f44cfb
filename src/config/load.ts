import { existsSync, readFileSync } from 'node:fs'
import { dirname, extname, resolve } from 'node:path'
import { parse as parseYaml } from 'yaml'
import type { ZodError } from 'zod'
import { AppError } from '../errors.js'
import type { ResolvedProfile } from '../sandbox/profiles.js'
import { DEV_PROFILE, E2B_PROFILE, resolveProfile } from '../sandbox/profiles.js'
import type { Config } from './schema.js'
import { ConfigSchema } from './schema.js'

/** File names looked up in the working directory when no file is given. */
export const CONFIG_FILES = [
  'sandbox-router.config.json',
  'sandbox-router.config.yaml',
  'sandbox-router.config.yml',
]

/** A loaded configuration: the parsed config, its resolved profiles and where it came from. */
export interface LoadedConfig {
  readonly config: Config
  /** Every profile with defaults filled in (always includes `default`). */
  readonly profiles: ReadonlyMap<string, ResolvedProfile>
  /** The file read, or `undefined` for the built-in defaults. */
  readonly file?: string
}

/** Options of {@link loadConfig}. */
export interface LoadConfigOptions {
  /** Explicit file; else env `SBX_CONFIG`, else the first of {@link CONFIG_FILES} in `cwd`. */
  file?: string
  cwd?: string
  /** Environment for overrides (`REDIS_URL`, `DOCKER_HOST`, `PORT`, `SBX_CONFIG`). @default process.env */
  env?: Readonly<Record<string, string | undefined>>
}

/** Renders zod issues as `at "<path>": <message>` lines. */
export function formatZodIssues(error: ZodError): string {
  return error.issues.map((i) => `at "${i.path.map(String).join('.') || '(root)'}": ${i.message}`).join('; ')
}

/**
 * Reads, validates and resolves the configuration once. Errors are `AppError('CONFIG_INVALID')`
 * naming the file, the path and what was expected.
 */
export function loadConfig(opts: LoadConfigOptions = {}): LoadedConfig {
  const env = opts.env ?? process.env
  const cwd = opts.cwd ?? process.cwd()
  const file = findFile(opts.file ?? env['SBX_CONFIG'], cwd)
  const raw = file ? readConfigFile(file) : {}
  const withEnv = applyEnv(raw, env)
  const parsed = ConfigSchema.safeParse(withEnv)
  const where = file ?? 'built-in defaults'
  if (!parsed.success) {
    throw new AppError('CONFIG_INVALID', `${where}: ${formatZodIssues(parsed.error)}`, {
      cause: parsed.error,
    })
  }
  const config = parsed.data
  if (file)
    config.extensions = config.extensions.map((s) => (s.startsWith('.') ? resolve(dirname(file), s) : s))
  const tls = config.server.tls
  if (tls) {
    const base = file ? dirname(file) : cwd
    config.server.tls = { certFile: resolve(base, tls.certFile), keyFile: resolve(base, tls.keyFile) }
  }
  const profiles = new Map<string, ResolvedProfile>()
  if (!config.profiles['default']) profiles.set('default', resolveProfile('default', { provider: 'docker' }))
  if (!config.profiles['dev']) profiles.set('dev', resolveProfile('dev', DEV_PROFILE))
  if (!config.profiles['e2b']) profiles.set('e2b', resolveProfile('e2b', E2B_PROFILE))
  for (const [name, p] of Object.entries(config.profiles)) profiles.set(name, { ...p, name })
  checkShellRouting(config, profiles, where)
  checkCodeRouting(config, profiles, where)
  return { config, profiles, ...(file ? { file } : {}) }
}

const SHELL_TOOL_NAMES = new Set(['bash', 'shell', 'sh'])

/**
 * `routing.code` names a profile of its provider (or a routing policy), and no shell tool: a
 * shell call routed as a code cell would run its command line as Python.
 */
function checkCodeRouting(
  config: Config,
  profiles: ReadonlyMap<string, ResolvedProfile>,
  where: string,
): void {
  const code = config.routing.code
  if (!code) return
  const fail = (message: string): never => {
    throw new AppError('CONFIG_INVALID', `${where}: at "routing.code": ${message}`)
  }
  const shellTool = code.tools?.find((t) => SHELL_TOOL_NAMES.has(t))
  if (shellTool !== undefined)
    fail(
      `tools names the shell tool "${shellTool}", which routing.shell routes; list only code tools (python, run_code, …)`,
    )
  checkRouteTarget(config, profiles, 'code', code, fail, ' (the built-in "dev" has python3 and node)')
}

/** `routing.shell` names a profile of its provider (or a routing policy), like `routing.code`. */
function checkShellRouting(
  config: Config,
  profiles: ReadonlyMap<string, ResolvedProfile>,
  where: string,
): void {
  checkRouteTarget(config, profiles, 'shell', config.routing.shell, (message: string): never => {
    throw new AppError('CONFIG_INVALID', `${where}: at "routing.shell": ${message}`)
  })
}

function checkRouteTarget(
  config: Config,
  profiles: ReadonlyMap<string, ResolvedProfile>,
  key: 'shell' | 'code',
  target: { providerId: string; profile: string },
  fail: (message: string) => never,
  hint = '',
): void {
  if (config.routing.policies[target.providerId]) return
  const profile = profiles.get(target.profile)
  if (!profile)
    fail(
      `profile "${target.profile}" is not defined; known profiles: ${[...profiles.keys()].join(', ')}${hint}`,
    )
  else if (profile.provider !== target.providerId)
    fail(
      `profile "${target.profile}" belongs to provider "${profile.provider}", not "${target.providerId}"; set routing.${key}.providerId to "${profile.provider}" or pick a profile of "${target.providerId}"`,
    )
}

function findFile(explicit: string | undefined, cwd: string): string | undefined {
  if (explicit) {
    const path = resolve(cwd, explicit)
    if (!existsSync(path)) {
      throw new AppError(
        'CONFIG_INVALID',
        `config file ${path} does not exist; fix the path or remove --config/SBX_CONFIG`,
      )
    }
    return path
  }
  return CONFIG_FILES.map((f) => resolve(cwd, f)).find((p) => existsSync(p))
}

function readConfigFile(file: string): unknown {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new AppError('CONFIG_INVALID', `${file}: cannot read it: ${(err as Error).message}`, { cause: err })
  }
  const ext = extname(file).toLowerCase()
  try {
    if (ext === '.yaml' || ext === '.yml') return parseYaml(text) ?? {}
    if (ext === '.json') return JSON.parse(text)
  } catch (err) {
    throw new AppError(
      'CONFIG_INVALID',
      `${file}: not valid ${ext.slice(1).toUpperCase()}: ${(err as Error).message}`,
      {
        cause: err,
      },
    )
  }
  throw new AppError(
    'CONFIG_INVALID',
    `${file}: unsupported config format "${ext}"; use .json, .yaml or .yml`,
  )
}

/**
 * Env overrides: REDIS_URL (switches the queue to the `redis` driver unless the file sets a driver), DOCKER_HOST,
 * PORT, SBX_FLEET_SECRET (fleet.secret), SBX_GATEWAY_URL (fleet.gateway.advertiseUrl).
 */
function applyEnv(raw: unknown, env: Readonly<Record<string, string | undefined>>): unknown {
  if (!raw || typeof raw !== 'object' || Array.isArray(raw)) return raw
  // Copies only what it changes: a deep clone overflows the stack on deeply nested input.
  const out = { ...raw } as Record<string, Record<string, unknown> | undefined>
  const section = (k: string): Record<string, unknown> => {
    const v = out[k]
    if (v && typeof v === 'object' && !Array.isArray(v)) return (out[k] = { ...v })
    const fresh: Record<string, unknown> = {}
    out[k] = fresh
    return fresh
  }
  if (env['REDIS_URL']) {
    const q = section('queue')
    q['redisUrl'] = env['REDIS_URL']
    q['driver'] ??= 'redis'
  }
  if (env['DOCKER_HOST']) {
    const p = section('providers')
    const docker = (p['docker'] ?? {}) as Record<string, unknown>
    p['docker'] = { ...docker, host: env['DOCKER_HOST'] }
  }
  if (env['SBX_FLEET_SECRET']) section('fleet')['secret'] = env['SBX_FLEET_SECRET']
  if (env['SBX_GATEWAY_URL']) {
    const fleet = section('fleet')
    const gateway = (fleet['gateway'] ?? {}) as Record<string, unknown>
    fleet['gateway'] = { ...gateway, advertiseUrl: env['SBX_GATEWAY_URL'] }
  }
  const port = env['PORT']
  if (port !== undefined && port !== '') section('server')['port'] = Number(port)
  return out
}
