/**
 * Processes of a fake E2B sandbox, run for real inside its Docker container with `docker exec`
 * (one exec per process, attached, stdout and stderr kept apart). The first line a process prints
 * is its own pid inside the container (`echo $$; exec …`), so pids are real: `kill <pid>` run inside
 * the sandbox reaches the process, as with envd.
 */
import type { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import { createDemuxer } from './docker-demux.js'

/** What envd's `process.ProcessConfig` carries. */
export interface ProcessConfig {
  cmd: string
  args: string[]
  envs: Record<string, string>
  cwd?: string
}

/** One envd process event, in its proto3 JSON shape (`process.ProcessEvent`). */
export type ProcessEvent =
  | { start: { pid: number } }
  | { data: { stdout: string } | { stderr: string } }
  | { end: { exitCode: number; exited: boolean; status: string; error?: string } }
  | { keepalive: Record<string, never> }

/** Receives the events of a process (its start event first). */
export type ProcessListener = (event: ProcessEvent) => void

/** Options of {@link FakeProcess.start}. */
export interface StartProcessOptions {
  config: ProcessConfig
  /** Keep stdin open for SendInput / CloseStdin; otherwise the process reads EOF at once. */
  stdin: boolean
  /** `uid[:gid]` or a user name, as docker exec takes it; the container's user when absent. */
  user?: string
  /** Environment of the sandbox (create-time `envVars`), under the process's own. */
  sandboxEnvs: Record<string, string>
  tag?: string
}

/** A process running in a fake sandbox. */
export class FakeProcess {
  pid = 0
  private readonly listeners = new Set<ProcessListener>()
  private exitEvent: ProcessEvent | undefined
  private pidLine: Buffer[] = []
  private readonly earlyStderr: Buffer[] = []
  /** Resolves with the exit code once the process ended and its output is drained. */
  readonly exited: Promise<number>
  private resolveExit!: (code: number) => void

  private constructor(
    private readonly stream: Duplex,
    private readonly exec: Docker.Exec,
    readonly config: ProcessConfig,
    readonly stdinOpen: boolean,
    readonly tag: string | undefined,
  ) {
    this.exited = new Promise((resolve) => (this.resolveExit = resolve))
  }

  /**
   * Starts `config` in `container`. Resolves once the process runs and its pid is known; `onEvent`
   * already receives the start event and everything after it.
   */
  static async start(
    container: Docker.Container,
    opts: StartProcessOptions,
    onEvent: ProcessListener,
  ): Promise<FakeProcess> {
    const { config } = opts
    const env = { ...opts.sandboxEnvs, ...config.envs }
    const exec = await container.exec({
      Cmd: ['/bin/sh', '-c', 'echo $$; exec "$@"', 'sh', config.cmd, ...config.args],
      AttachStdin: opts.stdin,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
      Env: Object.entries(env).map(([k, v]) => `${k}=${v}`),
      ...(config.cwd ? { WorkingDir: config.cwd } : {}),
      ...(opts.user ? { User: opts.user } : {}),
    })
    const stream = (await exec.start({ hijack: true, stdin: opts.stdin })) as Duplex
    const proc = new FakeProcess(stream, exec, config, opts.stdin, opts.tag)
    proc.listeners.add(onEvent)
    const started = new Promise<void>((resolve, reject) => {
      const demux = createDemuxer((id, payload) => {
        if (id === 1) proc.onStdout(payload, resolve)
        else proc.onStderr(payload)
      })
      stream.on('data', demux)
      stream.on('error', reject)
      stream.on('end', () => {
        if (proc.pid > 0) void proc.finish()
        // Never started (docker reports e.g. a missing working directory on the stream).
        else reject(new Error(Buffer.concat(proc.pidLine).toString().trim() || 'process did not start'))
      })
    })
    await started
    return proc
  }

  /** Adds a listener (envd `Connect`); it gets a start event, then what follows. */
  subscribe(listener: ProcessListener): () => void {
    listener({ start: { pid: this.pid } })
    if (this.exitEvent) {
      listener(this.exitEvent)
      return () => undefined
    }
    this.listeners.add(listener)
    return () => this.listeners.delete(listener)
  }

  /** Removes a listener; the process keeps running (envd semantics on a dropped stream). */
  unsubscribe(listener: ProcessListener): void {
    this.listeners.delete(listener)
  }

  get running(): boolean {
    return this.exitEvent === undefined
  }

  /** Writes to the process's stdin. */
  writeStdin(data: Buffer): void {
    this.stream.write(data)
  }

  /** Closes the process's stdin (EOF); stdout and stderr keep flowing. */
  closeStdin(): void {
    this.stream.end()
  }

  private emit(event: ProcessEvent): void {
    for (const l of [...this.listeners]) l(event)
  }

  /** docker copies stdout and stderr separately: stderr can overtake the pid line, so it waits for it. */
  private onStderr(payload: Buffer): void {
    if (this.pid === 0) this.earlyStderr.push(payload)
    else this.emit({ data: { stderr: payload.toString('base64') } })
  }

  private onStdout(payload: Buffer, onPid: () => void): void {
    if (this.pid === 0) {
      const nl = payload.indexOf(0x0a)
      if (nl < 0) {
        this.pidLine.push(payload)
        return
      }
      const line = Buffer.concat([...this.pidLine, payload.subarray(0, nl)])
      const pid = Number(line.toString())
      if (!Number.isInteger(pid) || pid <= 0) {
        this.pidLine = [line, payload.subarray(nl)]
        return
      }
      this.pid = pid
      this.pidLine = []
      this.emit({ start: { pid: this.pid } })
      for (const early of this.earlyStderr.splice(0))
        this.emit({ data: { stderr: early.toString('base64') } })
      onPid()
      payload = payload.subarray(nl + 1)
    }
    if (payload.length) this.emit({ data: { stdout: payload.toString('base64') } })
  }

  private async finish(): Promise<void> {
    const info = await this.exec.inspect()
    const code = info.ExitCode ?? -1
    // docker exec reports a signal death as 128+n; envd would say exited=false, exitCode=-1.
    this.exitEvent = {
      end: {
        exitCode: code,
        exited: true,
        status: `exit status ${code}`,
        ...(code !== 0 ? { error: `exit status ${code}` } : {}),
      },
    }
    this.emit(this.exitEvent)
    this.listeners.clear()
    this.resolveExit(code)
  }
}
