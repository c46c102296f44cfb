import { AppError, type ProviderBackend } from '../../src/sandbox/index.js'
import type { DockerBackendDeps, DockerContainer } from './backend.js'
import { WORKSPACE, buildContainerSpec, cwdNeedsMkdir } from './container-spec.js'
import { egressPolicyOf } from './egress-host.js'
import { AgentVolumeEmptyError, engineName, engineStatus, mapCreateError, mapStartError } from './errors.js'
import { engineRuntimes, missingRuntimeError } from './runtimes.js'
import type { DockerSandbox } from './sandbox.js'
import { SEED_DIR, seedScript } from './tmpfs-snapshot.js'
import { ensureWorkspaceVolume, seedVolumeOf } from './workspace.js'

/** The create half of the Docker backend. */
export type DockerCreate = Pick<
  ProviderBackend<DockerContainer, DockerSandbox>,
  'createLabels' | 'create' | 'start' | 'prepare' | 'createFailed' | 'discard'
>

/** How long copying a snapshot's in-memory files into a new sandbox may take (ms). */
const SEED_TIMEOUT_MS = 120_000

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * How a Docker sandbox is made: its workspace volume (persistent profiles) and egress folder
 * first, the container made stopped with the agent volume mounted, then started once its egress
 * proxy listens; the profile's cwd is made in it. What a failed create left is removed.
 */
export function dockerCreate({ docker, opts, agent, egress, direct }: DockerBackendDeps): DockerCreate {
  const engine = engineName(docker)

  return {
    createLabels(profile) {
      const policy = egressPolicyOf(profile)
      return { ...direct.labels(), ...(policy ? egress.labels(policy) : {}) }
    },

    async create(profile, labels) {
      // A persistent workspace: the session's volume (made from a snapshot: its image too).
      const workspace = profile.workspace.persistent
        ? await ensureWorkspaceVolume(docker, labels, { helperImage: opts.defaultImage, user: profile.user })
        : undefined
      // Else a session started from a tmpfs snapshot has a seed: its image and in-memory files.
      const seed = workspace ? undefined : await seedVolumeOf(docker, labels)
      const image = workspace?.image ?? seed?.image ?? profile.image ?? opts.defaultImage
      const policy = egressPolicyOf(profile)
      const egressHostDir = policy ? await egress.makeFolder(profile, labels, policy) : undefined
      try {
        const source = await agent.source(image)
        // Only this build's agent (the volume's) speaks the direct channel; an image's own may be older.
        const directHostDir = source.volume ? await direct.makeFolder(labels, profile.user) : undefined
        // No abort signal on the create call itself: an aborted request could still leave a container.
        const spec = buildContainerSpec(profile, image, labels, opts, source, {
          egressHostDir,
          workspaceVolume: workspace?.name,
          directHostDir,
        })
        const seedPaths = seed ? Object.keys(spec.HostConfig?.Tmpfs ?? {}) : undefined
        if (seed)
          spec.HostConfig = {
            ...spec.HostConfig,
            Mounts: [
              ...(spec.HostConfig?.Mounts ?? []),
              { Type: 'volume', Source: seed.name, Target: SEED_DIR, ReadOnly: true },
            ],
          }
        const { id } = await docker.createContainer(spec)
        return {
          id,
          native: {
            image,
            user: profile.user,
            agentPath: source.path,
            agentVolume: source.volume?.name,
            labels,
            ...(seedPaths ? { seedPaths } : {}),
          },
        }
      } catch (err) {
        await egress.drop(labels)
        await direct.drop(labels)
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

    async prepare(sandbox, container, profile, signal) {
      if (container.seedPaths) {
        const r = await sandbox.exec(
          {
            command: seedScript(container.seedPaths),
            cwd: '/',
            timeoutMs: SEED_TIMEOUT_MS,
            outputCapBytes: 4096,
          },
          { signal },
        )
        if (r.exitCode !== 0)
          throw new AppError(
            'SANDBOX_CREATE_FAILED',
            `copying the snapshot's files into the new sandbox failed (exit code ${r.exitCode}): ${r.stderr.trim()}`,
          )
      }
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
      await direct.drop(ref.labels)
    },
  }
}
