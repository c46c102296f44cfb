import { createHash } from 'node:crypto'
import type Docker from 'dockerode'
import { AppError, LABELS, type Labels, OWNER, VOLUME_LABELS } from '../../src/sandbox/index.js'
import { engineStatus, mapEngineError } from './errors.js'

/** Label keys of workspace and snapshot volumes (src/sandbox/labels.ts). */
export { VOLUME_LABELS }

/** Sessions labelled with these are not sessions (pooled sandboxes): they get no volume. */
const NOT_A_SESSION = new Set(['warm', 'ephemeral'])

/** Repository of snapshot images (`docker commit`); the tag is the snapshot id. */
export const SNAPSHOT_REPO = 'sandbox-router/snapshot'
/**
 * Repository of a restored session's own tag of its snapshot's image (the tag is its workspace
 * volume's name): the session keeps its image when the snapshot is deleted.
 */
export const SESSION_IMAGE_REPO = 'sandbox-router/session'

const hash = (s: string): string => createHash('sha256').update(s).digest('hex').slice(0, 24)

/**
 * Name of a session's workspace volume: `sbx-ws-<hash of scope and session>`, or undefined when
 * the labels name no session (warm and ephemeral sandboxes).
 */
export function workspaceVolumeName(labels: Labels): string | undefined {
  const session = labels[LABELS.session]
  if (!session || NOT_A_SESSION.has(session)) return undefined
  return `sbx-ws-${hash(`${labels[VOLUME_LABELS.scope] ?? ''}/${session}`)}`
}

/** Name of a snapshot's workspace volume. */
export function snapshotVolumeName(snapshotId: string): string {
  return `sbx-snap-${hash(snapshotId)}`
}

/** Labels of a volume: the session's owner/tenant/session/profile/scope labels and its kind. */
export function volumeLabels(labels: Labels, kind: 'workspace' | 'snapshot', extra: Labels = {}): Labels {
  const out: Labels = { [LABELS.owner]: OWNER, [VOLUME_LABELS.kind]: kind, ...extra }
  for (const k of [LABELS.tenant, LABELS.session, LABELS.profile, LABELS.instance, VOLUME_LABELS.scope])
    if (labels[k] !== undefined) out[k] = labels[k]
  return out
}

/** Inspects a volume; undefined when it does not exist. */
export async function inspectVolume(
  docker: Docker,
  name: string,
): Promise<Docker.VolumeInspectInfo | undefined> {
  try {
    return await docker.getVolume(name).inspect()
  } catch (err) {
    if (engineStatus(err) === 404) return undefined
    throw mapEngineError(err, `inspecting volume ${name}`)
  }
}

/**
 * The session's workspace volume, created (empty: the engine fills it from the image's
 * /workspace on first mount) when absent. Returns its name and the snapshot image it starts from.
 */
export async function ensureWorkspaceVolume(
  docker: Docker,
  labels: Labels,
  init: { helperImage: string; user: string },
): Promise<{ name: string; image?: string } | undefined> {
  const name = workspaceVolumeName(labels)
  if (!name) return undefined
  const existing = await inspectVolume(docker, name)
  if (existing) {
    if (existing.Labels?.[LABELS.owner] !== OWNER)
      throw new AppError('CONFLICT', `volume ${name} exists but is not sandbox-router's; remove or rename it`)
    if (existing.Labels[VOLUME_LABELS.layout] !== undefined)
      throw new AppError(
        'CONFLICT',
        `the session was started from a snapshot of in-memory files, which a profile with a persistent workspace cannot mount; use a profile without workspace.persistent`,
      )
    const image = existing.Labels[VOLUME_LABELS.image]
    return image ? { name, image } : { name }
  }
  try {
    await docker.createVolume({ Name: name, Labels: volumeLabels(labels, 'workspace') })
  } catch (err) {
    throw mapEngineError(err, `creating workspace volume ${name}`)
  }
  try {
    // Owned by the profile's user, as the tmpfs workspace is (the mount takes nothing from the image).
    const owner = /^(\d+)(?::(\d+))?$/.exec(init.user)
    const cmd = owner ? `chown ${owner[1]}:${owner[2] ?? owner[1]} /w && chmod 0755 /w` : 'chmod 1777 /w'
    await runHelper(docker, init.helperImage, ['/bin/sh', '-c', cmd], [{ source: name, target: '/w' }])
  } catch (err) {
    await removeVolume(docker, name).catch(() => undefined)
    throw err
  }
  return { name }
}

/**
 * The seed of a session started from a tmpfs snapshot (its volume, labelled with that layout) and
 * the image its sandboxes start from; undefined for any other session.
 */
export async function seedVolumeOf(
  docker: Docker,
  labels: Labels,
): Promise<{ name: string; image?: string } | undefined> {
  const name = workspaceVolumeName(labels)
  if (!name) return undefined
  const v = await inspectVolume(docker, name)
  if (v?.Labels?.[LABELS.owner] !== OWNER || v.Labels[VOLUME_LABELS.layout] !== 'tmpfs') return undefined
  const image = v.Labels[VOLUME_LABELS.image]
  return image ? { name, image } : { name }
}

/** Removes a volume, waiting out a container removal still holding it; a missing one is fine. */
export async function removeVolume(docker: Docker, name: string): Promise<void> {
  const deadline = Date.now() + 30_000
  for (;;) {
    try {
      await docker.getVolume(name).remove()
      return
    } catch (err) {
      const status = engineStatus(err)
      if (status === 404) return
      if (status !== 409 || Date.now() > deadline) throw mapEngineError(err, `removing volume ${name}`)
      // 409: a container (being removed) still uses it.
      await new Promise((r) => setTimeout(r, 100))
    }
  }
}

/**
 * Runs a short-lived helper container (no network, root with only the file capabilities) over
 * `mounts`; throws with its output when the command fails.
 */
export async function runHelper(
  docker: Docker,
  image: string,
  cmd: string[],
  mounts: { source: string; target: string; readOnly?: boolean }[],
): Promise<string> {
  let container: Docker.Container
  try {
    container = await docker.createContainer({
      Image: image,
      Entrypoint: [cmd[0] ?? 'true'],
      Cmd: cmd.slice(1),
      User: '0:0',
      WorkingDir: '/',
      Labels: { [LABELS.owner]: OWNER, [VOLUME_LABELS.kind]: 'helper' },
      NetworkDisabled: true,
      HostConfig: {
        NetworkMode: 'none',
        CapDrop: ['ALL'],
        CapAdd: ['CHOWN', 'DAC_OVERRIDE', 'FOWNER', 'FSETID'],
        SecurityOpt: ['no-new-privileges'],
        AutoRemove: false,
        Mounts: mounts.map((m) => ({
          Type: 'volume' as const,
          Source: m.source,
          Target: m.target,
          ReadOnly: m.readOnly ?? false,
        })),
      },
    })
  } catch (err) {
    throw mapEngineError(err, `starting a workspace helper from ${image}`)
  }
  try {
    const stream = await container.attach({ stream: true, stdout: true, stderr: true })
    const chunks: Buffer[] = []
    stream.on('data', (c: Buffer) => chunks.push(c))
    await container.start()
    const { StatusCode } = (await container.wait()) as { StatusCode: number }
    // The attach stream is multiplexed: strip the 8-byte frame headers for the message.
    const out = demuxText(Buffer.concat(chunks))
    if (StatusCode !== 0)
      throw new AppError(
        'INTERNAL',
        `workspace helper '${cmd.join(' ')}' exited ${StatusCode}: ${out.trim()}`,
      )
    return out
  } finally {
    await container.remove({ force: true, v: true }).catch(() => undefined)
  }
}

function demuxText(buf: Buffer): string {
  const parts: Buffer[] = []
  let i = 0
  while (i + 8 <= buf.length) {
    const len = buf.readUInt32BE(i + 4)
    parts.push(buf.subarray(i + 8, i + 8 + len))
    i += 8 + len
  }
  return Buffer.concat(parts).toString('utf8')
}

/** Copies every file of volume `from` into volume `to` (ownership and modes kept); returns the bytes. */
export async function copyVolume(docker: Docker, image: string, from: string, to: string): Promise<number> {
  const out = await runHelper(
    docker,
    image,
    ['/bin/sh', '-c', 'cp -a /from/. /to/ && du -sk /to | cut -f1'],
    [
      { source: from, target: '/from', readOnly: true },
      { source: to, target: '/to' },
    ],
  )
  return Number(out.trim().split('\n').pop() ?? 0) * 1024
}

/** Bytes used in a volume (`du`). */
export async function volumeBytes(docker: Docker, image: string, name: string): Promise<number> {
  const out = await runHelper(
    docker,
    image,
    ['/bin/sh', '-c', 'du -sk /v | cut -f1'],
    [{ source: name, target: '/v', readOnly: true }],
  )
  return Number(out.trim()) * 1024
}
