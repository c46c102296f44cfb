/**
 * Snapshots of sandboxes without a persistent workspace: the files of their in-memory (tmpfs)
 * mounts — the workspace, /tmp, a working directory outside them such as E2B's /home/user — are
 * read out through a `tar` in the sandbox (as its user) into the snapshot's volume, one folder per
 * mount path. A session started from such a snapshot gets a copy of that volume as its **seed**:
 * mounted read-only at {@link SEED_DIR} in each of its sandboxes, whose start copies it into the
 * same mounts. The engine's archive API cannot do either: it does not see tmpfs mounts.
 */
import { type Duplex, PassThrough } from 'node:stream'
import type Docker from 'dockerode'
import { AppError, LABELS, OWNER } from '../../src/sandbox/index.js'
import { DockerStreamDemuxer } from './demux.js'
import { mapEngineError } from './errors.js'
import { VOLUME_LABELS } from './workspace.js'

/** Where a seeded sandbox finds its snapshot's files (read-only). */
export const SEED_DIR = '/.sbx-seed'

/**
 * Value of {@link VOLUME_LABELS.layout} on volumes holding the files of tmpfs mounts (snapshot
 * volumes and session seeds), one folder per mount path.
 */
export const TMPFS_LAYOUT = 'tmpfs'

const shellQuote = (s: string): string => `'${s.replace(/'/g, `'\\''`)}'`

/**
 * The top-level entries of each mount (relative to `/`, so the archive holds `home/user/…`); the
 * agent's own files in /tmp (`.sbx-*`: process records, stdin pipes) stay out. Busybox's tar has no
 * `--exclude`, hence the list. Nothing to archive: no output at all.
 */
function tarScript(paths: readonly string[]): string {
  const rel = paths.map((p) => shellQuote(p.replace(/^\/+/, ''))).join(' ')
  return (
    `cd / && set -- && for p in ${rel}; do for e in "$p"/* "$p"/.[!.]* "$p"/..?*; do ` +
    `if [ -e "$e" ] || [ -L "$e" ]; then case "\${e##*/}" in .sbx-*) ;; *) set -- "$@" "$e" ;; esac; fi; ` +
    `done; done; [ $# -eq 0 ] || exec tar -cf - "$@"`
  )
}

/** The script a seeded sandbox runs at start (as its user): each mount gets its snapshot's files. */
export function seedScript(paths: readonly string[]): string {
  const quoted = paths.map(shellQuote).join(' ')
  return (
    `for p in ${quoted}; do s=${SEED_DIR}"$p"; [ -d "$s" ] || continue; ` +
    `for e in "$s"/* "$s"/.[!.]* "$s"/..?*; do if [ -e "$e" ] || [ -L "$e" ]; then cp -a "$e" "$p"/ || exit 1; fi; done; done`
  )
}

/**
 * Copies the files of the container's tmpfs mounts into `volume` (which exists); resolves with the
 * bytes archived. `NO_SPACE` past `maxBytes`; `INTERNAL` when the sandbox's `tar` fails (its stderr
 * says why, e.g. a file its user cannot read). The sandbox keeps running meanwhile: files written
 * while the archive is read may or may not be in it.
 */
export async function captureTmpfs(
  docker: Docker,
  helperImage: string,
  containerId: string,
  volume: string,
  maxBytes: number | undefined,
): Promise<number> {
  const container = docker.getContainer(containerId)
  const info = await container.inspect()
  const paths = Object.keys(info.HostConfig.Tmpfs ?? {})
  if (paths.length === 0) return 0
  const exec = await container.exec({
    Cmd: ['/bin/sh', '-c', tarScript(paths)],
    AttachStdout: true,
    AttachStderr: true,
  })
  const raw = (await exec.start({ hijack: true, stdin: false })) as Duplex
  const archive = new PassThrough()
  const stderr: Buffer[] = []
  let bytes = 0
  let upload: Promise<void> | undefined
  let helper: Docker.Container | undefined
  const demux = new DockerStreamDemuxer(
    (chunk) => {
      bytes += chunk.length
      if (maxBytes !== undefined && bytes > maxBytes) {
        archive.destroy(
          new AppError(
            'NO_SPACE',
            `the sandbox's in-memory files hold more than ${maxBytes} bytes, over the snapshot bound (workspace.sizeMb, else diskMb); delete files or raise it`,
          ),
        )
        return
      }
      // The upload starts with the first bytes: an empty sandbox sends none (and needs none).
      if (!upload) {
        upload = uploadInto(docker, helperImage, volume, archive).then((h) => void (helper = h))
        upload.catch(() => undefined) // awaited below; this only marks it handled meanwhile
      }
      // The engine takes the archive at its pace: the sandbox's tar waits meanwhile.
      if (!archive.write(chunk)) {
        raw.pause()
        archive.once('drain', () => raw.resume())
      }
    },
    (chunk) => stderr.push(chunk),
  )
  try {
    await new Promise<void>((resolve, reject) => {
      raw.on('data', (c: Buffer) => demux.push(c))
      raw.on('end', resolve)
      raw.on('error', reject)
      archive.on('error', reject)
    })
    archive.end()
    await upload
    const { ExitCode } = await exec.inspect()
    if (ExitCode !== 0)
      throw new AppError(
        'INTERNAL',
        `reading the sandbox's in-memory files (tar as its user) failed with exit code ${ExitCode}: ${Buffer.concat(stderr).toString('utf8').trim()}`,
      )
    return bytes
  } catch (err) {
    archive.destroy()
    raw.destroy()
    await upload?.catch(() => undefined)
    if (err instanceof AppError) throw err
    throw mapEngineError(err, `reading the in-memory files of sandbox ${containerId}`, containerId)
  } finally {
    await helper?.remove({ force: true, v: false }).catch(() => undefined)
  }
}

/** Extracts the tar stream into `volume` through a created (never started) helper container. */
async function uploadInto(
  docker: Docker,
  image: string,
  volume: string,
  archive: NodeJS.ReadableStream,
): Promise<Docker.Container> {
  const helper = await docker.createContainer({
    Image: image,
    Entrypoint: ['true'],
    Labels: { [LABELS.owner]: OWNER, [VOLUME_LABELS.kind]: 'helper' },
    NetworkDisabled: true,
    HostConfig: {
      NetworkMode: 'none',
      Mounts: [{ Type: 'volume', Source: volume, Target: '/to' }],
      LogConfig: { Type: 'none', Config: {} },
    },
  })
  try {
    await helper.putArchive(archive, { path: '/to' })
  } catch (err) {
    await helper.remove({ force: true, v: false }).catch(() => undefined)
    throw err
  }
  return helper
}
