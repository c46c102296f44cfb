import { AppError } from '../errors.js'
import type {
  CodeService,
  ProcessService,
  SessionPortStream,
  SessionService,
  SessionStreamService,
  SessionTerminal,
  SnapshotService,
} from '../services/index.js'
import type { SnapshotDirectory } from '../services/snapshot-directory.js'
import { callGateway, openGatewayPort, openGatewayTerminal } from './client.js'
import type { EngineForwarder } from './forwarder.js'

type Args<F> = F extends (tenant: string, sessionId: string, ...rest: infer R) => unknown ? R : never

/** `local` with its listed methods replaced; every other member is the local one. */
function override<T extends object>(local: T, methods: Partial<T>): T {
  return new Proxy(local, {
    get(target, prop) {
      if (Object.hasOwn(methods, prop)) return methods[prop as keyof T]
      const v: unknown = Reflect.get(target, prop, target)
      return typeof v === 'function' ? (v as (...a: unknown[]) => unknown).bind(target) : v
    },
  })
}

/**
 * The session service whose `readFile`/`writeFile` run where the session's sandbox lives, and whose
 * `delete` runs there too (so the sandbox goes with the session, on its own engine).
 */
export function forwardedSessions<S extends SessionService>(local: S, fw: EngineForwarder): S {
  const via =
    <K extends 'readFile' | 'writeFile' | 'delete'>(m: K) =>
    (tenant: string, id: string, ...rest: Args<S[K]>) =>
      fw.call('sessions', m, [tenant, id, ...rest], () =>
        (local[m] as (...a: unknown[]) => Promise<unknown>).call(local, tenant, id, ...rest),
      )
  return override(local, {
    readFile: via('readFile'),
    writeFile: via('writeFile'),
    delete: via('delete'),
  } as unknown as Partial<S>)
}

/** The process service whose every call runs where the session's sandbox lives. */
export function forwardedProcesses<P extends ProcessService>(local: P, fw: EngineForwarder): P {
  const methods = ['start', 'list', 'get', 'read', 'writeStdin', 'signal', 'remove'] as const
  const out: Record<string, unknown> = {}
  for (const m of methods) {
    out[m] = (tenant: string, id: string, ...rest: unknown[]) =>
      fw.call('processes', m, [tenant, id, ...rest], () =>
        (local[m] as (...a: unknown[]) => Promise<unknown>).call(local, tenant, id, ...rest),
      )
  }
  return override(local, out as Partial<P>)
}

/** The code service whose cells run where the session's sandbox lives. */
export function forwardedCode<C extends CodeService>(local: C, fw: EngineForwarder): C {
  const run: CodeService['run'] = (tenant, id, input, opts) =>
    fw.call('code', 'run', [tenant, id, input], () => local.run(tenant, id, input, opts), opts?.signal)
  return override(local, { run } as Partial<C>)
}

/**
 * The snapshot service whose snapshots are taken, and forks made, where the source session's sandbox
 * lives; sessions start from a snapshot, and its data is removed, on the engine that holds it (its
 * record's `engineId`: a snapshot is an image and a volume on that engine only). Listing and reading
 * records stay local (the records are shared).
 */
export function forwardedSnapshots<N extends SnapshotService>(
  local: N,
  fw: EngineForwarder,
  records: Pick<SnapshotDirectory, 'get'>,
): N {
  const onItsEngine = async <T>(
    tenant: string,
    snapshotId: string,
    method: 'startSession' | 'delete',
    rest: unknown[],
    here: () => Promise<T>,
  ): Promise<T> => {
    const r = await records.get(tenant, snapshotId)
    // Unknown (404 from the local service), or taken where engines are not tracked: served here.
    if (r?.engineId === undefined) return here()
    return fw.onEngine(
      `snapshot ${snapshotId}`,
      r.engineId,
      // A drained engine takes no new session (one started there would move at once, empty); a
      // snapshot on an engine that is gone is forgotten here, its data left to that engine.
      method === 'delete' ? { drained: true, whenDown: here } : { drained: false },
      here,
      async (url, secret, engineId) =>
        (await callGateway(url, secret, engineId, {
          service: 'snapshots',
          method,
          args: [tenant, snapshotId, ...rest],
        })) as T,
    )
  }
  const methods: Partial<SnapshotService> = {
    create: (tenant, id, opts) =>
      fw.call('snapshots', 'create', [tenant, id, opts ?? {}], () => local.create(tenant, id, opts)),
    fork: (tenant, id, opts) =>
      fw.call('snapshots', 'fork', [tenant, id, opts], () => local.fork(tenant, id, opts)),
    startSession: (tenant, input) => {
      const { snapshot, ...rest } = input
      return onItsEngine(tenant, snapshot, 'startSession', [rest], () => local.startSession(tenant, input))
    },
    delete: (tenant, id) => onItsEngine(tenant, id, 'delete', [], () => local.delete(tenant, id)),
  }
  return override(local, methods as Partial<N>)
}

/**
 * Ports and terminals: a port or a terminal of a session on another engine is reached through the
 * port or terminal tunnel of its engine's gateway. `local` absent
 * (`sbx api`): sessions served here have no streams (501, as without engine routing).
 */
export function forwardedStreams(
  local: SessionStreamService | undefined,
  fw: EngineForwarder,
): SessionStreamService {
  const here = (sessionId: string, found: boolean): SessionStreamService => {
    if (local) return local
    if (!found) throw new AppError('NOT_FOUND', `no session ${sessionId}`)
    throw new AppError(
      'UNSUPPORTED',
      "ports and terminals need the sandbox's channel in the process that answers: this session is not on a " +
        'Docker engine of the fleet, and `sbx api` relays no streams; use `sbx serve`',
    )
  }
  return {
    openPort: (tenant, sessionId, port, opts) =>
      fw.route<SessionPortStream>(
        tenant,
        sessionId,
        (found) => here(sessionId, found).openPort(tenant, sessionId, port, opts),
        async (url, secret, engineId) => {
          const stream = await openGatewayPort(
            url,
            secret,
            engineId,
            { tenant, sessionId, port },
            opts?.signal,
          )
          stream.on('error', () => undefined)
          return { stream, done: new Promise<void>((resolve) => stream.once('close', () => resolve())) }
        },
        opts?.signal,
      ),
    openTerminal: (tenant, sessionId, opts) =>
      fw.route<SessionTerminal>(
        tenant,
        sessionId,
        (found) => here(sessionId, found).openTerminal(tenant, sessionId, opts),
        async (url, secret, engineId) => {
          const terminal = await openGatewayTerminal(
            url,
            secret,
            engineId,
            { tenant, sessionId, cols: opts.cols, rows: opts.rows },
            opts.signal,
            {
              ...(opts.command === undefined ? {} : { command: opts.command }),
              ...(opts.env === undefined ? {} : { env: opts.env }),
              ...(opts.cwd === undefined ? {} : { cwd: opts.cwd }),
            },
          )
          terminal.stream.on('error', () => undefined)
          // The worker holds the sandbox's lease until the terminal ends.
          return { terminal, done: terminal.exited.then(() => undefined) }
        },
        opts.signal,
      ),
  }
}
