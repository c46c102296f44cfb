import type { JobView } from '../../services/index.js'

/** How often a waiting answer writes a whitespace byte, so proxies and clients keep the connection (ms). */
export const KEEPALIVE_MS = 10_000

/**
 * How long a waiting answer holds its status line for the job's end (ms): a job that ends within it
 * is answered in one piece (with `Content-Length`), a longer one gets its status and id at once after
 * it and its view when it ends.
 */
export const ANSWER_GRACE_MS = 250

/** Options of {@link acceptedJobAnswer}. */
export interface JobAnswerOptions {
  /** @default {@link KEEPALIVE_MS} */
  keepAliveMs?: number
  /** @default {@link ANSWER_GRACE_MS} */
  graceMs?: number
}

/**
 * The answer of a waiting `POST /v1/exec` once its job is accepted. A job that ends within
 * {@link ANSWER_GRACE_MS} is answered at once, in one piece: status 200, the headers `X-Job-Id` /
 * `Location: /v1/jobs/<id>` and the job's JSON view. A longer job gets its status and headers when
 * the grace ends (with a first newline, which pushes them through the socket), a newline every
 * {@link KEEPALIVE_MS} while it runs, then its view. JSON allows leading whitespace, so `res.json()`
 * reads it as usual; a client whose connection dies mid-wait already has the id to poll. `settle`
 * must not reject: it resolves with the final view (which may be `unknown`).
 */
export async function acceptedJobAnswer(
  accepted: JobView,
  settle: () => Promise<JobView>,
  opts: JobAnswerOptions = {},
): Promise<Response> {
  const headers = {
    'content-type': 'application/json; charset=UTF-8',
    'cache-control': 'no-store',
    // Tells nginx-style proxies not to buffer the answer (the id must reach the client early).
    'x-accel-buffering': 'no',
    'x-job-id': accepted.id,
    location: `/v1/jobs/${accepted.id}`,
  }
  const settled = settle()
  let graceTimer: NodeJS.Timeout | undefined
  const early = await Promise.race([
    settled,
    new Promise<undefined>((resolve) => {
      graceTimer = setTimeout(() => resolve(undefined), opts.graceMs ?? ANSWER_GRACE_MS)
    }),
  ])
  clearTimeout(graceTimer)
  // Most commands end within the grace: one write, no stream to drive.
  if (early) return new Response(`${JSON.stringify(early)}\n`, { status: 200, headers })

  const encoder = new TextEncoder()
  let timer: NodeJS.Timeout | undefined
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      const write = (text: string): boolean => {
        try {
          controller.enqueue(encoder.encode(text))
          return true
        } catch {
          return false // the client is gone
        }
      }
      write('\n')
      timer = setInterval(() => {
        if (!write('\n')) clearInterval(timer)
      }, opts.keepAliveMs ?? KEEPALIVE_MS)
      void settled.then(
        (view) => {
          clearInterval(timer)
          if (write(`${JSON.stringify(view)}\n`)) controller.close()
        },
        (err: unknown) => {
          clearInterval(timer)
          controller.error(err)
        },
      )
    },
    cancel() {
      clearInterval(timer)
    },
  })
  return new Response(body, { status: 200, headers })
}
