import type Docker from 'dockerode'
import type { Duplex } from 'node:stream'
import type { DirectOffer } from './direct-channel.js'
import { AppError } from '../../src/sandbox/index.js'
import { DockerStreamDemuxer } from './demux.js'
import { SETUP_HINT, engineStatus, mapEngineError } from './errors.js'
import {
  type AgentFrame,
  Frame,
  FrameDecoder,
  type HelloFrame,
  PROTOCOL_VERSION,
  decodeHello,
  encodeEmpty,
} from './protocol.js'

/** Receives the frames of one request id. */
export interface FrameHandler {
  onFrame(frame: AgentFrame): void
  /** The channel ended; the request will never complete. */
  onClose(error: AppError): void
}

/** Options of {@link AgentChannel.open}. */
export interface OpenChannelOptions {
  sandboxId: string
  /** `uid:gid` the agent (and so every command) runs as. */
  user: string
  /** Path of the agent binary inside the container. */
  agentPath: string
  /** How long to wait for the agent's HELLO (ms). */
  helloTimeoutMs: number
  /**
   * Offers the agent a socket of ours to speak on instead of the exec's pipes (direct-channel.ts);
   * undefined (or an offer the agent cannot reach) keeps the channel on the exec.
   */
  offerDirect?: () => Promise<DirectOffer | undefined>
}

const STDERR_TAIL_BYTES = 4096

/**
 * One long-lived connection to an `sbx-agent` process inside a container: a hijacked
 * `docker exec` whose stdin/stdout carry protocol frames, or, where the engine is on this machine,
 * a Unix socket of ours the agent connected to (the direct channel: frames skip dockerd and
 * containerd-shim; the exec then carries only stderr). Opening costs one exec; every command after
 * that is a frame on the open connection. When either connection ends (container killed or removed,
 * engine restarted, handle closed), every pending request fails with `SANDBOX_LOST`.
 */
export class AgentChannel {
  private readonly handlers = new Map<number, FrameHandler>()
  private readonly closeListeners = new Set<(error: AppError) => void>()
  private readonly decoder = new FrameDecoder()
  private nextId = 1
  private closedWith: AppError | undefined
  private stderrTail = ''
  private helloWaiter: ((hello: HelloFrame | AppError) => void) | undefined
  /** Whether the container has /bin/bash (from the agent's HELLO): without it there is no persistent shell. */
  hasBash = true
  /** Whether the agent writes uploads through a part file renamed into place (from its HELLO). */
  partWrites = false
  /** The direct channel's socket, once the agent connected to it. */
  private direct: Duplex | undefined
  /** Where frames go: the direct socket, else the exec's stdin. */
  private out: Duplex

  private constructor(
    private readonly socket: Duplex,
    readonly sandboxId: string,
  ) {
    this.out = socket
    const demux = new DockerStreamDemuxer(
      (chunk) => this.onStdout(chunk),
      (chunk) => {
        this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES)
      },
    )
    socket.on('data', (chunk: Buffer) => demux.push(chunk))
    socket.on('end', () => this.fail(this.lostError()))
    socket.on('close', () => this.fail(this.lostError()))
    socket.on('error', (err) => this.fail(this.lostError(err)))
  }

  /**
   * Starts the agent in a running container and waits for its HELLO. Not abortable by design:
   * it is bounded by `helloTimeoutMs`, and the handle shares one opening among its callers.
   */
  static async open(container: Docker.Container, opts: OpenChannelOptions): Promise<AgentChannel> {
    let exec: Docker.Exec
    let socket: Duplex
    const offer = await opts.offerDirect?.().catch(() => undefined)
    try {
      exec = await container.exec({
        Cmd: offer ? [opts.agentPath, '--direct'] : [opts.agentPath],
        AttachStdin: true,
        AttachStdout: true,
        AttachStderr: true,
        Tty: false,
        User: opts.user,
      })
      socket = await exec.start({
        hijack: true,
        stdin: true,
        Detach: false,
        Tty: false,
      })
    } catch (err) {
      offer?.close()
      if (engineStatus(err) === 404 || engineStatus(err) === 409 || engineStatus(err) === 500) {
        throw new AppError(
          'SANDBOX_LOST',
          `sandbox ${opts.sandboxId} is gone or not running; create a new sandbox`,
          { cause: err },
        )
      }
      throw mapEngineError(err, `starting the agent in sandbox ${opts.sandboxId}`, opts.sandboxId)
    }
    const channel = new AgentChannel(socket, opts.sandboxId)
    if (offer) {
      // The agent reads this line first; a HELLO on the exec instead means it could not connect.
      socket.write(offer.line)
      offer.accepted.then(
        ({ socket: direct, head }) => channel.attachDirect(direct, head),
        () => undefined,
      )
    }
    const hello = await channel.waitForHello(opts).finally(() => offer?.close())
    if (hello instanceof AppError) {
      channel.fail(hello)
      const info = await exec.inspect().catch(() => undefined)
      if (info && !info.Running && (info.ExitCode === 126 || info.ExitCode === 127)) {
        throw new AppError(
          'CONFIG_INVALID',
          `sandbox ${opts.sandboxId} has no runnable ${opts.agentPath} (${channel.stderrTail.trim() || `exit ${info.ExitCode}`}); ` +
            `${SETUP_HINT} (it compiles .sbx/sbx-agent, which the provider brings into any image) or set SBX_AGENT_BIN`,
        )
      }
      throw hello
    }
    if (hello.version !== PROTOCOL_VERSION) {
      channel.fail(new AppError('CONFIG_INVALID', 'agent protocol mismatch'))
      throw new AppError(
        'CONFIG_INVALID',
        `sandbox ${opts.sandboxId} runs sbx-agent protocol v${hello.version}, expected v${PROTOCOL_VERSION}; ${SETUP_HINT} to rebuild the agent (and the base image)`,
      )
    }
    channel.hasBash = hello.hasBash
    channel.partWrites = hello.partWrites
    return channel
  }

  private waitForHello(opts: OpenChannelOptions): Promise<HelloFrame | AppError> {
    return new Promise((resolve) => {
      const timer = setTimeout(
        () =>
          done(
            new AppError(
              'SANDBOX_LOST',
              `sandbox ${this.sandboxId}: the agent did not start within ${opts.helloTimeoutMs} ms`,
              { retryable: true },
            ),
          ),
        opts.helloTimeoutMs,
      )
      const done = (v: HelloFrame | AppError): void => {
        clearTimeout(timer)
        this.helloWaiter = undefined
        resolve(v)
      }
      this.helloWaiter = done
      if (this.closedWith) done(this.closedWith)
    })
  }

  /** Frames continue on the agent's connection to our socket (what it sent after its token first). */
  private attachDirect(direct: Duplex, head: Buffer): void {
    if (this.closedWith) {
      direct.destroy()
      return
    }
    this.direct = direct
    this.out = direct
    direct.on('data', (chunk: Buffer) => this.onStdout(chunk))
    direct.on('end', () => this.fail(this.lostError()))
    direct.on('close', () => this.fail(this.lostError()))
    direct.on('error', (err) => this.fail(this.lostError(err)))
    if (head.length > 0) this.onStdout(head)
    direct.resume()
  }

  /** Whether frames travel on the direct channel (a socket of ours) rather than through the engine. */
  get isDirect(): boolean {
    return this.direct !== undefined
  }

  /** Whether the connection has ended. */
  get closed(): boolean {
    return this.closedWith !== undefined
  }

  /** A fresh request id. */
  allocateId(): number {
    const id = this.nextId
    this.nextId = this.nextId >= 0xffff_fff0 ? 1 : this.nextId + 1
    return id
  }

  /** Routes frames with `id` to `handler` until {@link unsubscribe}. */
  subscribe(id: number, handler: FrameHandler): void {
    if (this.closedWith) throw this.closedWith
    this.handlers.set(id, handler)
  }

  unsubscribe(id: number): void {
    this.handlers.delete(id)
  }

  /** Sends one encoded frame; throws the close reason when the channel has ended. */
  send(frame: Buffer): void {
    if (this.closedWith) throw this.closedWith
    this.out.write(frame)
  }

  /** Like {@link send}, but ignores a closed channel (used for best-effort cancels). */
  trySend(frame: Buffer): void {
    if (!this.closedWith) this.out.write(frame)
  }

  /** Round trip through the agent; rejects when it does not answer within `timeoutMs`. */
  ping(timeoutMs: number): Promise<void> {
    const id = this.allocateId()
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.unsubscribe(id)
        reject(
          new AppError(
            'SANDBOX_LOST',
            `sandbox ${this.sandboxId}: the agent did not answer a ping within ${timeoutMs} ms`,
          ),
        )
      }, timeoutMs)
      try {
        this.subscribe(id, {
          onFrame: () => {
            clearTimeout(timer)
            this.unsubscribe(id)
            resolve()
          },
          onClose: (error) => {
            clearTimeout(timer)
            reject(error)
          },
        })
        this.send(encodeEmpty(Frame.PING, id))
      } catch (err) {
        clearTimeout(timer)
        this.unsubscribe(id)
        reject(err)
      }
    })
  }

  /** Calls `listener` once when the channel ends. */
  onClose(listener: (error: AppError) => void): void {
    if (this.closedWith) listener(this.closedWith)
    else this.closeListeners.add(listener)
  }

  /**
   * Ends the connection: the agent sees EOF, kills its commands' process groups and exits.
   * Pending requests fail with `reason`.
   */
  close(reason?: AppError): void {
    if (this.closedWith) return
    const error =
      reason ??
      new AppError('SANDBOX_LOST', `sandbox ${this.sandboxId}: the handle was closed; connect again`)
    this.direct?.end(() => this.direct?.destroy())
    this.socket.end(() => this.socket.destroy())
    this.fail(error)
  }

  private fail(error: AppError): void {
    if (this.closedWith) return
    this.closedWith = error
    this.helloWaiter?.(error)
    const handlers = [...this.handlers.values()]
    this.handlers.clear()
    for (const h of handlers) h.onClose(error)
    for (const l of this.closeListeners) l(error)
    this.closeListeners.clear()
    if (!this.socket.writableEnded) this.socket.destroy()
    if (this.direct && !this.direct.writableEnded) this.direct.destroy()
  }

  private lostError(cause?: unknown): AppError {
    const detail = this.stderrTail.trim() ? ` (agent stderr: ${this.stderrTail.trim().slice(-300)})` : ''
    return new AppError(
      'SANDBOX_LOST',
      `sandbox ${this.sandboxId}: the connection to its agent ended: the container was stopped or removed, ` +
        `or the engine restarted${detail}; create a new sandbox`,
      { cause },
    )
  }

  private onStdout(chunk: Buffer): void {
    let frames: AgentFrame[]
    try {
      frames = this.decoder.push(chunk)
    } catch (err) {
      this.fail(
        new AppError('INTERNAL', `sandbox ${this.sandboxId}: ${(err as Error).message}`, { cause: err }),
      )
      return
    }
    for (const frame of frames) {
      if (frame.type === Frame.HELLO && this.helloWaiter) this.helloWaiter(decodeHello(frame.payload))
      else this.handlers.get(frame.id)?.onFrame(frame)
    }
  }
}
