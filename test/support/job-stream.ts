/*
 * Client-side helpers for job answers over HTTP: a server-sent-event reader for
 * `GET /v1/jobs/:id/events`, waited on event by event (never on sleeps).
 */
import type { SbxServer } from './sbx-cli.js'

/** One server-sent event. */
export interface SseEvent {
  readonly event: string
  readonly data: string
  /** The event's SSE `id` (output events: the job's output bytes up to the event's end). */
  readonly id?: string
}

/** An open event stream: every event seen so far, and a way to await the next matching one. */
export interface EventStream {
  readonly events: SseEvent[]
  /** Resolves with the first event (seen or future) that matches; rejects when the stream ends first or on timeout. */
  next(match: (e: SseEvent) => boolean, timeoutMs?: number): Promise<SseEvent>
  close(): void
}

/** Opens `GET /v1/jobs/<id>/events` (resuming after `lastEventId`) and reads it in the background. */
export function openJobEvents(
  srv: SbxServer,
  id: string,
  key?: string,
  opts: { lastEventId?: string } = {},
): Promise<EventStream> {
  return openEventStream(srv, `/v1/jobs/${id}/events`, key, opts)
}

/** Opens any server-sent event stream of the API (e.g. `GET /v1/events`) and reads it in the background. */
export async function openEventStream(
  srv: SbxServer,
  path: string,
  key?: string,
  opts: { lastEventId?: string } = {},
): Promise<EventStream> {
  const id = path
  const abort = new AbortController()
  const headers: Record<string, string> = opts.lastEventId ? { 'last-event-id': opts.lastEventId } : {}
  const res = await srv.fetch(path, {
    signal: abort.signal,
    headers,
    ...(key ? { key } : {}),
  })
  if (res.status !== 200 || !res.body)
    throw new Error(`events of ${id}: HTTP ${res.status} ${await res.text()}`)
  const events: SseEvent[] = []
  const waiters = new Set<() => void>()
  let ended: Error | undefined
  const wake = (): void => {
    for (const w of [...waiters]) w()
  }
  void (async () => {
    const reader = (res.body as ReadableStream<Uint8Array>).getReader()
    const decoder = new TextDecoder()
    let buf = ''
    try {
      for (;;) {
        const { value, done } = await reader.read()
        if (done) break
        buf += decoder.decode(value, { stream: true })
        let end: number
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const frame = buf.slice(0, end)
          buf = buf.slice(end + 2)
          // A comment-only frame (`: keepalive`) is no event.
          if (frame.split('\n').every((l) => l.startsWith(':'))) continue
          const event = /^event: ?(.*)$/m.exec(frame)?.[1] ?? 'message'
          const data = [...frame.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n')
          const eventId = /^id: ?(.*)$/m.exec(frame)?.[1]
          events.push({ event, data, ...(eventId !== undefined ? { id: eventId } : {}) })
          wake()
        }
      }
      ended = new Error(
        `the event stream of ${id} ended; its events: ${JSON.stringify(events.map((e) => [e.event, e.data.slice(0, 80)])).slice(0, 1500)}`,
      )
    } catch (err) {
      ended = new Error(`the event stream of ${id} failed: ${String(err)}`)
    }
    wake()
  })()
  return {
    events,
    next(match, timeoutMs = 60_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const hit = events.find(match)
          if (hit) return finish(() => resolve(hit))
          if (ended) finish(() => reject(ended))
        }
        const timer = setTimeout(
          () =>
            finish(() =>
              reject(
                new Error(`no matching event of ${id} within ${timeoutMs} ms: ${JSON.stringify(events)}`),
              ),
            ),
          timeoutMs,
        )
        const finish = (fn: () => void): void => {
          clearTimeout(timer)
          waiters.delete(check)
          fn()
        }
        waiters.add(check)
        check()
      })
    },
    close: () => abort.abort(),
  }
}
