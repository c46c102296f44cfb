import { isFleet } from '../config/schema.js'
import { parseArgs } from 'node:util'
import { EngineDirectory } from '../queue/engines/engine-directory.js'
import { engineViews } from '../fleet/engine-gateways.js'
import type { EngineWithGateways } from '../fleet/engine-gateways.js'
import { createRedisClient, redactUrl } from '../redis/index.js'
import type { CliIO } from './output.js'
import { UsageError } from './output.js'
import { loadFor } from './runtime-commands.js'

const USAGE = [
  'usage: sbx engine ls [--json] [--config file] [--redis url]',
  '       sbx engine drain <id> [--config file] [--redis url]',
  '       sbx engine undrain <id> [--config file] [--redis url]',
  '',
  'The Docker engines of a fleet with queue.engineRouting (each reported by the workers beside it).',
  'drain: no new sessions go to the engine; its running and queued commands finish. Its sessions move',
  '       to another engine on their next call, in a fresh sandbox (their files are lost: the result',
  '       says so in sandboxReplaced).',
].join('\n')

/** `sbx engine ls | drain <id> | undrain <id>`: the fleet's engines in Redis. */
export async function engineCommand(verb: 'ls' | 'drain' | 'undrain', args: readonly string[], io: CliIO) {
  let parsed
  try {
    parsed = parseArgs({
      args: [...args],
      allowPositionals: true,
      options: {
        json: { type: 'boolean' },
        config: { type: 'string', short: 'c' },
        redis: { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    })
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`)
  }
  const { values, positionals } = parsed
  if (values.help) return (io.out(USAGE), 0)
  const id = positionals[0]
  if (verb !== 'ls' && (id === undefined || positionals.length > 1))
    throw new UsageError(`sbx engine ${verb} takes one engine id (see \`sbx engine ls\`)\n${USAGE}`)
  const { config } = loadFor(values)
  if (!isFleet(config))
    throw new UsageError('sbx engine talks to a fleet: pass --redis <url> or set REDIS_URL')
  const redis = createRedisClient(config.queue.redisUrl, 'store', 'sbx-cli')
  try {
    await redis.connect().catch((err: unknown) => {
      throw new UsageError(
        `cannot reach Redis at ${redactUrl(config.queue.redisUrl)}: ${(err as Error).message}`,
      )
    })
    const engines = new EngineDirectory(redis, { prefix: config.queue.prefix })
    if (verb === 'ls') {
      const list = await engineViews(engines)
      if (values.json)
        io.out(
          JSON.stringify(
            {
              engines: list.map((e) => ({
                ...e,
                gateways: e.gatewayUrls.length,
                gatewayUrls: e.gatewayUrls,
              })),
            },
            null,
            2,
          ),
        )
      else if (list.length === 0) io.out('no engines: no worker with queue.engineRouting has reported one')
      else for (const e of list) io.out(describe(e))
      return 0
    }
    const known = (await engines.list()).some((e) => e.id === id)
    if (!known && verb === 'drain') {
      io.err(`no engine '${id}' has reported (sbx engine ls lists the engines); nothing drained`)
      return 1
    }
    await engines.setDraining(id as string, verb === 'drain')
    io.out(
      verb === 'drain'
        ? `engine ${id} drained: no new sessions go there; its running commands finish; its sessions ` +
            'move to another engine on their next call (files lost)'
        : `engine ${id} takes new sessions again`,
    )
    return 0
  } finally {
    redis.disconnect()
  }
}

function describe(e: EngineWithGateways): string {
  const cap = e.cap === undefined ? 'unbounded' : String(e.cap)
  const age = Math.max(0, Math.round((Date.now() - e.seenAt) / 1000))
  const GiB = 1024 ** 3
  const memory =
    e.memoryBytes === undefined
      ? ''
      : `memory ${((e.reservedBytes ?? 0) / GiB).toFixed(1)}/${(e.memoryBytes / GiB).toFixed(1)} GiB` +
        `${e.memoryStrict ? '' : ' (engine memory, not a bound)'}  `
  return (
    `${e.id}  ${e.state}${e.draining ? ' (draining)' : ''}  running ${e.running}/${cap}  ${memory}` +
    `seen ${age}s ago by ${e.workerId}${e.reason ? `  (${e.reason})` : ''}` +
    `\n  gateways ${e.gatewayUrls.length}${e.gatewayUrls.length ? `: ${e.gatewayUrls.join(' ')}` : ' (no live worker serves one: set fleet.secret on its workers)'}`
  )
}
