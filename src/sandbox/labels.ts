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

/** Label keys the session pool adds beside {@link LABELS} (src/sessions/keys.ts re-exports them). */
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
  /**
   * `tmpfs` on a snapshot volume, or a session's seed, holding the files of a sandbox's in-memory
   * mounts (one folder per mount path) rather than a persistent workspace.
   */
  layout: 'sandbox-router.volume-layout',
} as const

/** Label keys one provider sets for its own use. */
export const PROVIDER_LABELS = {
  /** Docker: the agent's path inside the container (so `connect` execs the right binary). */
  agentPath: 'sandbox-router.agent-path',
  /** Docker: on the helper container that fills the agent volume (its value: the volume's name). */
  agentVolume: 'sandbox-router.agent-volume',
  /** Docker: folder name (under the provider's `agentSocketDir`) of a sandbox's direct agent channel. */
  agentDir: 'sandbox-router.agent-dir',
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
  /** E2B: the idle timeout a sandbox was created with, for `connect`. */
  idleTtlMs: 'sandbox-router.idle-ttl-ms',
  /**
   * E2B: `true` on a sandbox started from a snapshot for a session that has no sandbox yet; the
   * session's next create takes it (providers/e2b/snapshots.ts).
   */
  e2bSeed: 'sandbox-router.snapshot-seed',
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

/** The caller's label filter plus the owner label: what a provider's `list` asks its backend for. */
export function ownerFilter(labels: Labels): Labels {
  return { ...labels, [LABELS.owner]: OWNER }
}

/** Whether `labels` carry the owner label with {@link OWNER}: the service made what carries them. */
export function isOwned(labels: Labels | undefined): boolean {
  return labels?.[LABELS.owner] === OWNER
}

/** Whether `labels` hold every entry of `filter` (the re-check of a backend's label filter). */
export function matchesLabels(labels: Labels | undefined, filter: Labels): boolean {
  return Object.entries(filter).every(([k, v]) => labels?.[k] === v)
}

/** A positive integer from a label value, else `fallback`. */
export function positiveIntLabel(value: string | undefined, fallback: number): number {
  const n = Number(value)
  return Number.isInteger(n) && n > 0 ? n : fallback
}

/** Concurrency bound of a handle whose labels carry none (sandboxes made before the label). */
export const DEFAULT_MAX_EXECS = 8

/** A handle's settings as `connect` reads them back from the labels {@link ownedLabels} set. */
export interface LabelSettings {
  cwd: string
  maxConcurrentExecs: number
}

/**
 * The settings {@link ownedLabels} stored (`cwd`, concurrency bound), read back by `connect` in any
 * process; `defaultCwd` (and {@link DEFAULT_MAX_EXECS}) where a label is missing or malformed.
 */
export function settingsOf(labels: Labels | undefined, defaultCwd: string): LabelSettings {
  return {
    cwd: labels?.[SETTINGS_LABELS.cwd] ?? defaultCwd,
    maxConcurrentExecs: positiveIntLabel(labels?.[SETTINGS_LABELS.maxExecs], DEFAULT_MAX_EXECS),
  }
}

/** What the session pool knows about a sandbox it is about to create ({@link poolLabels}). */
export interface PoolLabelOptions {
  /** The pool's scope (config `queue.prefix`). */
  scope: string
  instanceId: string
  profile: string
  tenant?: string
  /** Hash of the session key, or `ephemeral` / `warm`. */
  session: string
  /** Creation time, ms since epoch. */
  now: number
  /** The engine it is placed on (fleets over many engines). */
  engine?: string
}

/** Labels the session pool asks a provider to put on a sandbox it creates (the provider adds its own). */
export function poolLabels(opts: PoolLabelOptions): Labels {
  const labels: Labels = {
    [LABELS.owner]: OWNER,
    [LABELS.session]: opts.session,
    [LABELS.profile]: opts.profile,
    [LABELS.instance]: opts.instanceId,
    [POOL_LABELS.scope]: opts.scope,
    [POOL_LABELS.createdAt]: String(opts.now),
  }
  if (opts.tenant !== undefined) labels[LABELS.tenant] = opts.tenant
  if (opts.engine !== undefined) labels[POOL_LABELS.engine] = opts.engine
  return labels
}

/** Labels `reap()` lists by: everything this service created in one scope. */
export function scopeLabels(scope: string): Labels {
  return { [LABELS.owner]: OWNER, [POOL_LABELS.scope]: scope }
}
