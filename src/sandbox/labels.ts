/*
 * The label schema: every key the service puts on what it creates in a provider (Docker container and
 * volume labels, Daytona labels, E2B metadata), and the value of the owner label. One file, so a
 * provider, the pool and the sweepers cannot disagree on a spelling. A new key goes here.
 */
import type { ResolvedProfile } from './profiles.js'

/** Labels carried by every sandbox (Docker labels, Daytona labels, E2B metadata). */
export type Labels = Record<string, string>

/** Value of the owner label ({@link LABELS.owner}) on everything the service creates. */
export const OWNER = 'sandbox-router'

/** Label keys the service sets on every sandbox it creates. */
export const LABELS = {
  /** Always {@link OWNER}: marks sandboxes this service owns (the reaper's filter). */
  owner: 'sandbox-router.owner',
  tenant: 'sandbox-router.tenant',
  /** Hash of the session key, or `ephemeral` / `warm` for pooled sandboxes not yet bound. */
  session: 'sandbox-router.session',
  profile: 'sandbox-router.profile',
  /** Instance id of the process that created it (diagnostics only). */
  instance: 'sandbox-router.instance',
} as const

/** Labels that let `connect(ref)` rebuild a handle's settings in another process. */
export const SETTINGS_LABELS = {
  cwd: 'sandbox-router.cwd',
  maxExecs: 'sandbox-router.max-execs',
} as const

/**
 * Label keys the session pool adds beside {@link LABELS}. (src/sessions/keys.ts still declares its own
 * copy, `POOL_LABELS` and `OWNER`; test/unit/sandbox/labels.test.ts holds the two equal until it
 * imports them from here.)
 */
export const POOL_LABELS = {
  /** The pool's `scope` option (config `queue.prefix`): `reap()` only touches sandboxes of its scope. */
  scope: 'sandbox-router.scope',
  /** Creation time (ms since epoch) as a decimal string: `reap()` spares young sandboxes. */
  createdAt: 'sandbox-router.created-at',
  /** The engine the sandbox lives on (fleets over many Docker engines). */
  engine: 'sandbox-router.engine',
} as const

/** Label keys of the Docker provider's workspace and snapshot volumes (beside {@link LABELS}). */
export const VOLUME_LABELS = {
  /** `workspace` (a session's persistent /workspace) or `snapshot` (a snapshot's copy of one). */
  kind: 'sandbox-router.volume',
  /** The pool's scope (config `queue.prefix`), as on containers. */
  scope: POOL_LABELS.scope,
  /** On a workspace volume made from a snapshot: the image its sandboxes start from. */
  image: 'sandbox-router.snapshot-image',
  /** On snapshot volumes and images: the snapshot id. */
  snapshot: 'sandbox-router.snapshot',
} as const

/** Label keys one provider sets for its own use. */
export const PROVIDER_LABELS = {
  /** Docker: the agent's path inside the container (so `connect` execs the right binary). */
  agentPath: 'sandbox-router.agent-path',
  /** Docker: on the helper container that fills the agent volume (its value: the volume's name). */
  agentVolume: 'sandbox-router.agent-volume',
  /** Docker: folder name (under the egress socketDir) of an egress-allowlist sandbox's proxy socket. */
  egressDir: 'sandbox-router.egress-dir',
  /** Docker: the sandbox's egress policy (rules and secret sources, never values), for `connect`. */
  egressPolicy: 'sandbox-router.egress-policy',
  /** Docker: the container's memory limit in bytes (the profile's memory plus its disk), for placement. */
  memoryBytes: 'sandbox-router.memory-bytes',
  /** Daytona: a per-create id, to find (and delete) a sandbox whose create call failed half-way. */
  createId: 'sandbox-router.create-id',
  /** Daytona: a random value the health probe lists by (it must match nothing). */
  probe: 'sandbox-router.probe',
  /**
   * E2B: the idle timeout a sandbox was created with, for `connect`. (providers/e2b/metadata.ts
   * still spells it out itself.)
   */
  idleTtlMs: 'sandbox-router.idle-ttl-ms',
} as const

/** Label key carrying a conformance-suite run id; the suite's `afterAll` destroys everything carrying it. */
export const CONFORMANCE_RUN_LABEL = 'sandbox-router.conformance-run'

/**
 * The caller's labels plus the service's own: owner, profile, the creating instance (when the
 * provider was given one) and the settings `connect` reads back (cwd, concurrency bound).
 */
export function ownedLabels(labels: Labels, profile: ResolvedProfile, instanceId?: string): Labels {
  return {
    ...labels,
    [LABELS.owner]: OWNER,
    [LABELS.profile]: profile.name,
    ...(instanceId ? { [LABELS.instance]: instanceId } : {}),
    [SETTINGS_LABELS.cwd]: profile.cwd,
    [SETTINGS_LABELS.maxExecs]: String(profile.maxConcurrentExecs),
  }
}
