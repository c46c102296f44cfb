import { randomUUID } from 'node:crypto'
import { chmod, chown, mkdir, rm } from 'node:fs/promises'
import { join } from 'node:path'
import Docker from 'dockerode'
import { type EgressPolicy, EgressPolicySchema } from '../../src/egress/policy.js'
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
  AGENT_DIR,
  INJECTED_AGENT_PATH,
  defaultAgentBinary,
  ensureAgentVolume,
  readAgentBinary,
} from './agent-volume.js'
import { type AgentSource, WORKSPACE, buildContainerSpec, cwdNeedsMkdir } from './container-spec.js'
import {
  AgentVolumeEmptyError,
  engineName,
  engineStatus,
  mapCreateError,
  mapEngineError,
  mapStartError,
  stoppedState,
} from './errors.js'
import { type DockerProviderOptions, DockerProviderOptionsSchema } from './options.js'
import { engineRuntimes, missingRuntimeError } from './runtimes.js'
import { readSandboxCa, removeSandboxCa, writeSandboxCa } from './egress-ca.js'
import { DockerSandbox, type DockerSandboxSettings } from './sandbox.js'
import { dockerSnapshots } from './snapshots.js'
import { ensureWorkspaceVolume } from './workspace.js'
import { assertProfileFor, assertRefFor } from '../../src/sandbox/define-provider.js'
import { PROVIDER_LABELS, isOwned, ownedLabels, ownerFilter, settingsOf } from '../../src/sandbox/labels.js'

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
 * Creates the local Docker provider (id `docker`): hardened containers from any image the engine
 * has (default `sandbox-router/base`) with the provider's own agent mounted in, one long-lived
 * agent channel per handle, refs reconnectable from any process that reaches the same engine.
 */
export function createDockerProvider(options: DockerProviderOptions = {}): DockerProvider {
  const { docker: client, dockerOptions, egress, ...scalars } = options
  const opts = DockerProviderOptionsSchema.parse(scalars)
  const docker = client ?? new Docker(dockerOptions)
  const handles = new Set<DockerSandbox>()
  const engine = engineName(docker)
  const agentBinary = opts.agentBinary === false ? undefined : (opts.agentBinary ?? defaultAgentBinary())
  /** The agent volume, made ready once per provider (again after a failure). */
  let agentReady: Promise<AgentSource> | undefined

  /** Where the agent of a new container comes from: the agent volume, or the image without a binary. */
  const agentSource = (image: string): Promise<AgentSource> => {
    if (!agentBinary) return Promise.resolve({ path: opts.agentPath })
    agentReady ??= (async () => {
      const agent = readAgentBinary(agentBinary)
      await ensureAgentVolume(docker, agent, image)
      return { path: INJECTED_AGENT_PATH, volume: { name: agent.volume, dir: AGENT_DIR } }
    })()
    const ready = agentReady
    ready.catch(() => {
      if (agentReady === ready) agentReady = undefined
    })
    return ready
  }

  const handle = (
    ref: SandboxRef,
    settings: Pick<DockerSandboxSettings, 'cwd' | 'user' | 'maxConcurrentExecs' | 'agentPath'>,
  ): DockerSandbox => {
    const sandbox = new DockerSandbox(docker, ref, { ...opts, ...settings }, (closed) =>
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

  const egressSocket = (dir: string): string => join(egress?.socketDir ?? '', dir, 'proxy.sock')

  /** Starts (or takes over) the proxy listener of an egress-allowlist sandbox. */
  async function listenEgress(id: string, labels: Labels, policy: EgressPolicy): Promise<void> {
    const dir = labels[PROVIDER_LABELS.egressDir]
    if (!egress || !dir) return
    const tenant = labels[LABELS.tenant] ?? ''
    const cap = egress.tenantCaps?.[tenant]
    const ca = policy.tlsIntercept ? await readSandboxCa(egress.socketDir, dir) : undefined
    await egress.proxy.listen(egressSocket(dir), {
      tenant,
      session: labels[LABELS.session] ?? '',
      sandboxId: id,
      policy,
      ...(cap ? { cap } : {}),
      ...(ca ? { ca } : {}),
    })
  }

  async function dropEgress(labels: Labels | undefined): Promise<void> {
    const dir = labels?.[PROVIDER_LABELS.egressDir]
    if (!egress || !dir) return
    await egress.proxy.close(egressSocket(dir))
    await rm(join(egress.socketDir, dir), { recursive: true, force: true })
    await removeSandboxCa(egress.socketDir, dir)
  }

  async function create(profile: ResolvedProfile, options: CreateOptions): Promise<Sandbox> {
    try {
      return await createOnce(profile, options)
    } catch (err) {
      // The agent volume went away under us (`docker volume prune` between sandboxes): the engine
      // made an empty one for the mount. Fill it again and try once more.
      if (!(err instanceof AgentVolumeEmptyError)) throw err
      agentReady = undefined
      return createOnce(profile, options)
    }
  }

  async function createOnce(profile: ResolvedProfile, { labels, signal }: CreateOptions): Promise<Sandbox> {
    assertProfileFor(DOCKER_PROVIDER_ID, profile)
    signal?.throwIfAborted()
    const allLabels = ownedLabels(labels, profile, opts.instanceId)
    // A persistent workspace: the session's volume (made from a snapshot: its image too).
    const workspace = profile.workspace.persistent
      ? await ensureWorkspaceVolume(docker, allLabels, { helperImage: opts.defaultImage, user: profile.user })
      : undefined
    const image = workspace?.image ?? profile.image ?? opts.defaultImage
    const policy = typeof profile.network === 'object' ? profile.network : undefined
    let egressHostDir: string | undefined
    if (policy) {
      if (!egress)
        throw new AppError(
          'CONFIG_INVALID',
          `profile '${profile.name}' has an egress allowlist but this Docker provider has no egress proxy; run it through the service (sbx serve / sbx worker), which starts one`,
        )
      const dir = randomUUID()
      egressHostDir = join(egress.socketDir, dir)
      await mkdir(egress.socketDir, { recursive: true, mode: 0o711 })
      await mkdir(egressHostDir, { mode: 0o700 })
      // Only the sandbox's user may enter its folder (other host users cannot borrow its egress or
      // secrets); a service that may not chown (not root) leaves the folder open to all.
      const owner = /^(\d+)(?::(\d+))?$/.exec(profile.user)
      const dirPath = egressHostDir
      const chowned = owner
        ? await chown(dirPath, Number(owner[1]), Number(owner[2] ?? owner[1])).then(
            () => true,
            () => false,
          )
        : false
      // The folder's name is a random UUID: without chown, others may pass through but not list it.
      if (!chowned) await chmod(dirPath, 0o711)
      allLabels[PROVIDER_LABELS.egressDir] = dir
      allLabels[PROVIDER_LABELS.egressPolicy] = JSON.stringify(policy)
      if (policy.tlsIntercept) await writeSandboxCa(egress.socketDir, dir)
    }
    let id: string
    let agent: AgentSource
    try {
      agent = await agentSource(image)
      // No abort signal on the create call itself: an aborted request could still leave a container.
      id = (
        await docker.createContainer(
          buildContainerSpec(profile, image, allLabels, opts, agent, egressHostDir, workspace?.name),
        )
      ).id
    } catch (err) {
      await dropEgress(allLabels)
      // The engine refuses an unregistered runtime with a 400; say which one and how to install it.
      if (engineStatus(err) === 400 && profile.runtime !== 'runc') {
        const offered = await engineRuntimes(docker).catch(() => undefined)
        if (offered && !offered.includes(profile.runtime))
          throw missingRuntimeError(profile.name, profile.runtime, offered, err)
      }
      throw mapCreateError(err, image, engine)
    }
    const ref: SandboxRef = { providerId: DOCKER_PROVIDER_ID, id, profile: profile.name, labels: allLabels }
    let sandbox: DockerSandbox | undefined
    try {
      signal?.throwIfAborted()
      // The proxy listens before the sandbox runs anything.
      if (policy) await listenEgress(id, allLabels, policy)
      await docker
        .getContainer(id)
        .start()
        .catch((err: unknown) => {
          throw mapStartError(err, image, agent.path, agent.volume?.name)
        })
      sandbox = handle(ref, {
        cwd: profile.cwd,
        user: profile.user,
        maxConcurrentExecs: profile.maxConcurrentExecs,
        agentPath: agent.path,
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
      await dropEgress(allLabels)
      if (signal?.aborted) throw signal.reason
      if (err instanceof AgentVolumeEmptyError) throw err
      if (err instanceof AppError && err.code !== 'SANDBOX_LOST') throw err
      const mapped = err instanceof AppError ? err : mapCreateError(err, image, engine)
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
    if (!isOwned(labels)) {
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
    const policyText = labels[PROVIDER_LABELS.egressPolicy]
    const egressDir = labels[PROVIDER_LABELS.egressDir]
    if (policyText !== undefined && egressDir && !egress?.proxy.has(egressSocket(egressDir))) {
      // Another process made it (or this one restarted): take over its proxy socket.
      await listenEgress(info.Id, labels, EgressPolicySchema.parse(JSON.parse(policyText)))
    }
    const sandbox = handle(
      { providerId: DOCKER_PROVIDER_ID, id: info.Id, profile: labels[LABELS.profile] ?? ref.profile, labels },
      {
        ...settingsOf(labels, WORKSPACE),
        user: info.Config.User,
        agentPath: labels[PROVIDER_LABELS.agentPath] ?? opts.agentPath,
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
    const labels = ownerFilter(filter.labels)
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
      await dropEgress(ref.labels)
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

  /** The engine's pause / unpause; 404 is NOT_FOUND, 409 (already in that state) is fine. */
  async function freeze(ref: SandboxRef, paused: boolean): Promise<void> {
    const c = docker.getContainer(ref.id)
    try {
      await (paused ? c.pause() : c.unpause())
    } catch (err) {
      const status = engineStatus(err)
      if (status === 404) throw new AppError('NOT_FOUND', `sandbox ${ref.id} is gone`, { cause: err })
      if (status === 409) {
        const state = await c.inspect().then(
          (i) => i.State,
          () => undefined,
        )
        if (state?.Running && state.Paused === paused) return
      }
      throw mapEngineError(err, `${paused ? 'pausing' : 'resuming'} sandbox ${ref.id}`)
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
    id: DOCKER_PROVIDER_ID,
    persistentShells: true,
    snapshots,
    workspaces,
    docker,
    runtimes: () => engineRuntimes(docker),
    create,
    connect,
    list,
    destroy,
    pause: (ref: SandboxRef) => freeze(ref, true),
    resume: (ref: SandboxRef) => freeze(ref, false),
    health,
    close,
  }
}
