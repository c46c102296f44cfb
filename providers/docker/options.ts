import type Docker from 'dockerode'
import { z } from 'zod'
import type { EgressProxy } from '../../src/sandbox/index.js'

/**
 * The image `scripts/setup.sh` builds: `SBX_BASE_IMAGE` when set (the same variable names the tag
 * setup.sh builds, so a checkout can build and use its own), else `sandbox-router/base:latest`.
 */
export const DEFAULT_IMAGE = process.env['SBX_BASE_IMAGE'] || 'sandbox-router/base:latest'

/** Scalar options of the Docker provider, parsed once by {@link createDockerProvider}. */
export const DockerProviderOptionsSchema = z
  .object({
    /** Image used when a profile names none. @default `SBX_BASE_IMAGE`, else 'sandbox-router/base:latest' */
    defaultImage: z.string().min(1).default(DEFAULT_IMAGE),
    /**
     * The static agent binary on this machine that the provider brings into every container (a
     * read-only volume, see providers/docker/agent-volume.ts), so a profile's `image` may be any
     * image. `false`: use the agent the image carries at `agentPath` (images built FROM
     * sandbox-router/base). @default `SBX_AGENT_BIN`, else `.sbx/sbx-agent` (scripts/setup.sh
     * compiles it) when it exists, else `false`
     */
    agentBinary: z.union([z.string().min(1), z.literal(false)]).optional(),
    /** Path of the agent binary inside images that carry one (used when there is no `agentBinary`). @default '/usr/local/bin/sbx-agent' */
    agentPath: z.string().startsWith('/').default('/usr/local/bin/sbx-agent'),
    /** Value of the instance label (`LABELS.instance`) on created containers (diagnostics). */
    instanceId: z.string().min(1).optional(),
    /** How long to wait for the agent to announce itself (ms). @default 10000 */
    helloTimeoutMs: z.number().int().positive().default(10_000),
    /** Past a command's timeout, how long to wait for the agent's report before giving up (ms). @default 5000 */
    watchdogMs: z.number().int().positive().default(5_000),
    /** Timeout of the agent round trip in `health()` (ms). @default 2000 */
    pingTimeoutMs: z.number().int().positive().default(2_000),
    /** A file operation (one chunk) unanswered this long fails with SANDBOX_TIMEOUT (ms). @default 60000 */
    fileOpTimeoutMs: z.number().int().positive().default(60_000),
    /** Largest file `readFile` returns (bytes). @default 268435456 */
    maxReadFileBytes: z
      .number()
      .int()
      .positive()
      .default(256 * 1024 * 1024),
    /** Size of the `/tmp` tmpfs (MiB) for profiles without `tmpMb`; added to the memory limit. @default 256 */
    tmpSizeMb: z.number().int().positive().default(256),
    /**
     * A sandbox with nothing attached (no agent channel, so no command) for its profile's
     * `idleTtlMs` plus this much ends itself: its main process exits and the container stops, so a
     * fleet that died (workers and Redis gone) leaves no running container behind (ms).
     * At least 1000: the agent looks about once a second. @default 60000
     */
    idleExitSlackMs: z.number().int().min(1_000).default(60_000),
    /**
     * Host folder for the direct agent channel (providers/docker/direct-channel.ts): each sandbox
     * gets a sub-folder, bind-mounted read-only, in which the provider offers the agent a Unix
     * socket, so commands and output skip the engine's relay. Used only where the engine is on this
     * machine (a local socket, and the engine names itself as this host does); elsewhere, or
     * `false`, channels stay on the `docker exec` pipes. @default `<tmpdir>/sbx-agent-<uid>`
     */
    agentSocketDir: z.union([z.string().startsWith('/'), z.literal(false)]).optional(),
  })
  .strict()

/** Options of {@link createDockerProvider}. */
export type DockerProviderOptions = z.input<typeof DockerProviderOptionsSchema> & {
  /** An existing dockerode client; otherwise one is made from `dockerOptions`. */
  docker?: Docker
  /** dockerode options (socketPath, host, port, ...); by default dockerode's own (DOCKER_HOST or the local socket). */
  dockerOptions?: Docker.DockerOptions
  /** The egress proxy for profiles with `network: { allow }`; without it such a profile cannot start. */
  egress?: DockerEgressOptions
}

/** Where the Docker provider's egress-allowlist sandboxes get their proxy. */
export interface DockerEgressOptions {
  proxy: EgressProxy
  /** Host folder holding one sub-folder (with the proxy's socket) per sandbox; on the engine's machine. */
  socketDir: string
  /** Per tenant, the egress rules no profile can widen (a tenant not listed has no cap). */
  tenantCaps?: Readonly<Record<string, readonly string[]>>
}

/** Parsed scalar options. */
export type ResolvedDockerProviderOptions = z.output<typeof DockerProviderOptionsSchema>
