import type { CodeService, ProcessService, SessionService } from '../services/index.js'
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
