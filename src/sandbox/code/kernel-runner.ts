import { AppError } from '../../errors.js'
import type { ProcessInfo, Sandbox, SandboxProcesses } from '../types.js'
import { NODE_KERNEL } from './kernel-node.js'
import { PYTHON_KERNEL } from './kernel-python.js'
import type { CodeError, CodeLanguage, CodeOutput, CodeResult, RunCodeRequest } from './types.js'

/** Where the kernel scripts are written in the sandbox. */
export const KERNEL_DIR = '/tmp/.sbx-kernel'
/** Bytes of a kernel's answers kept by the process buffer (answers carry base64 images). */
const KERNEL_BUFFER_BYTES = 32 * 1024 * 1024
const READ_MAX_BYTES = 8 * 1024 * 1024
/** Past the cell's own timeout, how long the kernel gets to answer before SIGINT, then SIGKILL. */
const ANSWER_GRACE_MS = 3_000
const INTERRUPT_GRACE_MS = 3_000
const FAR = Number.MAX_SAFE_INTEGER

/** How a kernel is launched (see {@link kernelLaunch}). */
export interface KernelSpec {
  file: string
  script: string
  binary: string
  command: string
}

const KERNELS: Record<CodeLanguage, KernelSpec> = {
  python: {
    file: `${KERNEL_DIR}/kernel.py`,
    script: PYTHON_KERNEL,
    binary: 'python3',
    command: `exec python3 -u ${KERNEL_DIR}/kernel.py`,
  },
  javascript: {
    file: `${KERNEL_DIR}/kernel.js`,
    script: NODE_KERNEL,
    binary: 'node',
    command: `exec node ${KERNEL_DIR}/kernel.js 3>&1 4<&0 </dev/null >/dev/null`,
  },
}

/**
 * How a language's kernel is launched: the script, where it goes, and the shell command that starts
 * it (for other hosts of the same kernel).
 */
export function kernelLaunch(language: CodeLanguage): Readonly<KernelSpec> {
  return KERNELS[language]
}

/** The background-process id of a language's kernel (the same on every worker). */
export const kernelProcessId = (language: CodeLanguage): string => `sbx-kernel-${language}`

/** Offsets past the last answer seen, per sandbox and language (any earlier offset is also correct). */
const offsets = new Map<string, number>()
const OFFSETS_MAX = 10_000

function remember(key: string, offset: number | undefined): void {
  offsets.delete(key)
  if (offset === undefined) return
  offsets.set(key, offset)
  if (offsets.size > OFFSETS_MAX) offsets.delete(offsets.keys().next().value!)
}

interface RawAnswer {
  id: string
  stdout: string
  stderr: string
  outputs: CodeOutput[]
  error: CodeError | null
  executionCount: number
  timedOut: boolean
  truncated: boolean
  durationMs: number
}

/**
 * Runs a cell in the sandbox's long-lived kernel for `language`, starting it on first use (and again
 * after it died). The kernel is a background process of the sandbox ({@link SandboxProcesses}), so
 * its state belongs to the sandbox: any worker of the fleet reaches the same kernel. A cell is one
 * line on the kernel's stdin; its answer is the kernel's stdout line carrying the same request id,
 * read from an offset known to be before it. Needs `python3` / `node` in the image (`UNSUPPORTED`
 * otherwise) and the sandbox's background processes.
 */
export async function runKernelCode(
  sandbox: Sandbox,
  req: RunCodeRequest,
  opts: { signal?: AbortSignal } = {},
): Promise<CodeResult> {
  const procs = sandbox.processes
  if (!procs)
    throw new AppError(
      'UNSUPPORTED',
      `provider '${sandbox.ref.providerId}' has no background processes, which the code interpreter's kernel runs as`,
    )
  if (!req.code.trim()) throw new AppError('BAD_REQUEST', 'code is empty; give the cell to run')
  const spec = KERNELS[req.language]
  const pid = kernelProcessId(req.language)
  const key = `${sandbox.ref.providerId}/${sandbox.ref.id}/${req.language}`
  const signal = opts.signal
  const id = `c-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`
  const line = `${JSON.stringify({ id, code: req.code, timeoutMs: req.timeoutMs, env: req.env ?? {} })}\n`
  const payload = new TextEncoder().encode(line)
  const t0 = Date.now()

  let restarted = false
  let offset = offsets.get(key)
  const start = async (): Promise<void> => {
    restarted = (await startKernel(sandbox, procs, spec, pid, signal)) || restarted
    offset = 0
  }
  if (offset === undefined) {
    const state = await procs
      .read(pid, { stdoutOffset: FAR, stderrOffset: FAR, maxBytes: 0 }, sig(signal))
      .then((o) => o.process)
      .catch((err: unknown) => {
        if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
        throw err
      })
    if (!state || state.state !== 'running') await start()
    else offset = state.stdoutBytes
  }
  try {
    await procs.writeStdin(pid, payload, false, sig(signal))
  } catch (err) {
    if (!(err instanceof AppError && (err.code === 'NOT_FOUND' || err.code === 'CONFLICT'))) throw err
    await start()
    await procs.writeStdin(pid, payload, false, sig(signal)).catch((e: unknown) => {
      // The new kernel ended at once (no interpreter, a broken image): awaitAnswer reports why.
      if (!(e instanceof AppError && e.code === 'CONFLICT')) throw e
    })
  }

  const answer = await awaitAnswer(procs, pid, id, offset ?? 0, req.timeoutMs, key, signal)
  const base = { language: req.language, kernelRestarted: restarted, durationMs: Date.now() - t0 }
  if ('died' in answer) {
    remember(key, undefined)
    return {
      ...base,
      stdout: '',
      stderr: answer.stderr,
      text: null,
      outputs: [],
      error: {
        name: 'KernelDied',
        value: answer.why,
        traceback: answer.stderr,
      },
      executionCount: 0,
      timedOut: answer.timedOut,
      truncated: false,
    }
  }
  const result = answer.outputs.find((o) => o.type === 'result')
  return {
    ...base,
    stdout: answer.stdout,
    stderr: answer.stderr,
    text: result?.data['text/plain'] ?? null,
    outputs: answer.outputs,
    error: answer.error,
    executionCount: answer.executionCount,
    timedOut: answer.timedOut,
    truncated: answer.truncated,
  }
}

const sig = (signal?: AbortSignal): { signal?: AbortSignal } => (signal ? { signal } : {})

/** Writes the kernel script and starts the kernel; true when it replaced a dead one. */
async function startKernel(
  sandbox: Sandbox,
  procs: SandboxProcesses,
  spec: KernelSpec,
  pid: string,
  signal?: AbortSignal,
): Promise<boolean> {
  let replaced = false
  const old = await procs.remove(pid, sig(signal)).catch((err: unknown) => {
    if (err instanceof AppError && err.code === 'NOT_FOUND') return undefined
    throw err
  })
  if (old) replaced = true
  await sandbox.writeFile(spec.file, spec.script, sig(signal))
  const missing = `${spec.binary} is not installed in this sandbox`
  await procs
    .start(
      pid,
      {
        command: `command -v ${spec.binary} >/dev/null 2>&1 || { echo '${missing}' >&2; exit 127; }; ${spec.command}`,
        outputBufferBytes: KERNEL_BUFFER_BYTES,
        maxRunning: 1_000,
      },
      sig(signal),
    )
    .catch((err: unknown) => {
      // Another caller started it at the same moment: use that one.
      if (!(err instanceof AppError && err.code === 'CONFLICT')) throw err
    })
  return replaced
}

type Answer = RawAnswer | { died: true; why: string; stderr: string; timedOut: boolean }

/** Reads the kernel's stdout from `offset` until the line answering `id`, or its death. */
async function awaitAnswer(
  procs: SandboxProcesses,
  pid: string,
  id: string,
  offset: number,
  timeoutMs: number,
  key: string,
  signal?: AbortSignal,
): Promise<Answer> {
  let pending = ''
  let deadline = Date.now() + timeoutMs + ANSWER_GRACE_MS
  let interrupted = false
  for (;;) {
    const waitMs = Math.max(0, Math.min(20_000, deadline - Date.now()))
    let out
    try {
      out = await procs.read(
        pid,
        { stdoutOffset: offset, stderrOffset: FAR, maxBytes: READ_MAX_BYTES, waitMs },
        sig(signal),
      )
    } catch (err) {
      if (signal?.aborted) await procs.signal(pid, 'SIGINT', 0).catch(() => undefined)
      throw err
    }
    pending += out.stdout.data
    offset = out.stdout.nextOffset
    let nl: number
    while ((nl = pending.indexOf('\n')) >= 0) {
      const text = pending.slice(0, nl)
      pending = pending.slice(nl + 1)
      if (!text.startsWith('\x1e')) continue
      let msg: RawAnswer
      try {
        msg = JSON.parse(text.slice(1)) as RawAnswer
      } catch {
        continue
      }
      if (msg.id !== id) continue
      remember(key, offset - Buffer.byteLength(pending))
      return msg
    }
    if (out.stdout.data.length > 0) continue
    if (out.process.state !== 'running') return died(procs, pid, out.process, interrupted)
    if (Date.now() < deadline) continue
    if (!interrupted) {
      interrupted = true
      await procs.signal(pid, 'SIGINT', 0, sig(signal)).catch(() => undefined)
      deadline = Date.now() + INTERRUPT_GRACE_MS
      continue
    }
    const killed = await procs.signal(pid, 'SIGKILL', 2_000, sig(signal)).catch(() => out.process)
    return died(procs, pid, killed, true, 'it did not answer an interrupt after the timeout; it was killed')
  }
}

async function died(
  procs: SandboxProcesses,
  pid: string,
  p: ProcessInfo,
  timedOut: boolean,
  why?: string,
): Promise<Answer> {
  const tail = await procs
    .read(pid, { stdoutOffset: FAR, stderrOffset: Math.max(0, p.stderrBytes - 4096), maxBytes: 4096 })
    .then((o) => o.stderr.data)
    .catch(() => '')
  const binaryMissing = p.exitCode === 127 && /is not installed in this sandbox/.test(tail)
  if (binaryMissing)
    throw new AppError(
      'UNSUPPORTED',
      `${tail.trim()}: the code interpreter needs it in the image; use the built-in 'dev' profile (sandbox-router/dev) or an image that has it`,
    )
  const how = p.signal ? `was killed by ${p.signal}` : `exited with code ${p.exitCode ?? 'unknown'}`
  return {
    died: true,
    timedOut,
    stderr: tail,
    why: `the kernel ${how} while running the cell${why ? ` (${why})` : ''}; its state is lost, the next call starts a new kernel`,
  }
}
