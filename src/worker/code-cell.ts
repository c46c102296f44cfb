import { requireCode } from '../sandbox/code/sandbox-code.js'
import type { CodeResult } from '../sandbox/code/types.js'
import type { ExecJob } from '../queue/schemas.js'
import type { ExecResult, Sandbox } from '../sandbox/types.js'

/**
 * Runs a code job's cell (`job.code` set, the cell in `job.command`) in the leased sandbox's
 * stateful kernel: the sandbox's code capability, as `POST /v1/sessions/{id}/code` uses it, so the
 * routed cells and the API's cells of a session share one kernel. An exception in the cell is a
 * result (`exitCode` 1, `code.error`); a sandbox without the interpreter rejects with `UNSUPPORTED`.
 */
export async function runCodeJob(
  sandbox: Sandbox,
  job: ExecJob & { code: NonNullable<ExecJob['code']> },
  signal: AbortSignal,
): Promise<ExecResult> {
  const r = await requireCode(sandbox).run(
    {
      code: job.command,
      language: job.code.language,
      timeoutMs: job.timeoutMs,
      ...(job.env === undefined ? {} : { env: job.env }),
    },
    { signal },
  )
  return execResultOfCell(r, sandbox.ref.id)
}

/** A cell's result as an {@link ExecResult}: its streams, plus the `code` part. */
export function execResultOfCell(r: CodeResult, sandboxId: string): ExecResult {
  return {
    exitCode: r.error === null ? 0 : 1,
    stdout: r.stdout,
    stderr: r.stderr,
    timedOut: r.timedOut,
    truncated: r.truncated,
    durationMs: r.durationMs,
    sandboxId,
    code: {
      language: r.language,
      text: r.text,
      error: r.error,
      executionCount: r.executionCount,
      kernelRestarted: r.kernelRestarted,
      outputs: r.outputs.map((o) => ({ type: o.type, mimeTypes: Object.keys(o.data) })),
    },
  }
}
