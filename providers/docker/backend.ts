import type Docker from 'dockerode'
import { AppError } from '../../src/errors.js'
import type { ProviderBackend } from '../../src/sandbox/define-provider.js'
import { PROVIDER_LABELS } from '../../src/sandbox/labels.js'
import type { AgentSupply } from './agent-source.js'
import { WORKSPACE, buildContainerSpec, cwdNeedsMkdir } from './container-spec.js'
import { type EgressHost, egressPolicyOf } from './egress-host.js'
import {
  AgentVolumeEmptyError,
  engineName,
  engineStatus,
  mapCreateError,
  mapEngineError,
  mapStartError,
  stoppedState,
} from './errors.js'
import { removalFailed } from './lifecycle.js'
import type { ResolvedDockerProviderOptions } from './options.js'
import { engineRuntimes, missingRuntimeError } from './runtimes.js'
import { DockerSandbox } from './sandbox.js'
import { ensureWorkspaceVolume } from './workspace.js'

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
  /** The engine's state of it, as `connect` found it. */
  state?: Docker.ContainerInspectInfo['State']
}

/** What the backend shares with its provider. */
export interface DockerBackendDeps {
  docker: Docker
  opts: ResolvedDockerProviderOptions
  agent: AgentSupply
  egress: EgressHost
  /** The open handles (each removes itself on close). */
  handles: Set<DockerSandbox>
}

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * The Docker backend of `defineProvider`: hardened containers made stopped, then started behind
 * their egress proxy (`start`); a persistent workspace is the session's volume; the agent comes
 * from the agent volume. `connect` refuses a container that is not running and takes over the
 * proxy of one another process made.
 */
export function dockerBackend(deps: DockerBackendDeps): ProviderBackend<DockerContainer, DockerSandbox> {
  const { docker, opts, agent, egress, handles } = deps
  const engine = engineName(docker)

  return {
    describe: (id) => `container ${id}`,
    defaultCwd: WORKSPACE,
    createLabels(profile) {
      const policy = egressPolicyOf(profile)
      return policy ? egress.labels(policy) : {}
    },

    async create(profile, labels) {
      // A persistent workspace: the session's volume (made from a snapshot: its image too).
      const workspace = profile.workspace.persistent
        ? await ensureWorkspaceVolume(docker, labels, { helperImage: opts.defaultImage, user: profile.user })
        : undefined
      const image = workspace?.image ?? profile.image ?? opts.defaultImage
      const policy = egressPolicyOf(profile)
      const egressHostDir = policy ? await egress.makeFolder(profile, labels, policy) : undefined
      try {
        const source = await agent.source(image)
        // No abort signal on the create call itself: an aborted request could still leave a container.
        const spec = buildContainerSpec(profile, image, labels, opts, source, egressHostDir, workspace?.name)
        const { id } = await docker.createContainer(spec)
        return {
          id,
          native: { image, user: profile.user, agentPath: source.path, agentVolume: source.volume?.name },
        }
      } catch (err) {
        await egress.drop(labels)
        // The engine refuses an unregistered runtime with a 400; say which one and how to install it.
        if (engineStatus(err) === 400 && profile.runtime !== 'runc') {
          const offered = await engineRuntimes(docker).catch(() => undefined)
          if (offered && !offered.includes(profile.runtime))
            throw missingRuntimeError(profile.name, profile.runtime, offered, err)
        }
        throw mapCreateError(err, image, engine)
      }
    },

    async start(ref, container, profile) {
      // The proxy listens before the sandbox runs anything.
      const policy = egressPolicyOf(profile)
      if (policy) await egress.listen(ref.id, ref.labels ?? {}, policy)
      await docker
        .getContainer(ref.id)
        .start()
        .catch((err: unknown) => {
          throw mapStartError(err, container.image, container.agentPath, container.agentVolume)
        })
    },

    async open(ref, container, settings, signal) {
      const sandbox = new DockerSandbox(
        docker,
        ref,
        { ...opts, ...settings, user: container.user, agentPath: container.agentPath },
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

    async prepare(sandbox, _container, profile, signal) {
      if (!cwdNeedsMkdir(profile)) return
      const r = await sandbox.exec(
        {
          command: `mkdir -p -- ${shellQuote(profile.cwd)}`,
          cwd: WORKSPACE,
          timeoutMs: 10_000,
          outputCapBytes: 4096,
        },
        { signal },
      )
      if (r.exitCode !== 0)
        throw new AppError('CONFIG_INVALID', `cannot create cwd ${profile.cwd}: ${r.stderr.trim()}`)
    },

    createFailed(err, { native: { image } }) {
      if (err instanceof AgentVolumeEmptyError) return err
      if (err instanceof AppError && err.code !== 'SANDBOX_LOST') return err
      const mapped = err instanceof AppError ? err : mapCreateError(err, image, engine)
      return new AppError(
        'SANDBOX_CREATE_FAILED',
        `starting sandbox from ${image} failed: ${mapped.message}`,
        {
          retryable: mapped.retryable,
          cause: err,
        },
      )
    },

    async discard(ref) {
      await docker
        .getContainer(ref.id)
        .remove({ force: true, v: true })
        .catch(() => undefined)
      await egress.drop(ref.labels)
    },

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
        for (const h of handles) if (h.ref.id === ref.id) h.containerRemoved()
      } catch (err) {
        await removalFailed(docker, ref, err)
      }
    },
  }
}
