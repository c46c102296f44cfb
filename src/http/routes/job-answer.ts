import type { JobView } from '../../services/index.js'

/** How often a waiting answer writes a whitespace byte, so proxies and clients keep the connection (ms). */
export const KEEPALIVE_MS = 10_000

/**
 * The answer of a waiting `POST /v1/exec` once its job is accepted: status 200 and the headers
 * `X-Job-Id` / `Location: /v1/jobs/<id>` go out at once (with a first newline, which pushes them
 * through the socket), a newline every {@link KEEPALIVE_MS} while the job runs, then the job's JSON
 * view. JSON allows leading whitespace, so `res.json()` reads it as usual; a client whose connection
 * dies mid-wait already has the id to poll. `settle` must not reject: it resolves with the final view
 * (which may be `unknown`).
 */
export function acceptedJobAnswer(
  accepted: JobView,
  settle: () => Promise<JobView>,
  opts: { keepAliveMs?: number } = {},
): Response {
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
      void settle().then(
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
  return new Response(body, {
    status: 200,
    headers: {
      'content-type': 'application/json; charset=UTF-8',
      'cache-control': 'no-store',
      // Tells nginx-style proxies not to buffer the answer (the id must reach the client early).
      'x-accel-buffering': 'no',
      'x-job-id': accepted.id,
      location: `/v1/jobs/${accepted.id}`,
    },
  })
}
