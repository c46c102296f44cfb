import Docker from 'dockerode'
import { AppError } from '../../src/errors.js'
import type { ResolvedProfile } from '../../src/sandbox/profiles.js'
import {
  type CreateOptions,
  LABELS,
  type Labels,
  type Sandbox,
  type SandboxHealth,
  type SandboxProvider,
  type SandboxRef,
} from '../../src/sandbox/types.js'
import {
  CWD_LABEL,
  MAX_EXECS_LABEL,
  OWNER,
  WORKSPACE,
  buildContainerSpec,
  cwdNeedsMkdir,
} from './container-spec.js'
import { engineStatus, mapCreateError, mapEngineError, stoppedState } from './errors.js'
import { type DockerProviderOptions, DockerProviderOptionsSchema } from './options.js'
import { engineRuntimes, missingRuntimeError } from './runtimes.js'
import { DockerSandbox, type DockerSandboxSettings } from './sandbox.js'
import { assertProfileFor, assertRefFor, ownedLabels } from '../../src/sandbox/provider-kit.js'

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

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * Creates the local Docker provider (id `docker`): hardened containers from
 * `sandbox-router/base`, one long-lived agent channel per handle, refs reconnectable from any
 * process that reaches the same engine.
 */
export function createDockerProvider(options: DockerProviderOptions = {}): DockerProvider {
  const { docker: client, dockerOptions, ...scalars } = options
  const opts = DockerProviderOptionsSchema.parse(scalars)
  const docker = client ?? new Docker(dockerOptions)
  const handles = new Set<DockerSandbox>()

  const handle = (
    ref: SandboxRef,
    settings: Pick<DockerSandboxSettings, 'cwd' | 'user' | 'maxConcurrentExecs'>,
  ): DockerSandbox => {
    const sandbox = new DockerSandbox(docker, ref, { ...settings, ...opts }, (closed) =>
      handles.delete(closed),
    )
    handles.add(sandbox)
    return sandbox
  }

  const removeQuietly = async (id: string): Promise<void> => {
    await docker
      .getContainer(id)
      .remove({ force: true, v: true })
      .catch(() => undefined)
  }

  async function create(profile: ResolvedProfile, { labels, signal }: CreateOptions): Promise<Sandbox> {
    assertProfileFor(DOCKER_PROVIDER_ID, profile)
    signal?.throwIfAborted()
    const image = profile.image ?? opts.defaultImage
    const allLabels = ownedLabels(labels, profile, opts.instanceId)
    let id: string
    try {
      // No abort signal on the create call itself: an aborted request could still leave a container.
      id = (await docker.createContainer(buildContainerSpec(profile, image, allLabels, opts))).id
    } catch (err) {
      // The engine refuses an unregistered runtime with a 400; say which one and how to install it.
      if (engineStatus(err) === 400 && profile.runtime !== 'runc') {
        const offered = await engineRuntimes(docker).catch(() => undefined)
        if (offered && !offered.includes(profile.runtime))
          throw missingRuntimeError(profile.name, profile.runtime, offered, err)
      }
      throw mapCreateError(err, image)
    }
    const ref: SandboxRef = { providerId: DOCKER_PROVIDER_ID, id, profile: profile.name, labels: allLabels }
    let sandbox: DockerSandbox | undefined
    try {
      signal?.throwIfAborted()
      await docker.getContainer(id).start()
      sandbox = handle(ref, {
        cwd: profile.cwd,
        user: profile.user,
        maxConcurrentExecs: profile.maxConcurrentExecs,
      })
      await sandbox.open(signal, false)
      if (cwdNeedsMkdir(profile)) {
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
      }
      signal?.throwIfAborted()
      return sandbox
    } catch (err) {
      await sandbox?.close()
      await removeQuietly(id)
      if (signal?.aborted) throw signal.reason
      if (err instanceof AppError && err.code !== 'SANDBOX_LOST') throw err
      const mapped = err instanceof AppError ? err : mapCreateError(err, image)
      throw new AppError(
        'SANDBOX_CREATE_FAILED',
        `starting sandbox from ${image} failed: ${mapped.message}`,
        {
          retryable: mapped.retryable,
          cause: err,
        },
      )
    }
  }

  async function connect(ref: SandboxRef, { signal }: { signal?: AbortSignal } = {}): Promise<Sandbox> {
    assertRefFor(DOCKER_PROVIDER_ID, ref)
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
    if (labels[LABELS.owner] !== OWNER) {
      throw new AppError(
        'BAD_REQUEST',
        `container ${ref.id} is not a sandbox-router sandbox (no ${LABELS.owner} label)`,
      )
    }
    if (!info.State.Running || info.State.Paused) {
      throw new AppError(
        'SANDBOX_LOST',
        `sandbox ${ref.id} is not running (${stoppedState(info.State.Status, info.State.ExitCode)}); destroy it and create a new sandbox`,
      )
    }
    const maxExecs = Number(labels[MAX_EXECS_LABEL])
    const sandbox = handle(
      { providerId: DOCKER_PROVIDER_ID, id: info.Id, profile: labels[LABELS.profile] ?? ref.profile, labels },
      {
        cwd: labels[CWD_LABEL] ?? WORKSPACE,
        user: info.Config.User,
        maxConcurrentExecs: Number.isInteger(maxExecs) && maxExecs > 0 ? maxExecs : 8,
      },
    )
    try {
      await sandbox.open(signal, false)
    } catch (err) {
      await sandbox.close()
      throw err
    }
    return sandbox
  }

  async function list(filter: { labels: Labels }): Promise<SandboxRef[]> {
    const labels = { ...filter.labels, [LABELS.owner]: OWNER }
    try {
      const containers = await docker.listContainers({
        all: true,
        filters: { label: Object.entries(labels).map(([k, v]) => `${k}=${v}`) },
      })
      return containers.map((c) => ({
        providerId: DOCKER_PROVIDER_ID,
        id: c.Id,
        profile: c.Labels[LABELS.profile] ?? '',
        labels: c.Labels,
      }))
    } catch (err) {
      throw mapEngineError(err, 'listing sandboxes')
    }
  }

  async function destroy(ref: SandboxRef): Promise<void> {
    try {
      await docker.getContainer(ref.id).remove({ force: true, v: true })
      for (const h of handles) if (h.ref.id === ref.id) h.containerRemoved()
    } catch (err) {
      const status = engineStatus(err)
      if (status === 404) return
      // 409: a removal is already in progress; wait for it so callers see the sandbox gone.
      if (status !== 409) throw mapEngineError(err, `destroying sandbox ${ref.id}`)
      const deadline = Date.now() + 30_000
      while (Date.now() < deadline) {
        const gone = await docker
          .getContainer(ref.id)
          .inspect()
          .then(
            () => false,
            (e: unknown) => engineStatus(e) === 404,
          )
        if (gone) return
        await new Promise((r) => setTimeout(r, 100))
      }
      throw new AppError(
        'UNAVAILABLE',
        `sandbox ${ref.id} is still being removed after 30 s; retry destroy`,
        {
          retryable: true,
        },
      )
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

  return {
    id: DOCKER_PROVIDER_ID,
    persistentShells: true,
    docker,
    runtimes: () => engineRuntimes(docker),
    create,
    connect,
    list,
    destroy,
    health,
    close,
  }
}
