import { removeScopeContainers, startSbxServer } from './sbx-cli.js'
import type { ChildLine, LineChild } from './sbx-cli.js'
import type { ConfigInput } from '../../src/config/schema.js'

/** One API key the service accepts (passed to the child through an environment variable). */
export interface LiveKey {
  readonly key: string
  readonly tenant: string
  readonly admin?: boolean
}

/** The address of a running service. */
export interface LiveServer {
  readonly url: string
  readonly port: number
}

/** The real `sbx serve` (or `sbx api`), started as a user starts it, as a child process. */
export interface LiveService {
  readonly server: LiveServer
  /** The child process (its output lines: stderr for the CLI, stdout for pino JSON logs). */
  readonly child: LineChild
  /** SIGTERM (the service drains and destroys its sandboxes), then removes what is left of its scope. */
  close(): Promise<void>
}

/**
 * Starts `node bin/sbx.js serve` (in-process queue unless `config.queue` says bullmq) on a free port
 * of 127.0.0.1, with a config file written from `config` whose `queue.prefix` is `prefix` and whose
 * `apiKeys` are `keys` (each read from an environment variable, so no key sits in the file). `env` is
 * added to the child's environment; `onLogLine` receives every pino line at `logLevel`.
 */
export async function startLiveService(opts: {
  keys: LiveKey[]
  prefix: string
  config?: ConfigInput
  env?: Readonly<Record<string, string>>
  /** @default 'warn' */
  logLevel?: string
  /** Every line the service writes on stdout (its pino JSON log). */
  onLogLine?: (line: string) => void
  /** `api` for a fleet API process (workers started separately). @default 'serve' */
  command?: 'serve' | 'api'
}): Promise<LiveService> {
  const keyEnv: Record<string, string> = {}
  const apiKeys = opts.keys.map((k, i) => {
    keyEnv[`SBX_LIVE_KEY_${i}`] = k.key
    return { keyEnv: `SBX_LIVE_KEY_${i}`, tenant: k.tenant, admin: k.admin ?? false }
  })
  const config: ConfigInput = {
    ...(opts.config ?? {}),
    apiKeys,
    queue: { ...(opts.config?.queue ?? {}), prefix: opts.prefix },
  } as ConfigInput
  const srv = await startSbxServer(opts.command ?? 'serve', {
    config,
    env: { ...keyEnv, ...(opts.env ?? {}), LOG_LEVEL: opts.logLevel ?? 'warn' },
  })
  const onLine = opts.onLogLine
  if (onLine) {
    for (const l of srv.child.lines) if (l.stream === 'stdout') onLine(l.text)
    srv.child.onLine((l: ChildLine) => {
      if (l.stream === 'stdout') onLine(l.text)
    })
  }
  const port = Number(new URL(srv.url).port)
  return {
    server: { url: srv.url, port },
    child: srv.child,
    async close() {
      await srv.stop(30_000)
      await removeScopeContainers(opts.prefix)
    },
  }
}
