/**
 * The fake E2B code interpreter (`/execute` on port 49999 of a real E2B sandbox, where a Jupyter
 * server runs): the service's own kernel script (src/sandbox/code) runs inside the fake sandbox's
 * container as an attached `docker exec`, one per sandbox and language, and the shared `/execute`
 * module (src/http/e2b/code-execute.ts) renders its answers as E2B's NDJSON.
 */
import { randomBytes } from 'node:crypto'
import type { Duplex } from 'node:stream'
import type Docker from 'dockerode'
import { kernelLaunch, KERNEL_DIR } from '../../../src/sandbox/code/kernel-runner.js'
import type { CodeLanguage, CodeResult, RunCodeRequest } from '../../../src/sandbox/code/types.js'
import { createDemuxer } from './docker-demux.js'

interface Pending {
  resolve: (r: CodeResult) => void
}

/** One running kernel: its exec stream and the cells waiting for their answer. */
class FakeKernel {
  private readonly pending = new Map<string, Pending>()
  private buffer = ''
  private stderr = ''
  private dead = false
  private count = 0

  private constructor(
    private readonly language: CodeLanguage,
    private readonly stream: Duplex,
    readonly restarted: boolean,
  ) {
    const demux = createDemuxer((id, payload) => {
      if (id === 2) this.stderr = (this.stderr + payload.toString('utf8')).slice(-4096)
      else this.onStdout(payload.toString('utf8'))
    })
    stream.on('data', demux)
    stream.on('end', () => this.onDeath())
    stream.on('error', () => this.onDeath())
  }

  static async start(
    container: Docker.Container,
    language: CodeLanguage,
    restarted: boolean,
  ): Promise<FakeKernel> {
    const spec = kernelLaunch(language)
    const script = Buffer.from(spec.script).toString('base64')
    const exec = await container.exec({
      Cmd: [
        'sh',
        '-c',
        `mkdir -p ${KERNEL_DIR} && echo ${script} | base64 -d > ${spec.file} && ${spec.command}`,
      ],
      AttachStdin: true,
      AttachStdout: true,
      AttachStderr: true,
      Tty: false,
    })
    const stream = (await exec.start({ hijack: true, stdin: true })) as Duplex
    return new FakeKernel(language, stream, restarted)
  }

  get alive(): boolean {
    return !this.dead
  }

  run(req: Omit<RunCodeRequest, 'language'>): Promise<CodeResult> {
    const id = `c-${randomBytes(6).toString('hex')}`
    const t0 = Date.now()
    return new Promise<CodeResult>((resolve) => {
      if (this.dead) return resolve(this.died(t0))
      const restarted = this.count++ === 0 && this.restarted
      this.pending.set(id, {
        resolve: (r) => resolve({ ...r, kernelRestarted: restarted, durationMs: Date.now() - t0 }),
      })
      this.stream.write(
        `${JSON.stringify({ id, code: req.code, timeoutMs: req.timeoutMs, env: req.env ?? {} })}\n`,
      )
    })
  }

  private onStdout(text: string): void {
    this.buffer += text
    let nl: number
    while ((nl = this.buffer.indexOf('\n')) >= 0) {
      const line = this.buffer.slice(0, nl)
      this.buffer = this.buffer.slice(nl + 1)
      if (!line.startsWith('\x1e')) continue
      const msg = JSON.parse(line.slice(1)) as Omit<CodeResult, 'language' | 'text' | 'kernelRestarted'> & {
        id: string
      }
      const p = this.pending.get(msg.id)
      if (!p) continue
      this.pending.delete(msg.id)
      const { id: _id, ...rest } = msg
      const main = rest.outputs.find((o) => o.type === 'result')
      p.resolve({
        ...rest,
        language: this.language,
        text: main?.data['text/plain'] ?? null,
        kernelRestarted: false,
      })
    }
  }

  private onDeath(): void {
    this.dead = true
    for (const p of this.pending.values()) p.resolve(this.died(Date.now()))
    this.pending.clear()
  }

  private died(t0: number): CodeResult {
    return {
      language: this.language,
      stdout: '',
      stderr: this.stderr,
      text: null,
      outputs: [],
      error: { name: 'KernelDied', value: 'the kernel died while running the cell', traceback: this.stderr },
      executionCount: 0,
      timedOut: false,
      truncated: false,
      durationMs: Date.now() - t0,
      kernelRestarted: false,
    }
  }

  close(): void {
    this.stream.destroy()
  }
}

/** The kernels of one fake sandbox (started on first use, again after one died). */
export class FakeKernels {
  private readonly kernels = new Map<CodeLanguage, Promise<FakeKernel>>()

  constructor(private readonly container: Docker.Container) {}

  async run(req: Omit<RunCodeRequest, 'timeoutMs'>, timeoutMs: number): Promise<CodeResult> {
    let k = this.kernels.get(req.language)
    let restarted = false
    if (k && !(await k.catch(() => undefined))?.alive) {
      this.kernels.delete(req.language)
      k = undefined
      restarted = true
    }
    if (!k) {
      k = FakeKernel.start(this.container, req.language, restarted)
      this.kernels.set(req.language, k)
    }
    return (await k).run({ code: req.code, timeoutMs, ...(req.env ? { env: req.env } : {}) })
  }

  close(): void {
    for (const k of this.kernels.values()) void k.then((x) => x.close()).catch(() => undefined)
    this.kernels.clear()
  }
}

const bySandbox = new WeakMap<Docker.Container, FakeKernels>()

/** The kernels of the sandbox whose container this is. */
export function kernelsOf(container: Docker.Container): FakeKernels {
  let k = bySandbox.get(container)
  if (!k) {
    k = new FakeKernels(container)
    bySandbox.set(container, k)
  }
  return k
}
