import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { loadConfig } from '../../src/config/load.js'
import type { ConfigInput } from '../../src/config/schema.js'
import type { KeyEntry } from '../../src/http/keyring.js'
import { createLogger } from '../../src/logger.js'
import type { Logger } from '../../src/logger.js'
import { createRuntime } from '../../src/runtime/create-runtime.js'
import type { Runtime } from '../../src/runtime/create-runtime.js'
import { startServer } from '../../src/runtime/serve.js'
import type { RunningServer } from '../../src/runtime/serve.js'

/** A really listening service over an embedded runtime (in-process queue, real Docker provider). */
export interface LiveService {
  readonly runtime: Runtime
  readonly server: RunningServer
  /** Stops the server, then drains and closes the runtime (its sandboxes are destroyed). */
  close(): Promise<void>
}

/**
 * Starts the service the way `sbx serve` does, on a free port of 127.0.0.1, with a config file
 * written from `config` (built-in defaults when absent), silent logs unless a `logger` is given, and a
 * Redis key `prefix` of its own.
 */
export async function startLiveService(opts: {
  keys: KeyEntry[]
  prefix: string
  config?: ConfigInput
  env?: Readonly<Record<string, string>>
  /** The service's logger (e.g. `createLogger({ destination })` to capture its lines). @default silent */
  logger?: Logger
}): Promise<LiveService> {
  const dir = mkdtempSync(join(tmpdir(), 'sbx-live-'))
  if (opts.config) writeFileSync(join(dir, 'sandbox-router.config.json'), JSON.stringify(opts.config))
  const runtime = await createRuntime(loadConfig({ cwd: dir, env: {} }), {
    prefix: opts.prefix,
    logger: opts.logger ?? createLogger({ level: 'silent' }),
    ...(opts.env ? { env: opts.env } : {}),
  })
  const server = await startServer(runtime, { port: 0, host: '127.0.0.1', keys: opts.keys })
  return {
    runtime,
    server,
    async close() {
      await server.close()
      await runtime.close({ deadlineMs: 5_000 })
    },
  }
}
