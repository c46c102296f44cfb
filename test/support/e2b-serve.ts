/*
 * One `node bin/sbx.js serve` for a suite that drives its E2B-compatible endpoint with the real SDKs
 * (`e2b`, `@e2b/code-interpreter`): a scope of its own (the config's `queue.prefix`), and the SDK's
 * connection settings (E2B_API_URL, E2B_SANDBOX_URL, E2B_API_KEY) pointed at it until the suite ends.
 * Not test/support/e2b-endpoint.ts, which is a stand-in for E2B's cloud that our E2B provider talks to.
 */
import type { ConfigInput } from '../../src/config/schema.js'
import { saveEnv } from './saved-env.js'
import { type SbxServer, removeScope, startSbxServer, uniqueName } from './sbx-cli.js'

/** The connection options of the E2B SDK (`Sandbox.create(template, { ...conn })`), all at one server. */
export interface E2BConnection {
  readonly apiUrl: string
  readonly sandboxUrl: string
  readonly apiKey: string
}

/** The E2B SDK's environment variables that {@link E2BServe.start} sets and {@link E2BServe.stop} restores. */
const E2B_ENV = ['E2B_API_URL', 'E2B_SANDBOX_URL', 'E2B_API_KEY'] as const

/** Options of {@link E2BServe.start}. */
export interface E2BServeOptions {
  /** The config file's content; its `queue.prefix` is the suite's {@link E2BServe.scope}. */
  readonly config?: Omit<ConfigInput, 'queue'> & {
    readonly queue?: Omit<NonNullable<ConfigInput['queue']>, 'prefix'>
  }
  /** Extra environment of the server (e.g. `SBX_API_KEY`, the variables its `apiKeys` name). */
  readonly env?: Record<string, string>
  /** The key the SDK sends (`E2B_API_KEY`, {@link E2BServe.conn}). @default the server's key */
  readonly key?: string
  /** Whether to point this process's `E2B_API_URL`, `E2B_SANDBOX_URL` and `E2B_API_KEY` at the server. @default true */
  readonly sdkEnv?: boolean
}

/** A suite's `sbx serve`: its scope from the start, the server and its connection once {@link E2BServe.start} resolved. */
export interface E2BServe {
  /** The suite's `queue.prefix` (and the `sandbox-router.scope` label of its containers). */
  readonly scope: string
  /** The running server (throws before {@link E2BServe.start} resolved). */
  readonly srv: SbxServer
  /** The server's base URL, `http://127.0.0.1:<port>`. */
  readonly url: string
  /** The server's port. */
  readonly port: number
  /** The key the SDK sends. */
  readonly key: string
  /** `{ apiUrl, sandboxUrl, apiKey }` for SDK calls that pass the connection explicitly. */
  readonly conn: E2BConnection
  /**
   * Starts `sbx serve` with `options.config` under the scope and, unless `sdkEnv` is false, points
   * the SDK's environment variables at it; resolves with the server.
   */
  start(options?: E2BServeOptions): Promise<SbxServer>
  /**
   * Restores the SDK's environment variables, stops the server and removes the scope's containers
   * and Redis keys. Safe before {@link E2BServe.start}, after it failed, and twice.
   */
  stop(): Promise<void>
}

/**
 * A suite's `sbx serve` on its E2B-compatible endpoint, scoped `<tag>-<8 hex>`: call it in the
 * `describe` body, {@link E2BServe.start} in `beforeAll` and {@link E2BServe.stop} in `afterAll`.
 */
export function e2bServe(tag: string): E2BServe {
  const scope = uniqueName(tag)
  let running: { srv: SbxServer; key: string } | undefined
  let restoreEnv: (() => void) | undefined
  const started = (): { srv: SbxServer; key: string } => {
    if (!running) throw new Error(`sbx serve of ${scope} is not started`)
    return running
  }
  return {
    scope,
    get srv() {
      return started().srv
    },
    get url() {
      return started().srv.url
    },
    get port() {
      return Number(new URL(started().srv.url).port)
    },
    get key() {
      return started().key
    },
    get conn() {
      const { srv, key } = started()
      return { apiUrl: srv.url, sandboxUrl: srv.url, apiKey: key }
    },
    async start(options = {}) {
      if (running) throw new Error(`sbx serve of ${scope} is already started`)
      const { config, env, sdkEnv = true } = options
      const srv = await startSbxServer('serve', {
        config: { ...config, queue: { ...config?.queue, prefix: scope } },
        env,
      })
      const key = options.key ?? srv.key
      running = { srv, key }
      if (sdkEnv) {
        restoreEnv = saveEnv(E2B_ENV)
        process.env['E2B_API_URL'] = srv.url
        process.env['E2B_SANDBOX_URL'] = srv.url
        process.env['E2B_API_KEY'] = key
      }
      return srv
    },
    async stop() {
      restoreEnv?.()
      restoreEnv = undefined
      const srv = running?.srv
      running = undefined
      try {
        await srv?.stop()
      } finally {
        await removeScope(scope)
      }
    },
  }
}
