import { existsSync } from 'node:fs'
import { dirname, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { createDaytonaProvider } from '../../providers/daytona/index.js'
import { createE2BProvider } from '../../providers/e2b/index.js'
import type { Config } from '../config/index.js'
import { AppError } from '../errors.js'
import type { SandboxProvider } from '../sandbox/types.js'

type Env = Readonly<Record<string, string | undefined>>

/** The value of `name` in `env`, or undefined when unset or empty. */
const read = (env: Env, name: string): string | undefined => {
  const v = env[name]
  return v === undefined || v === '' ? undefined : v
}

/**
 * Whether a remote provider is on: explicitly by `enabled`, else when its key variable is set.
 * Explicitly enabled without a key is a config error naming the variable.
 */
function apiKeyOf(
  id: string,
  section: { enabled?: boolean; apiKeyEnv: string } | undefined,
  fallbackEnv: string,
  env: Env,
): string | undefined {
  const keyEnv = section?.apiKeyEnv ?? fallbackEnv
  const key = read(env, keyEnv)
  const enabled = section?.enabled ?? key !== undefined
  if (!enabled) return undefined
  if (key === undefined) {
    throw new AppError(
      'CONFIG_INVALID',
      `providers.${id} is enabled but ${keyEnv} is not set; export ${keyEnv}=<your ${id} API key> ` +
        `(or set providers.${id}.enabled: false)`,
    )
  }
  return key
}

/**
 * The remote providers the config and environment turn on: Daytona (`DAYTONA_API_KEY`, URL from
 * `providers.daytona.apiUrl` or `DAYTONA_API_URL`) and E2B (`E2B_API_KEY`, URLs from
 * `providers.e2b.*` or `E2B_API_URL` / `E2B_SANDBOX_URL` / `E2B_DOMAIN`). Keys are read from the
 * environment only, never from the config file, and never logged.
 */
export function createRemoteProviders(providers: Config['providers'], env: Env): SandboxProvider[] {
  const out: SandboxProvider[] = []
  const daytonaKey = apiKeyOf('daytona', providers.daytona, 'DAYTONA_API_KEY', env)
  if (daytonaKey !== undefined) {
    const d = providers.daytona
    const daytonaAgent = d?.agentBinaryPath ?? builtAgent()
    const apiUrl = d?.apiUrl ?? read(env, 'DAYTONA_API_URL')
    const target = d?.target ?? read(env, 'DAYTONA_TARGET')
    out.push(
      createDaytonaProvider({
        apiKey: daytonaKey,
        ...(apiUrl ? { apiUrl } : {}),
        ...(target ? { target } : {}),
        ...(d?.autoStopMinutes === undefined ? {} : { autoStopMinutes: d.autoStopMinutes }),
        ...(d?.defaultSnapshot === undefined ? {} : { defaultSnapshot: d.defaultSnapshot }),
        ...(d?.autoDeleteMinutes === undefined ? {} : { autoDeleteMinutes: d.autoDeleteMinutes }),
        ...(d?.ttlMinutes === undefined ? {} : { ttlMinutes: d.ttlMinutes }),
        ...(d?.stateCheckIdleMs === undefined ? {} : { stateCheckIdleMs: d.stateCheckIdleMs }),
        ...(daytonaAgent ? { agentBinaryPath: daytonaAgent } : {}),
      }),
    )
  }
  const e2bKey = apiKeyOf('e2b', providers.e2b, 'E2B_API_KEY', env)
  if (e2bKey !== undefined) {
    const e = providers.e2b
    const apiUrl = e?.apiUrl ?? read(env, 'E2B_API_URL')
    const sandboxUrl = e?.sandboxUrl ?? read(env, 'E2B_SANDBOX_URL')
    const domain = e?.domain ?? read(env, 'E2B_DOMAIN')
    const previewUrl = e?.previewUrl ?? read(env, 'SBX_E2B_PREVIEW_URL')
    const agentBinaryPath = e?.agentBinaryPath ?? builtAgent()
    out.push(
      createE2BProvider({
        apiKey: e2bKey,
        ...(agentBinaryPath ? { agentBinaryPath } : {}),
        ...(apiUrl ? { apiUrl } : {}),
        ...(sandboxUrl ? { sandboxUrl } : {}),
        ...(domain ? { domain } : {}),
        ...(previewUrl ? { previewUrl } : {}),
      }),
    )
  }
  return out
}

/** The agent binary scripts/setup.sh builds in this checkout (`.sbx/sbx-agent`), when it is there. */
function builtAgent(): string | undefined {
  const here = dirname(fileURLToPath(import.meta.url))
  // src/runtime (sources through tsx) or dist/src/runtime (the build).
  return [
    resolve(here, '..', '..', '.sbx', 'sbx-agent'),
    resolve(here, '..', '..', '..', '.sbx', 'sbx-agent'),
  ].find((p) => existsSync(p))
}
