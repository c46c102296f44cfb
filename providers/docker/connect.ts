import type Docker from 'dockerode'
import { AppError, PROVIDER_LABELS, type ProviderBackend } from '../../src/sandbox/index.js'
import type { DockerBackendDeps, DockerContainer } from './backend.js'
import { engineStatus, mapEngineError, stoppedState } from './errors.js'
import type { DockerSandbox } from './sandbox.js'

/** The connect half of the Docker backend. */
export type DockerConnect = Pick<ProviderBackend<DockerContainer, DockerSandbox>, 'find' | 'revive'>

/**
 * How `connect` finds a Docker sandbox: the engine's inspect answer (`SANDBOX_LOST` when the
 * container is gone); a container that is not running is refused, and the egress proxy of one
 * another process made is taken over.
 */
export function dockerConnect({ docker, opts, egress }: DockerBackendDeps): DockerConnect {
  return {
    async find(ref, signal) {
      let info: Docker.ContainerInspectInfo
      try {
        info = await docker.getContainer(ref.id).inspect({ abortSignal: signal })
      } catch (err) {
        signal?.throwIfAborted()
        if (engineStatus(err) === 404) {
          throw new AppError(
            'SANDBOX_LOST',
            `sandbox ${ref.id} does not exist (destroyed?); create a new sandbox`,
            { cause: err },
          )
        }
        throw mapEngineError(err, `connecting to sandbox ${ref.id}`, ref.id)
      }
      const labels = info.Config.Labels ?? {}
      const native: DockerContainer = {
        image: info.Config.Image,
        user: info.Config.User,
        agentPath: labels[PROVIDER_LABELS.agentPath] ?? opts.agentPath,
        labels,
        state: info.State,
      }
      return { id: info.Id, labels, native }
    },

    async revive(ref, { state }) {
      if (state && (!state.Running || state.Paused)) {
        throw new AppError(
          'SANDBOX_LOST',
          `sandbox ${ref.id} is not running (${stoppedState(state.Status, state.ExitCode)}); destroy it and create a new sandbox`,
        )
      }
      // Another process made it (or this one restarted): take over its proxy socket.
      await egress.takeOver(ref.id, ref.labels ?? {})
    },
  }
}
