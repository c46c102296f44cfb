import type Docker from 'dockerode'
import type { Labels, ProviderBackend } from '../../src/sandbox/index.js'
import type { AgentSupply } from './agent-source.js'
import { dockerConnect } from './connect.js'
import { WORKSPACE } from './container-spec.js'
import { dockerCreate } from './create.js'
import type { DirectHost } from './direct-channel.js'
import type { EgressHost } from './egress-host.js'
import { mapEngineError } from './errors.js'
import { removalFailed } from './lifecycle.js'
import type { ResolvedDockerProviderOptions } from './options.js'
import { DockerSandbox } from './sandbox.js'

/** The backend's object for one container: what its handle, `start` and `revive` need. */
export interface DockerContainer {
  /** The image it runs (messages of a failed create). */
  image: string
  /** The user commands run as: the profile's on create, the engine's answer on connect. */
  user: string
  /** Where its agent binary is inside it. */
  agentPath: string
  /** The engine volume its agent comes from (messages of a failed start). */
  agentVolume?: string
  /** Its labels: where its direct-channel folder is (providers/docker/direct-channel.ts). */
  labels?: Labels
  /**
   * Started from a tmpfs snapshot: these in-memory mounts get the snapshot's files (mounted at
   * `SEED_DIR`) when it starts.
   */
  seedPaths?: string[]
  /** The engine's state of it, as `connect` found it. */
  state?: Docker.ContainerInspectInfo['State']
}

/** What the backend shares with its provider. */
export interface DockerBackendDeps {
  docker: Docker
  opts: ResolvedDockerProviderOptions
  agent: AgentSupply
  egress: EgressHost
  /** The direct agent channels' folders. */
  direct: DirectHost
  /** The open handles (each removes itself on close). */
  handles: Set<DockerSandbox>
}

/**
 * The Docker backend of `defineProvider`: how a sandbox is made (`create.ts`) and found
 * (`connect.ts`), its handle (one agent channel), listing by label, and removal (which also stops
 * its egress proxy).
 */
export function dockerBackend(deps: DockerBackendDeps): ProviderBackend<DockerContainer, DockerSandbox> {
  const { docker, opts, egress, direct, handles } = deps
  return {
    describe: (id) => `container ${id}`,
    defaultCwd: WORKSPACE,
    ...dockerCreate(deps),
    ...dockerConnect(deps),

    async open(ref, container, settings, signal) {
      const sandbox = new DockerSandbox(
        docker,
        ref,
        {
          ...opts,
          ...settings,
          user: container.user,
          agentPath: container.agentPath,
          offerDirect: () => direct.offer(container.labels),
        },
        (closed) => handles.delete(closed),
      )
      handles.add(sandbox)
      try {
        await sandbox.open(signal, false)
      } catch (err) {
        await sandbox.close()
        throw err
      }
      return sandbox
    },

    async list(labels) {
      try {
        const containers = await docker.listContainers({
          all: true,
          filters: { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) },
        })
        return containers.map((c) => ({ id: c.Id, labels: c.Labels }))
      } catch (err) {
        throw mapEngineError(err, 'listing sandboxes')
      }
    },

    async destroy(ref) {
      try {
        await docker.getContainer(ref.id).remove({ force: true, v: true })
        await egress.drop(ref.labels)
        await direct.drop(ref.labels)
        for (const h of handles) if (h.ref.id === ref.id) h.containerRemoved()
      } catch (err) {
        await removalFailed(docker, ref, err)
      }
    },
  }
}
