import type Docker from 'dockerode'
import { LABELS, OWNER } from '../../src/sandbox/index.js'
import { mapEngineError } from './errors.js'
import { SESSION_IMAGE_REPO, VOLUME_LABELS, removeVolume } from './workspace.js'

/** One session workspace volume that {@link findVolumeLeftovers} would remove. */
export interface VolumeLeftover {
  name: string
  scope: string
  tenant: string
  session: string
  reason: string
}

/** What {@link findVolumeLeftovers} found. */
export interface VolumeSweep {
  /** Workspace volumes no container uses, listed only with `includeRunning`. */
  leftovers: VolumeLeftover[]
  /**
   * Workspace volumes no container uses that were kept: without `includeRunning`, an idle-evicted
   * session of a live fleet looks the same (its next sandbox mounts it again).
   */
  keptUnused: number
  /** Snapshot volumes: never swept (they go with `DELETE /v1/snapshots/{id}`). */
  snapshots: number
}

/**
 * This project's persistent-workspace volumes (volume label `VOLUME_LABELS.kind` = `workspace`) that no
 * container uses. A volume a container (running or not) mounts is never listed. Unused ones are
 * listed only with `includeRunning` (the fleet that owned them is known to be gone): a live
 * fleet's idle sessions keep their workspace in exactly such a volume.
 */
export async function findVolumeLeftovers(
  docker: Docker,
  opts: { scope?: string; includeRunning?: boolean } = {},
): Promise<VolumeSweep> {
  const label = [`${LABELS.owner}=${OWNER}`, ...(opts.scope ? [`${VOLUME_LABELS.scope}=${opts.scope}`] : [])]
  let volumes: Docker.VolumeInspectInfo[]
  let containers: Docker.ContainerInfo[]
  try {
    volumes = (await docker.listVolumes({ filters: { label } })).Volumes ?? []
    containers = await docker.listContainers({ all: true })
  } catch (err) {
    throw mapEngineError(err, 'listing workspace volumes')
  }
  const used = new Set(containers.flatMap((c) => c.Mounts.map((m) => m.Name).filter(Boolean)))
  const out: VolumeSweep = { leftovers: [], keptUnused: 0, snapshots: 0 }
  for (const v of volumes) {
    const kind = v.Labels?.[VOLUME_LABELS.kind]
    if (kind === 'snapshot') out.snapshots++
    if (kind !== 'workspace' || used.has(v.Name)) continue
    if (!opts.includeRunning) {
      out.keptUnused++
      continue
    }
    out.leftovers.push({
      name: v.Name,
      scope: v.Labels[VOLUME_LABELS.scope] ?? '',
      tenant: v.Labels[LABELS.tenant] ?? '',
      session: v.Labels[LABELS.session] ?? '',
      reason: 'workspace of a session with no sandbox',
    })
  }
  return out
}

/** Removes listed workspace volumes (and a restored session's image tag); returns the names removed. */
export async function removeVolumeLeftovers(
  docker: Docker,
  leftovers: readonly VolumeLeftover[],
): Promise<string[]> {
  const removed: string[] = []
  for (const l of leftovers) {
    try {
      await removeVolume(docker, l.name)
      await docker
        .getImage(`${SESSION_IMAGE_REPO}:${l.name}`)
        .remove({ force: true })
        .catch(() => undefined)
      removed.push(l.name)
    } catch {
      // In use again (a session came back) or gone meanwhile: kept.
    }
  }
  return removed
}
