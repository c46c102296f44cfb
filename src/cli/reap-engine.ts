import Docker from 'dockerode'
import { parseArgs } from 'node:util'
import {
  type EngineLeftover,
  findEngineLeftovers,
  removeEngineLeftovers,
} from '../../providers/docker/engine-sweep.js'
import { findVolumeLeftovers, removeVolumeLeftovers } from '../../providers/docker/volume-sweep.js'
import { dockerOptionsOf } from '../runtime/docker-options.js'
import { LABELS, OWNER, POOL_LABELS } from '../sandbox/labels.js'
import type { CliIO } from './output.js'
import { UsageError } from './output.js'
import { loadFor, reapCommand } from './runtime-commands.js'

const USAGE = [
  'usage: sbx reap [--config file] [--redis url]          destroy owned sandboxes without a live lease (needs Redis)',
  '       sbx reap --engine [--scope name | --all-scopes] [--running] [--yes] [--json] [--config file]',
  '',
  "--engine       ask only the Docker engine (no Redis): this project's stopped containers",
  `               (label ${LABELS.owner}=${OWNER}). Lists them; removes them with --yes.`,
  `--scope name   only containers of this scope (${POOL_LABELS.scope} label); default: the config's queue.prefix`,
  '--all-scopes   every scope on the engine',
  '--running      also running containers with nothing attached (no agent channel, no command),',
  "               and persistent-workspace volumes no container mounts (a live fleet's idle",
  '               sessions keep theirs that way); only when the fleet that owned them is gone:',
  '               their files go with them. Snapshot volumes are never swept (DELETE /v1/snapshots/{id})',
  '--yes          remove what is listed (without it nothing is removed: a dry run)',
  '--dry-run      list only (the default; says so explicitly)',
].join('\n')

/** `sbx reap`: `--engine` sweeps the engine by label without Redis; otherwise the lease-based reap. */
export async function reapDispatch(args: readonly string[], io: CliIO): Promise<number> {
  if (!args.includes('--engine')) {
    if (args.includes('--help') || args.includes('-h')) return (io.out(USAGE), 0)
    return reapCommand(args, io)
  }
  return reapEngineCommand(args, io)
}

function parse(args: readonly string[]) {
  try {
    return parseArgs({
      args: [...args],
      options: {
        engine: { type: 'boolean' },
        config: { type: 'string', short: 'c' },
        scope: { type: 'string' },
        'all-scopes': { type: 'boolean' },
        running: { type: 'boolean' },
        yes: { type: 'boolean' },
        'dry-run': { type: 'boolean' },
        json: { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
      },
      strict: true,
    }).values
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${USAGE}`)
  }
}

function describe(l: EngineLeftover, now: number): string {
  const ageS = Math.max(0, Math.round((now - l.createdAt) / 1000))
  return `  ${l.id.slice(0, 12)}  ${l.reason}  scope=${l.scope || '-'} profile=${l.profile || '-'} session=${l.session || '-'} age=${ageS}s`
}

/**
 * `sbx reap --engine`: this project's leftover containers, found by label on the engine alone
 * (no Redis): listed, and removed only with `--yes`.
 */
export async function reapEngineCommand(args: readonly string[], io: CliIO): Promise<number> {
  const values = parse(args)
  if (values.help) return (io.out(USAGE), 0)
  if (values.yes && values['dry-run'])
    throw new UsageError(`--yes and --dry-run contradict each other\n${USAGE}`)
  if (values.scope !== undefined && values['all-scopes'])
    throw new UsageError(`--scope and --all-scopes contradict each other\n${USAGE}`)
  const { config } = loadFor(values)
  const scope = values['all-scopes'] ? undefined : (values.scope ?? config.queue.prefix)
  const docker = new Docker(dockerOptionsOf(config.providers.docker.host ?? process.env['DOCKER_HOST']))
  const leftovers = await findEngineLeftovers(docker, {
    ...(scope !== undefined ? { scope } : {}),
    includeRunning: values.running === true,
  })
  const removed = values.yes ? await removeEngineLeftovers(docker, leftovers) : []
  // Volumes after containers: a removed container no longer holds its workspace.
  const volumes = await findVolumeLeftovers(docker, {
    ...(scope !== undefined ? { scope } : {}),
    includeRunning: values.running === true,
  })
  const removedVolumes = values.yes ? await removeVolumeLeftovers(docker, volumes.leftovers) : []
  if (values.json) {
    io.out(
      JSON.stringify({
        scope: scope ?? null,
        dryRun: !values.yes,
        leftovers,
        removed,
        volumes,
        removedVolumes,
      }),
    )
    return 0
  }
  reportVolumes(io, volumes, removedVolumes, values.yes === true)
  const where = scope === undefined ? 'in any scope' : `in scope ${scope}`
  const what = values.running ? 'stopped or unattached' : 'stopped'
  if (leftovers.length === 0) {
    io.out(`no ${what} sandbox containers ${where}`)
    return 0
  }
  const now = Date.now()
  io.out(`${leftovers.length} ${what} sandbox container${leftovers.length === 1 ? '' : 's'} ${where}:`)
  for (const l of leftovers) io.out(describe(l, now))
  if (!values.yes) {
    io.out('dry run: nothing removed; run again with --yes to remove them')
    return 0
  }
  const kept = leftovers.length - removed.length
  io.out(
    `removed ${removed.length}` +
      (kept ? ` (${kept} kept: gone meanwhile or something attached to it since the listing)` : ''),
  )
  return 0
}

/** The volume part of the report: workspace volumes listed, removed, or kept (and why). */
function reportVolumes(
  io: CliIO,
  v: Awaited<ReturnType<typeof findVolumeLeftovers>>,
  removed: readonly string[],
  yes: boolean,
): void {
  for (const l of v.leftovers)
    io.out(
      `  volume ${l.name}  ${l.reason}  scope=${l.scope || '-'} tenant=${l.tenant || '-'} session=${l.session || '-'}`,
    )
  if (v.leftovers.length)
    io.out(
      yes
        ? `removed ${removed.length} workspace volume(s)`
        : `${v.leftovers.length} workspace volume(s) would be removed`,
    )
  if (v.keptUnused)
    io.out(
      `${v.keptUnused} workspace volume(s) without a sandbox kept: a live session's idle workspace looks the same; --running removes them once the fleet is gone`,
    )
}
