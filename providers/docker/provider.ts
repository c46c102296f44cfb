import Docker from 'dockerode'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import {
  type CreateOptions,
  defineProvider,
  type ResolvedProfile,
  type SandboxHealth,
  type SandboxProvider,
  type SandboxRef,
} from '../../src/sandbox/index.js'
import { agentSupply } from './agent-source.js'
import { dockerBackend } from './backend.js'
import { directHost } from './direct-channel.js'
import { egressHost } from './egress-host.js'
import { AgentVolumeEmptyError, mapEngineError } from './errors.js'
import { freezeContainer } from './lifecycle.js'
import { type DockerProviderOptions, DockerProviderOptionsSchema } from './options.js'
import { engineRuntimes } from './runtimes.js'
import type { DockerSandbox } from './sandbox.js'
import { dockerSnapshots } from './snapshots.js'
import { containerStats } from './stats.js'

/** Provider id of the Docker provider. */
export const DOCKER_PROVIDER_ID = 'docker'

/** The Docker provider: the SPI plus the dockerode client it uses (for diagnostics and tests). */
export interface DockerProvider extends SandboxProvider {
  readonly docker: Docker
  health(): Promise<SandboxHealth>
  /** Names of the runtimes the engine offers (`runc`, and `runsc` once gVisor is registered). */
  runtimes(): Promise<string[]>
  /** Closes every handle this provider opened (their commands are killed); containers stay. */
  close(): Promise<void>
}

/**
 * Creates the local Docker provider (id `docker`): hardened containers from any image the engine
 * has (default `sandbox-router/base`) with the provider's own agent mounted in, one long-lived
 * agent channel per handle, refs reconnectable from any process that reaches the same engine.
 */
export function createDockerProvider(options: DockerProviderOptions = {}): DockerProvider {
  const { docker: client, dockerOptions, egress, ...scalars } = options
  const opts = DockerProviderOptionsSchema.parse(scalars)
  const docker = client ?? new Docker(dockerOptions)
  const handles = new Set<DockerSandbox>()
  const agent = agentSupply(docker, opts)
  const direct = directHost(
    docker,
    opts.agentSocketDir ?? join(tmpdir(), `sbx-agent-${process.getuid?.() ?? 'user'}`),
  )
  const backend = dockerBackend({ docker, opts, agent, egress: egressHost(egress), direct, handles })
  const defined = defineProvider({ id: DOCKER_PROVIDER_ID, instanceId: opts.instanceId, backend })

  async function create(profile: ResolvedProfile, options: CreateOptions): Promise<DockerSandbox> {
    try {
      return await defined.create(profile, options)
    } catch (err) {
      // The agent volume went away under us (`docker volume prune` between sandboxes): the engine
      // made an empty one for the mount. Fill it again and try once more.
      if (!(err instanceof AgentVolumeEmptyError)) throw err
      agent.reset()
      return defined.create(profile, options)
    }
  }

  async function health(): Promise<SandboxHealth> {
    try {
      await docker.ping()
      return { ok: true }
    } catch (err) {
      return { ok: false, reason: mapEngineError(err, 'pinging the Docker engine').message }
    }
  }

  async function close(): Promise<void> {
    await Promise.all([...handles].map((h) => h.close()))
  }

  const { snapshots, workspaces } = dockerSnapshots(docker, opts.defaultImage)

  return {
    ...defined,
    id: DOCKER_PROVIDER_ID,
    persistentShells: true,
    snapshots,
    workspaces,
    docker,
    runtimes: () => engineRuntimes(docker),
    create,
    pause: (ref: SandboxRef) => freezeContainer(docker, ref, true),
    resume: (ref: SandboxRef) => freezeContainer(docker, ref, false),
    stats: (ref: SandboxRef) => containerStats(docker, ref),
    health,
    close,
  }
}
