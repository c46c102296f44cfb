import { AppError, type ErrorCode } from '../errors.js'
import { callApi, type ServerTarget } from './client-commands.js'
import type { CliIO } from './output.js'
import { sseEvents } from './sse.js'

/** What `sbx exec --url` sends: the body of `POST /v1/exec`. */
export interface RemoteExecRequest {
  provider: string
  profile: string
  command: string
  sessionId?: string
  timeoutMs?: number
}

/** The job view `GET /v1/jobs/:id` (and the stream's `result` event) gives. */
interface JobView {
  id: string
  state: string
  result?: { exitCode: number | null; timedOut: boolean; truncated: boolean; durationMs: number }
  error?: { code?: string; message?: string }
}

/** Reconnects of the event stream after it broke before `result` (each resumes after the last event). */
const MAX_RECONNECTS = 5

/**
 * `sbx exec --url <server>`: runs the command on a running service (`sbx serve` / `sbx api`) through
 * its HTTP API, in the service's session: accepts the job (`POST /v1/exec?wait=false`), streams its
 * output live (`GET /v1/jobs/:id/events`, resumed with `Last-Event-ID` if the stream breaks), and
 * cancels it on Ctrl-C (`DELETE /v1/jobs/:id`). Resolves with the command's exit code (128 + 9 when
 * it has none); a job that ended without a result rejects with its error.
 */
export async function remoteExec(
  t: ServerTarget,
  req: RemoteExecRequest,
  opts: { json: boolean; signal: AbortSignal },
  io: CliIO,
): Promise<number> {
  const accepted = (await (
    await callApi(t, '/v1/exec?wait=false', { method: 'POST', body: JSON.stringify(req) })
  ).json()) as JobView
  const id = accepted.id
  const cancel = (): void =>
    void callApi(t, `/v1/jobs/${encodeURIComponent(id)}`, { method: 'DELETE' }).catch((err: unknown) =>
      io.err(`sbx: cancelling job ${id} failed: ${(err as Error).message}`),
    )
  opts.signal.addEventListener('abort', cancel, { once: true })
  try {
    const job = await follow(t, id, opts.json, io)
    if (opts.json) io.out(JSON.stringify(job.result ?? job))
    if (!job.result) {
      const code = (job.error?.code ?? 'INTERNAL') as ErrorCode
      throw new AppError(code, job.error?.message ?? `job ${id} ended ${job.state} without a result`)
    }
    if (!opts.json && job.result.timedOut)
      io.err(`sbx: timed out after ${job.result.durationMs.toFixed(0)} ms; the process group was killed`)
    else if (!opts.json && job.result.truncated)
      io.err('sbx: output truncated in the middle (past the output cap the head and the tail are kept)')
    return job.result.exitCode ?? 128 + 9
  } finally {
    opts.signal.removeEventListener('abort', cancel)
  }
}

/** Streams job `id`'s output to stdout / stderr (unless `quiet`) until its `result` event. */
async function follow(t: ServerTarget, id: string, quiet: boolean, io: CliIO): Promise<JobView> {
  let last: string | undefined
  for (let attempt = 0; ; attempt++) {
    const headers: Record<string, string> = last !== undefined ? { 'last-event-id': last } : {}
    const res = await callApi(t, `/v1/jobs/${encodeURIComponent(id)}/events`, { headers })
    let broke: unknown
    try {
      for await (const e of sseEvents(res)) {
        if (e.id !== undefined) last = e.id
        if (e.event === 'result') return JSON.parse(e.data) as JobView
        if (quiet) continue
        if (e.event === 'stdout') process.stdout.write(JSON.parse(e.data) as string)
        else if (e.event === 'stderr') process.stderr.write(JSON.parse(e.data) as string)
        else if (e.event === 'missed') {
          const { bytes } = JSON.parse(e.data) as { bytes: number }
          io.err(
            `sbx: ${bytes} bytes of live output were not retained (GET /v1/jobs/${id} has the whole output)`,
          )
        }
      }
    } catch (err) {
      broke = err // the connection dropped mid-stream: resume after the last event
    }
    if (attempt >= MAX_RECONNECTS)
      throw new AppError(
        'UNAVAILABLE',
        `the output stream of job ${id} broke ${attempt + 1} times before its result; the job was accepted ` +
          `and may still run: check GET /v1/jobs/${id}`,
        { cause: broke },
      )
  }
}
