/*
 * WebSocket helpers of the terminal e2e tests (`/v1/sessions/{id}/terminal`, subprotocol
 * sbx.terminal.v1): collect what a socket received, wait for it to open, close or be refused.
 */
import type WebSocket from 'ws'

/** Collects a WebSocket's messages; `until` resolves once the text seen so far passes `test`. */
export function collect(ws: WebSocket): {
  text: () => string
  until: (test: (seen: string) => boolean, what: string) => Promise<string>
  json: () => Record<string, unknown>[]
} {
  let seen = ''
  const controls: Record<string, unknown>[] = []
  const waiters: (() => void)[] = []
  ws.on('message', (data, isBinary) => {
    if (isBinary) seen += Buffer.from(data as Buffer).toString('utf8')
    else controls.push(JSON.parse(String(data)) as Record<string, unknown>)
    for (const w of waiters.splice(0)) w()
  })
  return {
    text: () => seen,
    json: () => controls,
    until: (t, what) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`timed out waiting for ${what}; saw ${JSON.stringify(seen)}`)),
          20_000,
        )
        const check = (): void => {
          if (t(seen)) {
            clearTimeout(timer)
            resolve(seen)
          } else waiters.push(check)
        }
        check()
      }),
  }
}

/** Resolves once the socket opened; rejects on its error. */
export const opened = (ws: WebSocket): Promise<void> =>
  new Promise((resolve, reject) => {
    ws.once('open', () => resolve())
    ws.once('error', reject)
  })
/** The HTTP status of a refused upgrade. */
export const refusedWith = (ws: WebSocket): Promise<number> =>
  new Promise((resolve, reject) => {
    ws.once('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0))
    ws.once('open', () => reject(new Error('the WebSocket opened')))
  })
/** The close code and reason, once the socket closed. */
export const closed = (ws: WebSocket): Promise<{ code: number; reason: string }> =>
  new Promise((resolve) => ws.once('close', (code, reason) => resolve({ code, reason: reason.toString() })))
