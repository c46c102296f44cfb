import { AppError } from '../errors.js'
import type {
  CodeService,
  ProcessService,
  SessionPortStream,
  SessionService,
  SessionStreamService,
} from '../services/index.js'
import { openGatewayPort } from './client.js'
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

/** The session service whose `readFile`/`writeFile` run where the session's sandbox lives. */
export function forwardedSessions<S extends SessionService>(local: S, fw: EngineForwarder): S {
  const via =
    <K extends 'readFile' | 'writeFile'>(m: K) =>
    (tenant: string, id: string, ...rest: Args<S[K]>) =>
      fw.call('sessions', m, [tenant, id, ...rest], () =>
        (local[m] as (...a: unknown[]) => Promise<unknown>).call(local, tenant, id, ...rest),
      )
  return override(local, { readFile: via('readFile'), writeFile: via('writeFile') } as Partial<S>)
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
 * Ports and terminals: a port of a session on another engine is reached through the port tunnel of
 * its engine's gateway; terminals only where the session's engine is this process's. `local` absent
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
      fw.route(
        tenant,
        sessionId,
        (found) => here(sessionId, found).openTerminal(tenant, sessionId, opts),
        (_url, _secret, engineId) =>
          Promise.reject(
            new AppError(
              'UNSUPPORTED',
              `session ${sessionId} lives on Docker engine ${engineId}: its terminal is not relayed through ` +
                'another process yet; run commands with /v1/exec or background processes, or open the terminal on ' +
                'an `sbx serve` beside that engine',
            ),
          ),
      ),
  }
}
