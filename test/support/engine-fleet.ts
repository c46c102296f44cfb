/*
 * A fleet over two Docker engines as a user starts it (issue 17): `sbx api` and one `sbx worker` per
 * engine, each worker's DOCKER_HOST pointing at its engine, all with `queue.engineRouting` on one
 * Redis prefix. Helpers speak HTTP and the CLI only; which engine holds a sandbox is read from the
 * engines themselves (`docker -H … ps`).
 */
import type { ConfigInput } from '../../src/config/schema.js'
import { dockerAt, MAIN_ENGINE_HOST, removeScopeAt, startSecondEngine } from './second-engine.js'
import type { SecondEngine } from './second-engine.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from './sbx-cli.js'
import type { LineChild, SbxServer } from './sbx-cli.js'

/** A running two-engine fleet. */
export interface EngineFleet {
  readonly prefix: string
  readonly cwd: string
  readonly api: SbxServer
  readonly workers: { main: LineChild; second: LineChild }
  readonly second: SecondEngine
  /** Engine ids as the workers named them. */
  readonly ids: { main: string; second: string }
  /** Which engine a sandbox (by id) runs on, asked of the engines. */
  engineOf(sandboxId: string): Promise<'main' | 'second' | undefined>
  /** Sandboxes of this fleet's scope running on each engine. */
  counts(): Promise<{ main: number; second: number }>
  /** Starts one more `sbx worker` beside an engine (stopped with the fleet). */
  addWorker(engine: 'main' | 'second'): Promise<LineChild>
  /** `sbx engine …` against this fleet. */
  engineCli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }>
  stop(): Promise<void>
}

const engineIdIn = (line: string): string | undefined => /engine (\S+),/.exec(line)?.[1]

/** Starts the second engine (reused if running), two workers and the API. */
export async function startEngineFleet(tag: string, extra: Partial<ConfigInput> = {}): Promise<EngineFleet> {
  const second = await startSecondEngine()
  const prefix = uniqueName(tag)
  const config = fleetConfig(prefix, {
    ...extra,
    queue: { engineRouting: true, ...(extra.queue ?? {}) },
  } as Partial<ConfigInput>)
  const cwd = configDir(config)
  const startWorker = async (host: string) => {
    const child = await startSbxWorker({ config, cwd, env: { DOCKER_HOST: host } })
    const line = child.lines.find((l) => /consuming exec jobs/.test(l.text))?.text ?? ''
    return { child, id: engineIdIn(line) ?? '' }
  }
  const [main, other] = await Promise.all([startWorker(MAIN_ENGINE_HOST), startWorker(second.host)])
  const api = await startSbxServer('api', { config, cwd })
  const added: LineChild[] = []
  const ids = (host: string) =>
    dockerAt(host, ['ps', '-q', '--no-trunc', '--filter', `label=sandbox-router.scope=${prefix}`])
      .then((r) => r.stdout.split('\n').filter(Boolean))
      .catch(() => [] as string[])
  return {
    prefix,
    cwd,
    api,
    workers: { main: main.child, second: other.child },
    second,
    ids: { main: main.id, second: other.id },
    async engineOf(sandboxId) {
      const [m, s] = await Promise.all([ids(MAIN_ENGINE_HOST), ids(second.host)])
      if (m.some((id) => id.startsWith(sandboxId) || sandboxId.startsWith(id))) return 'main'
      if (s.some((id) => id.startsWith(sandboxId) || sandboxId.startsWith(id))) return 'second'
      return undefined
    },
    async counts() {
      const [m, s] = await Promise.all([ids(MAIN_ENGINE_HOST), ids(second.host)])
      return { main: m.length, second: s.length }
    },
    async addWorker(engine) {
      const { child } = await startWorker(engine === 'main' ? MAIN_ENGINE_HOST : second.host)
      added.push(child)
      return child
    },
    engineCli: (args) => runSbx(['engine', ...args], { cwd }),
    async stop() {
      await api.stop().catch(() => undefined)
      await Promise.all([main.child, other.child, ...added].map((c) => c.stop().catch(() => undefined)))
      await removeScopeAt(second.host, prefix)
      await removeScope(prefix)
    },
  }
}
