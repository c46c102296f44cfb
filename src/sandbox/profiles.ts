import { z } from 'zod'
import { EgressPolicySchema } from '../egress/policy.js'
import { AppError } from '../errors.js'
import type { ProfileResolver } from './resolver.js'

/**
 * Container runtimes a profile may name: `runc` (the engine's default, a shared host kernel) and
 * `runsc` (gVisor).
 */
export const SANDBOX_RUNTIMES = ['runc', 'runsc'] as const
/** One of {@link SANDBOX_RUNTIMES}. */
export type SandboxRuntime = (typeof SANDBOX_RUNTIMES)[number]

/** Schema of one named sandbox profile, as written in config. */
export const ProfileSchema = z
  .object({
    /** Provider this profile targets (`docker`, `daytona`, `e2b`, or a third-party id). */
    provider: z.string().min(1),
    /** Docker image / Daytona image. @default 'sandbox-router/base:latest' for docker */
    image: z.string().min(1).optional(),
    /** Daytona snapshot name. */
    snapshot: z.string().min(1).optional(),
    /** E2B template id. */
    template: z.string().min(1).optional(),
    /** CPU cores (may be fractional for Docker). @default 1 */
    cpu: z.number().positive().max(64).default(1),
    /**
     * Memory of the sandbox's processes in MiB. The container's limit adds `diskMb` and `tmpMb`
     * (tmpfs pages are memory), so a full disk is `ENOSPC`, not an out-of-memory kill. @default 512
     */
    memoryMb: z.number().int().min(16).max(262_144).default(512),
    /** Size of the writable `/workspace` (and of a cwd outside it) in MiB. @default 512 */
    diskMb: z.number().int().min(1).max(1_048_576).default(512),
    /** Size of `/tmp` in MiB. @default the provider's `tmpSizeMb` (256 for Docker) */
    tmpMb: z.number().int().min(1).max(1_048_576).optional(),
    /**
     * Network access: `none` (default), `bridge` (an explicit opt-out of isolation), or an egress
     * allowlist `{ allow: [...], secrets?: {...}, tlsIntercept? }`: on Docker the service's egress
     * proxy, on Daytona and E2B their own network settings; what a provider cannot enforce is
     * refused at start-up (docs/egress.md).
     */
    network: z.union([z.enum(['none', 'bridge']), EgressPolicySchema]).default('none'),
    /**
     * Kernel boundary of a Docker sandbox: `runc` (the host kernel, namespaces and cgroups) or
     * `runsc` (gVisor: a user-space kernel between the sandbox and the host; needs the engine
     * runtime `scripts/setup-gvisor.sh` registers, and `network: none`). Other providers take only
     * `runc` (their own isolation). @default 'runc'
     */
    runtime: z.enum(SANDBOX_RUNTIMES).default('runc'),
    /** Max processes inside the sandbox. @default 256 */
    pidsLimit: z.number().int().min(8).max(65_536).default(256),
    /** Environment variables for every command. */
    env: z.record(z.string(), z.string()).default({}),
    /** Working directory of commands. @default '/workspace' */
    cwd: z.string().startsWith('/').default('/workspace'),
    /** Timeout applied when a call gives none (ms). @default 60000 */
    defaultTimeoutMs: z.number().int().positive().default(60_000),
    /** Upper bound for a call's timeout (ms). @default 600000 */
    maxTimeoutMs: z.number().int().positive().default(600_000),
    /** Per-stream output cap (bytes). @default 1048576 */
    outputCapBytes: z.number().int().positive().default(1_048_576),
    /**
     * Shell of calls that name none: `persistent` (the sandbox's long-lived shell keeps cwd,
     * variables, functions) or `fresh` (a new `bash -c` per command). @default unset: tool calls
     * (`/v1/tool-calls`, MCP `bash`, the agent's shell tool) use `persistent` where the provider has
     * it, `/v1/exec` uses `fresh`
     */
    shell: z.enum(['persistent', 'fresh']).optional(),
    /** Max commands running at once in one sandbox. @default 8 */
    maxConcurrentExecs: z.number().int().positive().default(8),
    pool: z
      .object({
        /** Warm pool: unbound sandboxes kept ready for new sessions, fleet-wide. @default 0 */
        minIdle: z.number().int().min(0).default(0),
        /**
         * Profile cap: sandboxes of this profile (bound, warm, ephemeral and being created), counted
         * across the whole fleet and every tenant. Past it a new session fails at once with
         * `QUOTA_EXCEEDED`. @default unbounded (only each tenant's `quotas.maxSandboxes` applies)
         */
        maxSize: z.number().int().positive().optional(),
      })
      .strict()
      .refine((p) => p.maxSize === undefined || p.minIdle <= p.maxSize, {
        message: 'minIdle must not exceed maxSize (warm sandboxes count against the profile cap)',
        path: ['minIdle'],
      })
      .default({ minIdle: 0 }),
    /**
     * The session's `/workspace`: by default a tmpfs that dies with the sandbox. `persistent: true`
     * (Docker) keeps it in an engine volume per session that the session's next sandbox mounts again
     * (after idle eviction, a killed container, an engine restart) and that deleting the session
     * deletes; only such sessions can be snapshotted and forked (docs/workspaces.md).
     */
    workspace: z
      .object({
        /** Keep `/workspace` in a per-session volume. @default false */
        persistent: z.boolean().default(false),
        /**
         * Size bound of the persistent workspace in MiB, checked when it is snapshotted or forked
         * (the engine's local volume driver has no hard quota on ext4). @default the profile's `diskMb`
         */
        sizeMb: z.number().int().min(1).max(1_048_576).optional(),
      })
      .strict()
      .default({ persistent: false }),
    /** A bound sandbox unused this long is destroyed (ms). @default 900000 */
    idleTtlMs: z.number().int().positive().default(900_000),
    /** Hardening switches; each defaults to the hardened setting. */
    readOnlyRoot: z.boolean().default(true),
    /** Run commands as this user (`uid:gid`). @default '1000:1000' */
    user: z.string().default('1000:1000'),
  })
  .strict()
  .refine((p) => p.defaultTimeoutMs <= p.maxTimeoutMs, {
    message: 'defaultTimeoutMs must not exceed maxTimeoutMs',
    path: ['defaultTimeoutMs'],
  })
  .refine((p) => !p.workspace.persistent || p.pool.minIdle === 0, {
    message:
      'a persistent workspace belongs to one session, so warm sandboxes cannot have it: set pool.minIdle to 0 or drop workspace.persistent',
    path: ['pool', 'minIdle'],
  })
  .refine((p) => p.runtime !== 'runsc' || p.network !== 'bridge', {
    message:
      "runtime 'runsc' takes network 'none' or an egress allowlist only (the engine runs gVisor with --network=none); " +
      'drop network: bridge or use runtime: runc',
    path: ['runtime'],
  })

/** A profile as written by users (defaults optional). */
export type ProfileInput = z.input<typeof ProfileSchema>

/** A validated profile with its name and every default filled in. */
export type ResolvedProfile = z.output<typeof ProfileSchema> & { name: string }

/** Validates a profile and fills in defaults; throws a ZodError naming the failing field. */
export function resolveProfile(name: string, input: ProfileInput): ResolvedProfile {
  return { ...ProfileSchema.parse(input), name }
}

const listOf = (names: Iterable<string>): string => [...names].sort().join(', ') || '(none)'

/**
 * Names → profiles, from a fixed list of provider ids and resolved profiles: a {@link ProfileResolver}
 * that holds no providers (the worker-less router of a test or a remote-queue client that knows the
 * fleet's profiles). Unknown names throw `UNKNOWN_PROVIDER` / `UNKNOWN_PROFILE` listing the known ones;
 * a profile of another provider is not one of this provider's.
 */
export class ProfileCatalog implements ProfileResolver {
  private readonly byName: Map<string, ResolvedProfile>

  constructor(
    private readonly providerIds: readonly string[],
    private readonly profiles: readonly ResolvedProfile[],
  ) {
    this.byName = new Map(profiles.map((p) => [p.name, p]))
  }

  resolve(providerId: string, name: string): { readonly profile: ResolvedProfile } {
    if (!this.providerIds.includes(providerId)) {
      throw new AppError(
        'UNKNOWN_PROVIDER',
        `unknown sandbox provider '${providerId}'; known providers: ${listOf(this.providerIds)}`,
      )
    }
    const profile = this.byName.get(name)
    if (!profile || profile.provider !== providerId) {
      const known = this.profiles.filter((p) => p.provider === providerId).map((p) => p.name)
      throw new AppError(
        'UNKNOWN_PROFILE',
        `unknown sandbox profile '${name}' for provider '${providerId}'; known profiles: ${listOf(known)}`,
      )
    }
    return { profile }
  }
}

/**
 * The dev image `sbx image build dev` builds (scripts/build-images.sh dev): Debian with python3,
 * git, node, a C toolchain and the usual command-line tools. `SBX_DEV_IMAGE` names another tag.
 */
export const DEV_IMAGE = process.env['SBX_DEV_IMAGE'] || 'sandbox-router/dev:latest'

/**
 * The built-in `dev` profile (unless the config defines one): the dev image, with room for real
 * work (2 GiB workspace, 1 GiB memory, 512 processes), still without network (`network: bridge` in
 * a profile of your own opens it, e.g. for `pip install`).
 */
export const DEV_PROFILE: ProfileInput = {
  provider: 'docker',
  image: DEV_IMAGE,
  memoryMb: 1024,
  diskMb: 2048,
  tmpMb: 512,
  pidsLimit: 512,
  defaultTimeoutMs: 120_000,
}

/**
 * E2B's sandbox user: `user` (uid:gid 1001:1001, home `/home/user`) in the images scripts/setup.sh
 * and `scripts/build-images.sh dev` build, beside their own `sandbox` (1000).
 */
export const E2B_USER = '1001:1001'

/**
 * The built-in `e2b` profile (unless the config defines one), which the E2B-compatible endpoint's
 * `base` template names by default: the default image, run as E2B's user `user`
 * ({@link E2B_USER}), with its home `/home/user` as the working directory and `HOME`, so relative
 * paths and `~` mean what E2B apps expect and files written through the endpoint are `user`'s.
 */
export const E2B_PROFILE: ProfileInput = {
  provider: 'docker',
  cwd: '/home/user',
  env: { HOME: '/home/user' },
  user: E2B_USER,
}

/** Whether a profile runs the dev image (so setup must build it). */
export function usesDevImage(profile: Pick<ResolvedProfile, 'provider' | 'image'>): boolean {
  return profile.provider === 'docker' && profile.image === DEV_IMAGE
}
