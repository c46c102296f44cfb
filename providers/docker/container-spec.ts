import type Docker from 'dockerode'
import {
  type Labels,
  PROVIDER_LABELS,
  type ResolvedProfile,
  SANDBOX_CA_BUNDLE_FILE,
  SANDBOX_CA_FILE,
  secretPlaceholder,
} from '../../src/sandbox/index.js'
import { DIRECT_MOUNT } from './direct-channel.js'
import type { ResolvedDockerProviderOptions } from './options.js'

/** Where a container's agent comes from: the image (`path` only) or the agent volume mounted read-only at `dir`. */
export interface AgentSource {
  /** The agent's path inside the container. */
  path: string
  /** The engine volume holding the agent, mounted read-only at `dir`. */
  volume?: { name: string; dir: string }
}
/** What a container gets from outside its image and profile. */
export interface ContainerHostParts {
  /** The host folder of its egress proxy socket (egress-allowlist profiles). */
  egressHostDir?: string
  /** A persistent workspace: this engine volume is mounted at /workspace instead of a tmpfs. */
  workspaceVolume?: string
  /** The host folder of its direct agent channel, mounted read-only at DIRECT_MOUNT. */
  directHostDir?: string
}

/** Inside the sandbox: the port the agent forwards to the proxy, and where the socket is mounted. */
export const EGRESS_PORT = 3128
const EGRESS_MOUNT = '/run/sbx-egress'

const MiB = 1024 * 1024
/** Exit code of a container whose agent ended it after `idleTtlMs` + `idleExitSlackMs` with nothing attached. */
export const IDLE_EXIT_CODE = 75

/** The writable workspace: a tmpfs mounted over the image's /workspace. */
export const WORKSPACE = '/workspace'

function under(path: string, dir: string): boolean {
  return path === dir || path.startsWith(`${dir}/`)
}

/** `uid=1000,gid=1000,mode=0755` for a numeric `uid:gid` user, else a world-writable mode. */
function ownerOptions(user: string): string {
  const m = /^(\d+)(?::(\d+))?$/.exec(user)
  if (!m) return 'mode=1777'
  return `uid=${m[1]},gid=${m[2] ?? m[1]},mode=0755`
}

/**
 * Host tasks a runsc sandbox holds per process allowed inside it. gVisor's ptrace platform backs
 * every address space inside the sandbox with a host stub process traced by each of the sentry's
 * threads, and the engine's pids cgroup counts them all: an idle sandbox holds about 40, a dozen
 * concurrent commands several hundred, and past the cgroup limit the sentry panics (the sandbox
 * ends) instead of failing the fork inside.
 */
export const RUNSC_HOST_TASKS_PER_PROCESS = 64

/** The engine's pids limit: the profile's `pidsLimit`, scaled for runsc's host tasks. */
export function hostPidsLimit(profile: ResolvedProfile): number {
  return profile.runtime === 'runsc' ? profile.pidsLimit * RUNSC_HOST_TASKS_PER_PROCESS : profile.pidsLimit
}

/**
 * The hardened container for a profile: no network (unless the profile opts into `bridge`), all
 * capabilities dropped, no-new-privileges, pids/memory/cpu limits, a read-only root with tmpfs
 * mounts for the workspace (`diskMb`) and /tmp (`tmpMb`), a non-root user, and the agent as the
 * main process, under the profile's `runtime` (runc, or gVisor's runsc). The memory limit is
 * `memoryMb` plus the tmpfs sizes. The image's own ENTRYPOINT, CMD, WORKDIR and USER are overridden
 * (the agent's `--init`, `/`, the profile's `user`), so any image works; its ENV is kept under the
 * profile's `env`.
 */
export function buildContainerSpec(
  profile: ResolvedProfile,
  image: string,
  labels: Labels,
  options: ResolvedDockerProviderOptions,
  agent: AgentSource = { path: options.agentPath },
  host: ContainerHostParts = {},
): Docker.ContainerCreateOptions {
  const { egressHostDir, workspaceVolume, directHostDir } = host
  const egress = typeof profile.network === 'object' ? profile.network : undefined
  const env = { ...profile.env }
  const cmd = ['--init', '--idle-exit-ms', String(profile.idleTtlMs + options.idleExitSlackMs)]
  if (egress) {
    if (!egressHostDir) throw new Error('an egress-allowlist profile needs the proxy socket folder')
    const proxy = `http://127.0.0.1:${EGRESS_PORT}`
    Object.assign(env, {
      HTTP_PROXY: proxy,
      HTTPS_PROXY: proxy,
      http_proxy: proxy,
      https_proxy: proxy,
      NO_PROXY: '',
      no_proxy: '',
    })
    for (const name of Object.keys(egress.secrets)) env[name] = secretPlaceholder(name)
    if (egress.tlsIntercept) {
      // The sandbox's own CA (in its egress folder, read-only): curl/OpenSSL, Python, Node, git.
      const bundle = `${EGRESS_MOUNT}/${SANDBOX_CA_BUNDLE_FILE}`
      Object.assign(env, {
        SSL_CERT_FILE: bundle,
        CURL_CA_BUNDLE: bundle,
        REQUESTS_CA_BUNDLE: bundle,
        GIT_SSL_CAINFO: bundle,
        NODE_EXTRA_CA_CERTS: `${EGRESS_MOUNT}/${SANDBOX_CA_FILE}`,
      })
    }
    cmd.push('--egress-forward', String(EGRESS_PORT), `${EGRESS_MOUNT}/proxy.sock`)
  }
  const tmpMb = profile.tmpMb ?? options.tmpSizeMb
  const tmpfs: Record<string, string> = { '/tmp': `rw,nosuid,nodev,exec,size=${tmpMb}m,mode=1777` }
  let diskMb = tmpMb
  // A volume's pages are the host disk's, not tmpfs memory: only a tmpfs workspace adds to the limit.
  if (!workspaceVolume) {
    tmpfs[WORKSPACE] = `rw,nosuid,nodev,exec,size=${profile.diskMb}m,${ownerOptions(profile.user)}`
    diskMb += profile.diskMb
  }
  // A working directory outside the writable mounts gets a tmpfs of its own.
  if (!under(profile.cwd, WORKSPACE) && !under(profile.cwd, '/tmp')) {
    tmpfs[profile.cwd] = `rw,nosuid,nodev,exec,size=${profile.diskMb}m,${ownerOptions(profile.user)}`
    diskMb += profile.diskMb
  }
  // tmpfs pages are charged to the container's memory cgroup: the limit holds the processes'
  // memoryMb plus every tmpfs at its full size, so a full disk ends in ENOSPC (the size= bound)
  // rather than an out-of-memory kill, and filling the disk leaves the processes their memory.
  const memory = (profile.memoryMb + diskMb) * MiB
  const binds = [
    ...(egress ? [`${egressHostDir}:${EGRESS_MOUNT}:ro`] : []),
    ...(directHostDir ? [`${directHostDir}:${DIRECT_MOUNT}:ro`] : []),
  ]
  const mounts: Docker.MountSettings[] = [
    ...(agent.volume
      ? [{ Type: 'volume' as const, Source: agent.volume.name, Target: agent.volume.dir, ReadOnly: true }]
      : []),
    // NoCopy: like the tmpfs it replaces, the workspace takes nothing from the image's /workspace.
    ...(workspaceVolume
      ? [
          {
            Type: 'volume' as const,
            Source: workspaceVolume,
            Target: WORKSPACE,
            VolumeOptions: { NoCopy: true } as Docker.MountSettings['VolumeOptions'],
          },
        ]
      : []),
  ]
  return {
    Image: image,
    // An agent older than --idle-exit-ms ignores it (and the container lives until destroyed).
    Entrypoint: [agent.path],
    // With an egress allowlist the agent also forwards 127.0.0.1:EGRESS_PORT to the proxy's socket.
    Cmd: cmd,
    User: profile.user,
    // `/` rather than the cwd: a cwd below the workspace tmpfs does not exist until created.
    WorkingDir: '/',
    Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
    Labels: {
      ...labels,
      [PROVIDER_LABELS.agentPath]: agent.path,
      [PROVIDER_LABELS.memoryBytes]: String(memory),
    },
    Hostname: 'sandbox',
    NetworkDisabled: profile.network === 'none',
    HostConfig: {
      NetworkMode: profile.network === 'bridge' ? 'bridge' : 'none',
      // An allowlist sandbox has no network either: its only way out is the proxy socket. The
      // direct channel's folder is read-only: the sandbox connects to our socket, never writes there.
      ...(binds.length > 0 ? { Binds: binds } : {}),
      // runsc (gVisor) is an engine runtime registered by scripts/setup-gvisor.sh.
      Runtime: profile.runtime,
      CapDrop: ['ALL'],
      SecurityOpt: ['no-new-privileges'],
      PidsLimit: hostPidsLimit(profile),
      // Inside gVisor RLIMIT_NPROC counts the sandbox's own kernel's processes only: it is what stops
      // a fork bomb there (failing the fork) before the host pids limit above would end the sandbox.
      // Not under runc, where it would count every host process of the same uid.
      ...(profile.runtime === 'runsc'
        ? { Ulimits: [{ Name: 'nproc', Soft: profile.pidsLimit, Hard: profile.pidsLimit }] }
        : {}),
      Memory: memory,
      MemorySwap: memory,
      NanoCpus: Math.round(profile.cpu * 1e9),
      ReadonlyRootfs: profile.readOnlyRoot,
      Tmpfs: tmpfs,
      ...(mounts.length > 0 ? { Mounts: mounts } : {}),
      Init: false,
      AutoRemove: false,
      RestartPolicy: { Name: 'no' },
      LogConfig: { Type: 'none', Config: {} },
    },
  }
}

/** Whether the profile's cwd must be created after start (it lies below a tmpfs mount point). */
export function cwdNeedsMkdir(profile: ResolvedProfile): boolean {
  return (
    profile.cwd !== WORKSPACE &&
    profile.cwd !== '/tmp' &&
    (under(profile.cwd, WORKSPACE) || under(profile.cwd, '/tmp'))
  )
}
