/**
 * Brings the in-sandbox agent into containers of any image: a named volume per agent build
 * (`sandbox-router-agent-<sha256 prefix>`) holds the static `sbx-agent` binary and every sandbox
 * mounts it read-only at {@link AGENT_DIR}.
 *
 * Why a volume, not a bind mount of the file or an upload into each container: a bind mount needs
 * the path on the engine's host (wrong when the service runs in a container, impossible when
 * `DOCKER_HOST` is remote); the archive upload refuses containers with a read-only root. The
 * volume is filled once per engine through the Engine API (an archive upload into a created, never
 * started helper container), so it works for a local socket, a containerised worker and a remote
 * engine alike, and costs sandboxes nothing (one more mount).
 */
import { createHash } from 'node:crypto'
import { existsSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import type Docker from 'dockerode'
import { AppError, LABELS, OWNER, PROVIDER_LABELS } from '../../src/sandbox/index.js'
import { engineStatus, mapEngineError } from './errors.js'
import { tarOf } from './tar.js'

/** Where sandboxes see the agent volume (read-only). */
export const AGENT_DIR = '/.sbx-agent'
/** The agent's path inside sandboxes that mount the agent volume. */
export const INJECTED_AGENT_PATH = `${AGENT_DIR}/sbx-agent`
/** Label on the helper container that fills a volume (so a leftover one is recognisable). */
export const AGENT_VOLUME_LABEL = PROVIDER_LABELS.agentVolume

/** Where the helper container mounts the volume read-write while filling it. */
const FILL_DIR = '/sbx-agent-volume'

/** The repository (or installed package) root: the nearest ancestor holding package.json. */
function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const up = dirname(dir)
    if (up === dir) return process.cwd()
    dir = up
  }
  return dir
}

/**
 * The agent binary this machine has: `SBX_AGENT_BIN` when set, else `.sbx/sbx-agent` under the
 * package root (what `scripts/setup.sh` compiles), if it exists.
 */
export function defaultAgentBinary(): string | undefined {
  const configured = process.env['SBX_AGENT_BIN']
  if (configured) return configured
  const built = join(packageRoot(), '.sbx', 'sbx-agent')
  return existsSync(built) ? built : undefined
}

/** The static agent binary the provider brings into its containers. */
export interface AgentBinary {
  /** Path on this machine. */
  path: string
  bytes: Buffer
  /** Name of the engine volume holding this build. */
  volume: string
}

/** Reads the agent binary; a missing or empty file is a clear `CONFIG_INVALID`. */
export function readAgentBinary(path: string): AgentBinary {
  let bytes: Buffer
  try {
    bytes = readFileSync(path)
  } catch (err) {
    throw new AppError(
      'CONFIG_INVALID',
      `cannot read the sandbox agent binary ${path} (${(err as NodeJS.ErrnoException).code ?? err}); ` +
        'run `npm run setup` (scripts/setup.sh compiles it) or point SBX_AGENT_BIN / providers.docker.agentBinary at it',
      { cause: err },
    )
  }
  if (bytes.length === 0)
    throw new AppError(
      'CONFIG_INVALID',
      `the sandbox agent binary ${path} is empty; run \`npm run setup\` again`,
    )
  const hash = createHash('sha256').update(bytes).digest('hex').slice(0, 16)
  return { path, bytes, volume: `sandbox-router-agent-${hash}` }
}

/** Size of `path` in a (created) container, or undefined when it does not exist. */
async function sizeIn(container: Docker.Container, path: string): Promise<number | undefined> {
  try {
    // dockerode answers this HEAD with the response stream itself: it must be ended here, or its
    // socket stays open and keeps the process alive after everything else has closed.
    const res = (await container.infoArchive({ path })) as {
      headers?: Record<string, string>
      destroy?: () => void
    }
    res.destroy?.()
    const stat = res.headers?.['x-docker-container-path-stat']
    if (!stat) return undefined
    return (JSON.parse(Buffer.from(stat, 'base64').toString('utf8')) as { size?: number }).size
  } catch (err) {
    if (engineStatus(err) === 404) return undefined
    throw err
  }
}

/** A helper container older than this is a leftover of a process that died while filling (ms). */
const STALE_HELPER_MS = 60_000

/** Removes helper containers that a process which died mid-fill left behind (best effort). */
async function removeStaleHelpers(docker: Docker): Promise<void> {
  const helpers = await docker
    .listContainers({ all: true, filters: { label: [AGENT_VOLUME_LABEL], status: ['created'] } })
    .catch(() => [])
  const cutoff = Date.now() / 1000 - STALE_HELPER_MS / 1000
  await Promise.all(
    helpers
      .filter((c) => c.Created < cutoff)
      .map((c) =>
        docker
          .getContainer(c.Id)
          .remove({ force: true })
          .catch(() => undefined),
      ),
  )
}

/**
 * Makes sure the engine has the agent volume of `agent`, filled: creates it (idempotent), and when
 * it lacks the binary uploads it through a helper container made from `image` (any image the
 * engine has: it is created, never started). Safe to call from several processes: the volume is
 * keyed by the binary's hash, so every writer writes the same bytes.
 */
export async function ensureAgentVolume(docker: Docker, agent: AgentBinary, image: string): Promise<void> {
  try {
    await docker.createVolume({
      Name: agent.volume,
      Labels: { [LABELS.owner]: OWNER, [AGENT_VOLUME_LABEL]: agent.volume },
    })
  } catch (err) {
    throw mapEngineError(err, `creating the agent volume ${agent.volume}`)
  }
  await removeStaleHelpers(docker)
  let helper: Docker.Container
  try {
    helper = await docker.createContainer({
      Image: image,
      Entrypoint: [`${FILL_DIR}/sbx-agent`],
      Cmd: ['--init'],
      Labels: { [AGENT_VOLUME_LABEL]: agent.volume },
      NetworkDisabled: true,
      HostConfig: {
        NetworkMode: 'none',
        Mounts: [{ Type: 'volume', Source: agent.volume, Target: FILL_DIR, ReadOnly: false }],
        LogConfig: { Type: 'none', Config: {} },
      },
    })
  } catch (err) {
    // A missing image is the caller's to explain (it names the image and how to get it).
    if (engineStatus(err) === 404) throw err
    throw mapEngineError(err, `preparing the agent volume ${agent.volume}`)
  }
  try {
    const target = `${FILL_DIR}/sbx-agent`
    if ((await sizeIn(helper, target)) === agent.bytes.length) return
    await helper.putArchive(tarOf([{ name: 'sbx-agent', data: agent.bytes, mode: 0o755 }]), {
      path: FILL_DIR,
    })
    const size = await sizeIn(helper, target)
    if (size !== agent.bytes.length)
      throw new AppError(
        'INTERNAL',
        `the agent volume ${agent.volume} holds ${size ?? 'no'} bytes of sbx-agent after the upload, expected ${agent.bytes.length}`,
      )
  } catch (err) {
    throw mapEngineError(err, `filling the agent volume ${agent.volume}`)
  } finally {
    await helper.remove({ force: true, v: false }).catch(() => undefined)
  }
}
