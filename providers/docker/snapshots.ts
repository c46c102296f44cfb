import type Docker from 'dockerode'
import {
  AppError,
  type Labels,
  LABELS,
  OWNER,
  PROVIDER_LABELS,
  type ProviderSnapshots,
  type ProviderWorkspaces,
  type SandboxRef,
  type SnapshotCapture,
} from '../../src/sandbox/index.js'
import { WORKSPACE } from './container-spec.js'
import { TMPFS_LAYOUT, captureTmpfs } from './tmpfs-snapshot.js'
import { engineStatus, mapEngineError } from './errors.js'
import {
  SESSION_IMAGE_REPO,
  SNAPSHOT_REPO,
  VOLUME_LABELS,
  copyVolume,
  inspectVolume,
  removeVolume,
  snapshotVolumeName,
  volumeLabels,
  workspaceVolumeName,
} from './workspace.js'

/** Snapshot ids are image tags: letters, digits, `_`, `.`, `-`, at most 128. */
const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/

function imageOf(snapshotId: string): string {
  if (!TAG.test(snapshotId))
    throw new AppError('BAD_REQUEST', `snapshot id '${snapshotId}' must match ${TAG.source}`)
  return `${SNAPSHOT_REPO}:${snapshotId}`
}

/** The engine volume mounted at /workspace of a container, if any. */
async function workspaceVolumeOf(docker: Docker, id: string): Promise<string | undefined> {
  let info: Docker.ContainerInspectInfo
  try {
    info = await docker.getContainer(id).inspect()
  } catch (err) {
    if (engineStatus(err) === 404)
      throw new AppError('SANDBOX_LOST', `sandbox ${id} does not exist (destroyed?)`, { cause: err })
    throw mapEngineError(err, `inspecting sandbox ${id}`, id)
  }
  const m = info.Mounts.find((x) => x.Destination === WORKSPACE && x.Type === 'volume')
  return m?.Name
}

/**
 * Snapshots and persistent workspaces of the Docker provider. A snapshot is an image
 * (`docker commit` of the container: its root filesystem changes) tagged
 * `sandbox-router/snapshot:<id>`, and a volume holding a copy of the workspace — or, for a sandbox
 * without a persistent workspace captured with `tmpfs`, the files of its in-memory mounts
 * (tmpfs-snapshot.ts). `helperImage` runs the copies (it needs `sh`, `cp`, `du`).
 */
export function dockerSnapshots(
  docker: Docker,
  helperImage: string,
): { snapshots: ProviderSnapshots; workspaces: ProviderWorkspaces } {
  async function capture(
    ref: SandboxRef,
    snapshotId: string,
    opts: { labels: Labels; maxWorkspaceBytes?: number; tmpfs?: boolean },
  ): Promise<SnapshotCapture> {
    const image = imageOf(snapshotId)
    const source = await workspaceVolumeOf(docker, ref.id)
    if (!source && opts.tmpfs) return captureInMemory(ref, snapshotId, opts)
    if (!source)
      throw new AppError(
        'BAD_REQUEST',
        `sandbox ${ref.id} (profile '${ref.profile}') has no persistent workspace; snapshots need a profile with workspace: { persistent: true }`,
      )
    const volume = snapshotVolumeName(snapshotId)
    const labels = volumeLabels(opts.labels, 'snapshot', { [VOLUME_LABELS.snapshot]: snapshotId })
    const container = docker.getContainer(ref.id)
    try {
      await docker.createVolume({ Name: volume, Labels: labels })
      // Frozen while both are taken, so the image and the workspace copy show one moment (commands
      // in flight stall for that long, then go on).
      await container.pause()
      let workspaceBytes: number
      try {
        await commitImage(ref.id, snapshotId, false)
        workspaceBytes = await copyVolume(docker, helperImage, source, volume)
      } finally {
        await container.unpause().catch(() => undefined)
      }
      if (opts.maxWorkspaceBytes !== undefined && workspaceBytes > opts.maxWorkspaceBytes)
        throw new AppError(
          'NO_SPACE',
          `the workspace holds ${workspaceBytes} bytes, over its bound of ${opts.maxWorkspaceBytes} (workspace.sizeMb); delete files or raise workspace.sizeMb`,
        )
      return { workspaceBytes }
    } catch (err) {
      await remove(snapshotId).catch(() => undefined)
      if (err instanceof AppError) throw err
      throw mapEngineError(err, `snapshotting sandbox ${ref.id} as ${image}`, ref.id)
    }
  }

  /** A sandbox without persistent workspace: its image, and the files of its tmpfs mounts. */
  async function captureInMemory(
    ref: SandboxRef,
    snapshotId: string,
    opts: { labels: Labels; maxWorkspaceBytes?: number },
  ): Promise<SnapshotCapture> {
    const volume = snapshotVolumeName(snapshotId)
    const labels = volumeLabels(opts.labels, 'snapshot', {
      [VOLUME_LABELS.snapshot]: snapshotId,
      [VOLUME_LABELS.layout]: TMPFS_LAYOUT,
    })
    try {
      await docker.createVolume({ Name: volume, Labels: labels })
      await commitImage(ref.id, snapshotId, true)
      const workspaceBytes = await captureTmpfs(docker, helperImage, ref.id, volume, opts.maxWorkspaceBytes)
      return { workspaceBytes, layout: TMPFS_LAYOUT }
    } catch (err) {
      await remove(snapshotId).catch(() => undefined)
      if (err instanceof AppError) throw err
      throw mapEngineError(err, `snapshotting sandbox ${ref.id} as ${imageOf(snapshotId)}`, ref.id)
    }
  }

  /**
   * The image: the container's root filesystem changes. The source's egress and direct-channel
   * labels must not carry over to sandboxes started from it (they name the source's sockets' folders).
   */
  async function commitImage(containerId: string, snapshotId: string, pause: boolean): Promise<void> {
    await docker.getContainer(containerId).commit({
      repo: SNAPSHOT_REPO,
      tag: snapshotId,
      pause,
      changes: [
        `LABEL ${VOLUME_LABELS.snapshot}=${snapshotId} ${PROVIDER_LABELS.egressDir}="" ${PROVIDER_LABELS.egressPolicy}="" ${PROVIDER_LABELS.agentDir}=""`,
      ],
    })
  }

  async function restore(snapshotId: string, labels: Labels): Promise<void> {
    const image = imageOf(snapshotId)
    const from = snapshotVolumeName(snapshotId)
    const name = workspaceVolumeName(labels)
    if (!name) throw new AppError('BAD_REQUEST', 'a snapshot restores into a session (give a session id)')
    const source = await inspectVolume(docker, from)
    if (!source)
      throw new AppError('NOT_FOUND', `snapshot ${snapshotId} has no workspace on this engine (deleted?)`)
    // A tmpfs snapshot's copy is the session's seed (create.ts), not a workspace.
    const layout = source.Labels?.[VOLUME_LABELS.layout]
    if (await inspectVolume(docker, name))
      throw new AppError(
        'CONFLICT',
        'the session already has a workspace; start from a snapshot only in a new session',
      )
    try {
      await docker.getImage(image).tag({ repo: SESSION_IMAGE_REPO, tag: name })
      await docker.createVolume({
        Name: name,
        Labels: volumeLabels(labels, 'workspace', {
          [VOLUME_LABELS.image]: `${SESSION_IMAGE_REPO}:${name}`,
          [VOLUME_LABELS.snapshot]: snapshotId,
          ...(layout ? { [VOLUME_LABELS.layout]: layout } : {}),
        }),
      })
      await copyVolume(docker, helperImage, from, name)
    } catch (err) {
      await drop(labels).catch(() => undefined)
      if (engineStatus(err) === 404)
        throw new AppError('NOT_FOUND', `snapshot ${snapshotId} has no image on this engine (deleted?)`)
      if (err instanceof AppError) throw err
      throw mapEngineError(err, `restoring snapshot ${snapshotId}`)
    }
  }

  async function remove(snapshotId: string): Promise<void> {
    await removeImage(imageOf(snapshotId))
    await removeVolume(docker, snapshotVolumeName(snapshotId))
  }

  async function drop(labels: Labels): Promise<void> {
    const name = workspaceVolumeName(labels)
    if (!name) return
    await removeVolume(docker, name)
    await removeImage(`${SESSION_IMAGE_REPO}:${name}`)
  }

  async function removeImage(image: string): Promise<void> {
    try {
      await docker.getImage(image).remove({ force: true })
    } catch (err) {
      // Gone already: 404, or the 500 an engine answers when a concurrent removal of another tag of
      // the same image (two sessions restored from one snapshot, deleted at once) took it meanwhile.
      if (engineStatus(err) === 404 || /unrecognized image ID|No such image/i.test(String(err))) return
      throw mapEngineError(err, `removing image ${image}`)
    }
  }

  async function dropAll(labels: Labels): Promise<void> {
    const label = [`${LABELS.owner}=${OWNER}`, ...Object.entries(labels).map(([k, v]) => `${k}=${v}`)]
    try {
      const { Volumes } = await docker.listVolumes({ filters: { label } })
      for (const v of Volumes ?? []) await removeVolume(docker, v.Name)
      for (const img of await docker.listImages({ filters: { label } }))
        for (const tag of img.RepoTags ?? [])
          if (tag.startsWith(`${SNAPSHOT_REPO}:`) || tag.startsWith(`${SESSION_IMAGE_REPO}:`))
            await removeImage(tag)
    } catch (err) {
      throw err instanceof AppError ? err : mapEngineError(err, 'removing workspaces and snapshots')
    }
  }

  return { snapshots: { capture, restore, remove }, workspaces: { drop, dropAll } }
}
