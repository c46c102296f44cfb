import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { loadConfig } from '../config/load.js'
import type { LoadedConfig } from '../config/load.js'
import { isFleet } from '../config/schema.js'
import { AppError } from '../errors.js'
import { describeNetwork } from '../egress/policy.js'
import { assertEgressEnforceable, describeEnforcement, egressCaps } from '../egress/providers.js'
import { DEFAULT_CODE_TOOLS } from '../interceptors/builtins/route-code-tools.js'
import { assertSessionId } from '../sessions/session-id.js'
import { createLogger } from '../logger.js'
import { redactUrl } from '../redis/index.js'
import { createRuntime } from '../runtime/create-runtime.js'
import { engineIdOf } from '../runtime/engine-side.js'
import type { RuntimeOptions, RuntimeRole } from '../runtime/create-runtime.js'
import { describeKeySource, resolveApiKeys } from './api-keys.js'
import { createRuntimeWithRetry, startServer } from './serve.js'
import { startMetricsServer } from './metrics-server.js'
import { Keyring } from '../http/keyring.js'
import { serverTarget } from './client-commands.js'
import type { CliIO } from './output.js'
import { UsageError } from './output.js'
import { remoteExec } from './remote-exec.js'
import { openWorkerGateway } from '../fleet/worker-gateway.js'

/** Options every runtime command takes. */
const COMMON = {
  config: { type: 'string', short: 'c' },
  redis: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

function parse<O extends Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }>>(
  args: readonly string[],
  options: O,
  usage: string,
) {
  try {
    return parseArgs({
      args: [...args],
      options: { ...COMMON, ...options },
      allowPositionals: true,
      strict: true,
    })
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`)
  }
}

/** Loads config; `--redis` behaves like REDIS_URL. */
export function loadFor(values: { config?: string | boolean; redis?: string | boolean }): LoadedConfig {
  const env = { ...process.env }
  if (typeof values.redis === 'string') env['REDIS_URL'] = values.redis
  return loadConfig({ ...(typeof values.config === 'string' ? { file: values.config } : {}), env })
}

/** How long `serve`, `api` and `worker` wait for Redis at start-up unless `--redis-wait` says otherwise (s). */
const DEFAULT_REDIS_WAIT_S = 60

/**
 * Builds the runtime of a long-running command: while Redis is unreachable at start-up it retries with
 * backoff (a line on stderr per attempt) for `--redis-wait` seconds, then fails with QUEUE_UNAVAILABLE.
 */
function startRuntime(
  loaded: LoadedConfig,
  opts: RuntimeOptions,
  redisWait: string | boolean | undefined,
  io: CliIO,
): ReturnType<typeof createRuntime> {
  const waitS = redisWait === undefined ? DEFAULT_REDIS_WAIT_S : Number(redisWait)
  if (typeof redisWait === 'boolean' || !Number.isFinite(waitS) || waitS < 0)
    throw new UsageError('--redis-wait takes a number of seconds (0: do not wait)')
  return createRuntimeWithRetry(loaded, opts, {
    waitMs: waitS * 1000,
    onRetry: ({ attempt, delayMs, error }) =>
      io.err(
        `sbx: waiting for Redis (attempt ${attempt} failed; retrying in ${(delayMs / 1000).toFixed(1)} s, ` +
          `giving up after ${waitS} s): ${error.message}`,
      ),
  })
}

/** Resolves when SIGINT or SIGTERM arrives. */
function untilSignal(): Promise<NodeJS.Signals> {
  return new Promise((r) => {
    process.once('SIGINT', () => r('SIGINT'))
    process.once('SIGTERM', () => r('SIGTERM'))
  })
}

/** `sbx serve` / `sbx api`: the HTTP API (with an exec worker for serve). */
export async function serveCommand(args: readonly string[], io: CliIO, role: RuntimeRole): Promise<number> {
  const usage = `usage: sbx ${role === 'all' ? 'serve' : 'api'} [--config file] [--port n] [--host h] [--redis url] [--redis-wait s]`
  const { values } = parse(
    args,
    { port: { type: 'string' }, host: { type: 'string' }, 'redis-wait': { type: 'string' } },
    usage,
  )
  if (values.help) return (io.out(usage), 0)
  const loaded = loadFor(values)
  if (role === 'api' && !isFleet(loaded.config)) {
    throw new UsageError(
      'sbx api serves a fleet: pass --redis <url> or set REDIS_URL (or use `sbx serve` for one process)',
    )
  }
  const keys = resolveApiKeys(loaded.config, process.env, join(process.cwd(), '.sbx', 'api-key'))
  const logger = createLogger({
    level: process.env['LOG_LEVEL'] ?? 'info',
    secrets: [...keys.secrets, ...(loaded.config.fleet.secret ? [loaded.config.fleet.secret] : [])],
  })
  const runtime = await startRuntime(loaded, { role, logger }, values['redis-wait'], io)
  const port = values.port !== undefined ? Number(values.port) : undefined
  const server = await startServer(runtime, {
    keys: keys.entries,
    ...(port !== undefined ? { port } : {}),
    ...(values.host ? { host: values.host } : {}),
  })
  const mode = isFleet(loaded.config)
    ? `fleet mode (Redis ${redactUrl(loaded.config.queue.redisUrl)})`
    : 'embedded mode (in-process queue)'
  io.err(`sandbox-router listening on ${server.url} — ${mode}; API reference at ${server.url}/docs`)
  io.err(describeKeySource(keys.source))
  const signal = await untilSignal()
  io.err(`${signal}: draining (up to 30 s)…`)
  await server.close()
  await runtime.close({ deadlineMs: 30_000 })
  return 0
}

/**
 * `sbx worker`: a fleet exec worker (runs routed commands in sandboxes: needs the Docker engine or a
 * remote provider). `sbx worker --agent`: an agent-run worker instead (runs the agent loop against the
 * configured model; its shell calls go through the exec queue to the exec workers, so it needs no engine).
 */
export async function workerCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage =
    'usage: sbx worker [--agent] [--config file] [--redis url] [--redis-wait s] [--concurrency n]\n' +
    '                  [--metrics-port n] [--metrics-host h]\n' +
    '  (without --agent: an exec worker, default concurrency queue.concurrency;\n' +
    '   with --agent: an agent-run worker, default concurrency 4, whose shell calls go through the exec queue)\n' +
    '  (--redis-wait: how long to wait for Redis at start-up, retrying with backoff; default 60)\n' +
    "  (--metrics-port: serve this worker's GET /metrics there, with the API's keys; --metrics-host, default 127.0.0.1)"
  const { values } = parse(
    args,
    {
      concurrency: { type: 'string' },
      agent: { type: 'boolean' },
      'redis-wait': { type: 'string' },
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string' },
    },
    usage,
  )
  if (values.help) return (io.out(usage), 0)
  const loaded = loadFor(values)
  if (!isFleet(loaded.config)) {
    throw new UsageError('sbx worker joins a fleet: pass --redis <url> or set REDIS_URL')
  }
  const metricsPort = values['metrics-port'] !== undefined ? Number(values['metrics-port']) : undefined
  if (
    metricsPort !== undefined &&
    !(Number.isInteger(metricsPort) && metricsPort >= 0 && metricsPort < 65_536)
  )
    throw new UsageError('--metrics-port must be a TCP port (0–65535; 0 picks a free one)')
  if (values['metrics-host'] !== undefined && metricsPort === undefined)
    throw new UsageError('--metrics-host needs --metrics-port (the port to serve GET /metrics on)')
  // The metrics take the API's keys (config apiKeys, SBX_API_KEY or .sbx/api-key), resolved up front.
  const keys =
    metricsPort !== undefined
      ? resolveApiKeys(loaded.config, process.env, join(process.cwd(), '.sbx', 'api-key'))
      : undefined
  const agent = values.agent === true
  if (agent && Object.keys(loaded.config.models).length === 0)
    throw new UsageError(
      `sbx worker --agent runs agent runs with a model from config \`models\`, and ${loaded.file ?? 'the built-in defaults'} ` +
        'names none: add a `models` entry (kind openai-compatible or anthropic, apiKeyEnv) to the config, or pass --config',
    )
  const logger = createLogger({
    level: process.env['LOG_LEVEL'] ?? 'info',
    secrets: [...(keys?.secrets ?? []), ...(loaded.config.fleet.secret ? [loaded.config.fleet.secret] : [])],
  })
  const concurrency = values.concurrency !== undefined ? Number(values.concurrency) : undefined
  if (concurrency !== undefined && !(Number.isInteger(concurrency) && concurrency > 0))
    throw new UsageError('--concurrency must be a positive integer')
  const options: RuntimeOptions = agent
    ? {
        role: 'worker',
        logger,
        execWorker: false,
        agentWorker: true,
        ...(concurrency ? { agentConcurrency: concurrency } : {}),
        // Sandboxes are the exec workers' business: this process never reaps or refills pools.
        pool: { reapIntervalMs: 0, maintenanceIntervalMs: 0 },
      }
    : { role: 'worker', logger, ...(concurrency ? { concurrency } : {}) }
  // Listening before the worker starts: its engine's first heartbeat already reports the URL.
  const gateway = agent
    ? undefined
    : await openWorkerGateway(loaded.config, logger).catch((err: unknown) => {
        throw new UsageError(`fleet.gateway: cannot listen: ${(err as Error).message}`)
      })
  const runtime = await startRuntime(
    loaded,
    { ...options, ...(gateway ? { gatewayUrl: gateway.url } : {}) },
    values['redis-wait'],
    io,
  ).catch(async (err: unknown) => {
    await gateway?.close()
    throw err
  })
  if (gateway && runtime.gateway) {
    gateway.serve(runtime.gateway)
    io.err(`gateway for engine ${runtime.gateway.engineId} at ${gateway.url} (fleet.secret required)`)
  } else if (!agent && runtime.engineId !== undefined && !loaded.config.fleet.secret) {
    io.err(
      'no fleet.secret (SBX_FLEET_SECRET): this worker serves no gateway, so the API cannot reach the files, ' +
        "processes and code of this engine's sessions; set the same secret on every sbx api and sbx worker",
    )
  }
  if (agent) {
    const models = Object.keys(loaded.config.models).join(', ')
    io.err(
      `worker ${runtime.agentWorker?.workerId ?? '?'} consuming agent runs (queue sbx-agent-runs, concurrency ` +
        `${runtime.agentWorker?.concurrency ?? '?'}; models: ${models}); its shell calls go to the exec workers`,
    )
  } else {
    io.err(
      `worker ${runtime.worker?.workerId ?? '?'} consuming exec jobs (queue sbx-exec${runtime.engineId === undefined ? '' : `, engine ${runtime.engineId}`}, concurrency ${concurrency ?? loaded.config.queue.concurrency})`,
    )
  }
  const metricsServer =
    keys && metricsPort !== undefined
      ? await startMetricsServer(runtime.metrics, new Keyring(keys.entries), {
          port: metricsPort,
          ...(values['metrics-host'] ? { host: values['metrics-host'] } : {}),
        }).catch(async (err: unknown) => {
          await runtime.close({ deadlineMs: 0 })
          throw new UsageError(`--metrics-port ${metricsPort}: cannot listen: ${(err as Error).message}`)
        })
      : undefined
  if (metricsServer && keys)
    io.err(`metrics at ${metricsServer.url}/metrics — ${describeKeySource(keys.source)}`)
  const signal = await untilSignal()
  io.err(`${signal}: draining (up to 30 s), then handing unfinished jobs back…`)
  await metricsServer?.close()
  await gateway?.close()
  await runtime.close({ deadlineMs: 30_000 })
  return 0
}

/** `sbx exec -- <command>`: runs one command, output live, exit code of the command. */
export async function execCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage =
    'usage: sbx exec [--provider docker] [--profile default] [--session id] [--timeout ms] ' +
    '[--url u [--key k] | --config file [--redis url]] -- <command>'
  const { values, positionals } = parse(
    args,
    {
      provider: { type: 'string' },
      profile: { type: 'string' },
      session: { type: 'string' },
      timeout: { type: 'string' },
      url: { type: 'string' },
      key: { type: 'string' },
    },
    usage,
  )
  if (values.help) return (io.out(usage), 0)
  const command = positionals.join(' ').trim()
  if (!command) throw new UsageError(`no command given\n${usage}`)
  if (values.session !== undefined) assertSessionId(values.session, '--session')
  const timeoutMs = values.timeout !== undefined ? Number(values.timeout) : undefined
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0))
    throw new UsageError(
      `--timeout must be a whole number of milliseconds above 0, not ${values.timeout}\n${usage}`,
    )
  if (values.url !== undefined || process.env['SBX_URL']) {
    if (values.redis !== undefined || values.config !== undefined)
      throw new UsageError(
        `--url runs the command on a server: --config and --redis belong to that server\n${usage}`,
      )
    const ac = new AbortController()
    const onSig = (): void => ac.abort()
    process.once('SIGINT', onSig)
    try {
      return await remoteExec(
        serverTarget(values),
        {
          provider: values.provider ?? 'docker',
          profile: values.profile ?? 'default',
          command,
          ...(values.session ? { sessionId: values.session } : {}),
          ...(timeoutMs !== undefined ? { timeoutMs } : {}),
        },
        { json: values.json === true, signal: ac.signal },
        io,
      )
    } finally {
      process.off('SIGINT', onSig)
    }
  }
  const loaded = loadFor(values)
  const fleet = isFleet(loaded.config)
  const runtime = await createRuntime(loaded, {
    role: fleet ? 'api' : 'all',
    logger: createLogger({ level: 'warn' }),
  })
  const ac = new AbortController()
  const onSig = (): void => ac.abort(new AppError('JOB_CANCELLED', 'interrupted by the user'))
  process.once('SIGINT', onSig)
  try {
    const result = await runtime.router.execute(
      {
        providerId: values.provider ?? 'docker',
        profile: values.profile ?? 'default',
        command,
        callId: `cli-${crypto.randomUUID()}`,
        toolName: 'exec',
        ...(values.session ? { sessionId: values.session } : {}),
        ...(timeoutMs !== undefined ? { timeoutMs } : {}),
      },
      values.json
        ? { signal: ac.signal }
        : {
            signal: ac.signal,
            onStdout: (c) => void process.stdout.write(c),
            onStderr: (c) => void process.stderr.write(c),
          },
    )
    if (values.json) io.out(JSON.stringify(result))
    else if (result.timedOut)
      io.err(`sbx: timed out after ${result.durationMs.toFixed(0)} ms; the process group was killed`)
    else if (result.truncated)
      io.err('sbx: output truncated in the middle (past the output cap the head and the tail are kept)')
    return result.exitCode ?? 128 + 9
  } finally {
    process.off('SIGINT', onSig)
    if (values.session === undefined || !fleet) await runtime.pool.shutdown({ destroyIdle: true })
    await runtime.close({ deadlineMs: 5_000 })
  }
}

/** `sbx reap`: destroys every owned sandbox without a live lease, and removes failed snapshots. */
export async function reapCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage = 'usage: sbx reap [--config file] [--redis url]'
  const { values } = parse(args, {}, usage)
  if (values.help) return (io.out(usage), 0)
  const runtime = await createRuntime(loadFor(values), {
    role: 'api',
    logger: createLogger({ level: 'warn' }),
  })
  try {
    const n = await runtime.pool.reap()
    // Snapshots a crashed capture left `creating` past the bound go too (their records and data).
    // With engine routing, only those taken on the engine this process reaches (DOCKER_HOST): the
    // data of the others lives on their engines, whose workers sweep them.
    // And the data of snapshots deleted while this engine was away.
    const here = runtime.engines
      ? { engineId: await engineIdOf(runtime.registry, runtime.loaded.config) }
      : {}
    const snaps = await runtime.snapshots.sweepFailed(here)
    const left = await runtime.snapshots.sweepLeftovers(here)
    io.out(
      values.json
        ? JSON.stringify({ reaped: n, failedSnapshots: snaps, deletedSnapshotData: left })
        : `reaped ${n} sandbox${n === 1 ? '' : 'es'}; removed ${snaps} failed snapshot${snaps === 1 ? '' : 's'}` +
            (left
              ? `; removed the data of ${left} snapshot${left === 1 ? '' : 's'} deleted while this engine was away`
              : ''),
    )
    return 0
  } finally {
    await runtime.close({ deadlineMs: 1_000 })
  }
}

/** `sbx config check`: validates the config and prints what it resolves to. */
export async function configCheckCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage = 'usage: sbx config check [--config file] [--json]'
  const { values } = parse(args, {}, usage)
  if (values.help) return (io.out(usage), 0)
  const loaded = loadFor(values)
  // The same refusal as start-up: a policy the profile's provider cannot enforce is an error here.
  const caps = egressCaps(loaded.config.egress.tenants)
  for (const [name, p] of loaded.profiles) assertEgressEnforceable(name, p.provider, p.network, caps)
  const summary = {
    file: loaded.file ?? '(none: built-in defaults)',
    queue: loaded.config.queue.driver,
    providers: Object.entries(loaded.config.providers)
      .filter(([, p]) => p?.enabled)
      .map(([id]) => id),
    profiles: [...loaded.profiles.keys()],
    /** Per profile with an egress allowlist: how it is enforced. */
    egress: Object.fromEntries(
      [...loaded.profiles]
        .filter(([, p]) => typeof p.network === 'object')
        .map(([name, p]) => [
          name,
          `${describeNetwork(p.network)} (enforced by ${p.provider}: ${describeEnforcement(p.provider, p.network)})`,
        ]),
    ),
    /** Where the server's host policy routes tool calls. */
    routing: {
      shell: `${loaded.config.routing.shell.providerId}/${loaded.config.routing.shell.profile}`,
      ...(loaded.config.routing.code
        ? {
            code: `${loaded.config.routing.code.providerId}/${loaded.config.routing.code.profile} (${(loaded.config.routing.code.tools ?? DEFAULT_CODE_TOOLS).join(', ')})`,
          }
        : {}),
    },
    extensions: loaded.config.extensions,
    apiKeys: loaded.config.apiKeys.map((k) => ({ tenant: k.tenant, admin: k.admin })),
  }
  if (values.json) io.out(JSON.stringify(summary))
  else {
    io.out(`config ok: ${summary.file}`)
    io.out(
      `  queue: ${summary.queue}; providers: ${summary.providers.join(', ')}; profiles: ${summary.profiles.join(', ')}`,
    )
    io.out(
      `  routing: shell tools -> ${summary.routing.shell}` +
        (summary.routing.code ? `; code tools -> ${summary.routing.code}` : '; code tools not routed'),
    )
    for (const [name, how] of Object.entries(summary.egress)) io.out(`  egress ${name}: ${how}`)
    io.out(
      `  extensions: ${summary.extensions.length}; api keys: ${summary.apiKeys.length || 'embedded default'}`,
    )
  }
  return 0
}

/** `sbx providers`: providers, health and profiles. */
export async function providersCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage = 'usage: sbx providers [--config file] [--json]'
  const { values } = parse(args, {}, usage)
  if (values.help) return (io.out(usage), 0)
  const loaded = loadFor(values)
  const runtime = await createRuntime(loaded, { role: 'api', logger: createLogger({ level: 'warn' }) })
  try {
    const checks = await runtime.readiness()
    const rows = runtime.registry.providerIds().map((id) => ({
      id,
      health: checks[id] ?? { ok: false },
      profiles: runtime.registry.profileNames().filter((n) => runtime.registry.profile(n).provider === id),
    }))
    if (values.json) io.out(JSON.stringify(rows))
    else
      for (const r of rows)
        io.out(
          `${r.id}\t${r.health.ok ? 'ok' : `down: ${r.health.reason ?? '?'}`}\tprofiles: ${r.profiles.join(', ')}`,
        )
    return rows.every((r) => r.health.ok) ? 0 : 1
  } finally {
    await runtime.close({ deadlineMs: 1_000 })
  }
}
