/**
 * The host side of the direct agent channel: frames between this process and a sandbox's agent
 * travel on a Unix socket of ours instead of through the engine.
 *
 * A channel is a hijacked `docker exec`, so every frame otherwise crosses dockerd and
 * containerd-shim both ways: two more processes copy every byte, which costs about as much CPU per
 * command as the agent itself (BENCHMARKS.md). Where the engine runs on this machine, each sandbox
 * gets a folder of ours, bind-mounted read-only at {@link DIRECT_MOUNT}. To open a channel we listen
 * on a fresh socket in that folder, start the agent with `--direct`, and write it one line on the
 * exec's stdin: a random token and the socket's path inside the container. The agent connects,
 * sends the token back, and speaks the frame protocol on the socket from then on
 * (providers/docker/agent/direct.c). The exec stays attached: it carries the agent's stderr, and its
 * end still means the agent ended.
 *
 * - Only the agent we started knows the token (it came over the exec's stdin), so nothing else in
 *   the sandbox can take the channel's place; a connection with another token is dropped.
 * - The folder is read-only inside the sandbox (its processes cannot write to the host's disk
 *   through it), and each sandbox sees only its own.
 * - Where our folder is not the engine's (a worker in a container, a remote `DOCKER_HOST`, an
 *   engine on another machine), the agent cannot reach the socket and stays on the exec's pipes:
 *   the channel works as before. The folder is made only when the engine looks local.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto'
import { chmod, mkdir, readdir, rm, stat } from 'node:fs/promises'
import { type Server, type Socket, createServer } from 'node:net'
import { hostname } from 'node:os'
import { join } from 'node:path'
import type Docker from 'dockerode'
import { type Labels, PROVIDER_LABELS } from '../../src/sandbox/index.js'
import { makeSandboxFolder } from './sandbox-folder.js'

/** Where a sandbox sees its direct-channel folder (read-only). */
export const DIRECT_MOUNT = '/run/sbx-agent'

/** How long a connection to an offered socket may take to send its token (ms). */
const TOKEN_TIMEOUT_MS = 5_000
/** Longest Unix socket path the kernel takes (sun_path is 108 bytes, with its NUL). */
const MAX_SOCKET_PATH = 107
/** Bytes of the token (sent as hex). */
const TOKEN_BYTES = 16

/** A direct channel offered to one agent: the line to write on its stdin, and its connection. */
export interface DirectOffer {
  /** `<token> <socket path inside the container>\n`, for the agent's stdin. */
  line: string
  /** The agent's connection once it sent the token, and what it sent after the token. */
  accepted: Promise<{ socket: Socket; head: Buffer }>
  /** Stops listening and removes the socket file (the accepted connection stays open). */
  close(): void
}

/** The direct-channel folders of one provider. */
export interface DirectHost {
  /** Labels of a new sandbox: the name of its folder. */
  labels(): Labels
  /**
   * Makes the folder of a new sandbox when direct channels are on and the engine is on this
   * machine; returns its host path (to bind-mount at {@link DIRECT_MOUNT}), else undefined.
   */
  makeFolder(labels: Labels, user: string): Promise<string | undefined>
  /** Offers a direct channel to the sandbox with these labels; undefined when its folder is not here. */
  offer(labels: Labels | undefined): Promise<DirectOffer | undefined>
  /** Removes the sandbox's folder. */
  drop(labels: Labels | undefined): Promise<void>
}

/** A sandbox's folder may be pruned once this old with no container of the engine naming it (ms). */
const PRUNE_AFTER_MS = 10 * 60_000

/**
 * A short name of the engine when it shares this machine's filesystem: it is reached through a
 * local Unix socket and names itself as this host does (a containerised worker has another host
 * name); undefined otherwise. Rejects when the engine does not answer (the caller asks again later).
 */
export async function localEngineId(docker: Docker): Promise<string | undefined> {
  const modem = (docker as unknown as { modem?: { host?: string; socketPath?: unknown } }).modem ?? {}
  if (modem.host) return undefined
  const dockerHost = process.env['DOCKER_HOST']
  if (typeof modem.socketPath !== 'string' && dockerHost && !dockerHost.startsWith('unix://'))
    return undefined
  const info = await docker.info()
  // Short: a Unix socket's path holds at most 107 bytes, and longer ones are cut silently.
  return info.Name === hostname()
    ? createHash('sha256').update(String(info.ID)).digest('hex').slice(0, 12)
    : undefined
}

/**
 * The {@link DirectHost} of a provider: `dir` holds a folder per engine on this machine, and in it
 * one per sandbox; `false` turns direct channels off.
 */
export function directHost(docker: Docker, dir: string | false): DirectHost {
  let engine: Promise<string | undefined> | undefined
  let pruned = false
  const engineDir = async (): Promise<string | undefined> => {
    if (!dir) return undefined
    const asked = (engine ??= localEngineId(docker))
    const id = await asked.catch(() => {
      // Unknown while the engine does not answer: ask again next time, no direct channel meanwhile.
      if (engine === asked) engine = undefined
      return undefined
    })
    return id ? join(dir, id) : undefined
  }
  const folder = async (labels: Labels | undefined): Promise<string | undefined> => {
    const name = labels?.[PROVIDER_LABELS.agentDir]
    if (!name || !/^[0-9a-f]{16}$/.test(name)) return undefined
    const parent = await engineDir()
    return parent ? join(parent, name) : undefined
  }

  /** Removes folders whose sandbox the engine no longer has (one removed by an engine sweep, say). */
  async function prune(parent: string): Promise<void> {
    const containers = await docker.listContainers({
      all: true,
      filters: { label: [PROVIDER_LABELS.agentDir] },
    })
    const live = new Set(containers.map((c) => c.Labels[PROVIDER_LABELS.agentDir]))
    const now = Date.now()
    for (const name of await readdir(parent)) {
      if (live.has(name)) continue
      const found = await stat(join(parent, name)).catch(() => undefined)
      if (found && now - found.mtimeMs > PRUNE_AFTER_MS)
        await rm(join(parent, name), { recursive: true, force: true })
    }
  }

  async function makeFolder(labels: Labels, user: string): Promise<string | undefined> {
    const path = await folder(labels)
    const parent = await engineDir()
    if (!dir || !path || !parent) return undefined
    await mkdir(dir, { recursive: true, mode: 0o711 })
    await mkdir(parent, { recursive: true, mode: 0o711 })
    if (!pruned) {
      pruned = true
      await prune(parent).catch(() => undefined)
    }
    // Where it stays passable to others, the token still decides who becomes the channel.
    await makeSandboxFolder(path, user)
    return path
  }

  async function offer(labels: Labels | undefined): Promise<DirectOffer | undefined> {
    const path = await folder(labels)
    if (!path) return undefined
    const found = await stat(path).catch(() => undefined)
    if (!found?.isDirectory()) return undefined
    const name = `${randomBytes(4).toString('hex')}.sock`
    // Longer paths would be cut short by the listen (silently): no offer then.
    if (Buffer.byteLength(join(path, name)) > MAX_SOCKET_PATH) return undefined
    const token = randomBytes(TOKEN_BYTES)
    const server = createServer()
    const listening = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false))
      server.listen(join(path, name), () => resolve(true))
    })
    if (!listening) return undefined
    // The agent runs as the sandbox's user; the token, not the file's mode, decides.
    await chmod(join(path, name), 0o666).catch(() => undefined)
    let closed = false
    const close = (): void => {
      if (closed) return
      closed = true
      server.close()
      void rm(join(path, name), { force: true })
    }
    const accepted = new Promise<{ socket: Socket; head: Buffer }>((resolve) => {
      server.on('connection', (socket) => authenticate(socket, token, server, resolve))
    })
    return { line: `${token.toString('hex')} ${DIRECT_MOUNT}/${name}\n`, accepted, close }
  }

  async function drop(labels: Labels | undefined): Promise<void> {
    const path = await folder(labels)
    if (path) await rm(path, { recursive: true, force: true })
  }

  return {
    labels: (): Labels => (dir ? { [PROVIDER_LABELS.agentDir]: randomBytes(8).toString('hex') } : {}),
    makeFolder,
    offer,
    drop,
  }
}

/** Reads a connection's first line; the right token makes it the channel, anything else drops it. */
function authenticate(
  socket: Socket,
  token: Buffer,
  server: Server,
  resolve: (v: { socket: Socket; head: Buffer }) => void,
): void {
  const expected = Buffer.from(`${token.toString('hex')}\n`)
  let got = Buffer.alloc(0)
  const timer = setTimeout(() => socket.destroy(), TOKEN_TIMEOUT_MS)
  const onData = (chunk: Buffer): void => {
    got = Buffer.concat([got, chunk])
    // No answer before the whole token arrived: a prefix must not tell a guesser it is right so far.
    if (got.length < expected.length) return
    clearTimeout(timer)
    socket.off('data', onData)
    if (!timingSafeEqual(got.subarray(0, expected.length), expected)) {
      socket.destroy()
      return
    }
    socket.pause()
    server.close()
    resolve({ socket, head: got.subarray(expected.length) })
  }
  socket.on('data', onData)
  socket.on('error', () => clearTimeout(timer))
  socket.on('close', () => clearTimeout(timer))
}
