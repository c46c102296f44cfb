import { spawn } from 'node:child_process'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { openJobEvents } from '../support/job-stream.js'
import type { EventStream, SseEvent } from '../support/job-stream.js'
import {
  configDir,
  fleetConfig,
  removeScope,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * Resuming a job's live output (`GET /v1/jobs/:id/events`): a client that loses the stream
 * reconnects with `Last-Event-ID` and gets exactly what it had not (no duplicates, no gaps); another
 * process (curl) reattaching to the running command sees its output so far, then live output, then
 * the result; what is no longer retained comes as one `missed` event. Through `sbx serve` and through
 * `sbx api` + `sbx worker` (the output crosses Redis), over HTTP only.
 */

const started: { stop(): Promise<void> }[] = []
const scopes: string[] = []
afterAll(async () => {
  for (const s of started.reverse()) await s.stop()
  for (const scope of scopes) await removeScope(scope)
}, 120_000)

const seq = (from: number, to: number): string => {
  let s = ''
  for (let i = from; i <= to; i++) s += `${i}\n`
  return s
}

/** Three parts of numbered lines, the second and third held back until the test writes go1 / go2. */
const COMMAND =
  'seq 1 3000; until [ -e go1 ]; do sleep 0.02; done; seq 3001 6000; ' +
  'until [ -e go2 ]; do sleep 0.02; done; seq 6001 9000'

const stdoutOf = (events: readonly SseEvent[]): string =>
  events
    .filter((e) => e.event === 'stdout')
    .map((e) => JSON.parse(e.data) as string)
    .join('')

/** Resolves once the stream's stdout so far contains `text`. */
const stdoutReaches = (s: EventStream, text: string): Promise<SseEvent> =>
  s.next((e) => e.event === 'stdout' && stdoutOf(s.events.slice(0, s.events.indexOf(e) + 1)).includes(text))

/** `curl -N` on the job's events: another process reading the stream. */
function curlEvents(
  srv: SbxServer,
  id: string,
): { out: () => string; ended: Promise<number>; reached(text: string): Promise<void> } {
  const child = spawn('curl', [
    '-sSN',
    '-H',
    `Authorization: Bearer ${srv.key}`,
    `${srv.url}/v1/jobs/${id}/events`,
  ])
  let out = ''
  const waiters = new Set<() => void>()
  child.stdout.setEncoding('utf8').on('data', (d: string) => {
    out += d
    for (const w of [...waiters]) w()
  })
  const ended = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? -1)))
  return {
    out: () => out,
    ended,
    reached: (text) =>
      new Promise<void>((resolve, reject) => {
        const check = (): void => {
          if (!stdoutOfRaw(out).includes(text)) return
          waiters.delete(check)
          resolve()
        }
        waiters.add(check)
        void ended.then(() =>
          reject(new Error(`curl ended before ${JSON.stringify(text)}: ${out.slice(-500)}`)),
        )
        check()
      }),
  }
}

/** Stdout events of a raw SSE text (as curl printed it). */
function parseRaw(raw: string): SseEvent[] {
  return raw
    .split('\n\n')
    .filter((f) => f.trim() && !f.split('\n').every((l) => l.startsWith(':')))
    .map((frame) => ({
      event: /^event: ?(.*)$/m.exec(frame)?.[1] ?? 'message',
      data: [...frame.matchAll(/^data: ?(.*)$/gm)].map((m) => m[1]).join('\n'),
      ...(/^id: ?(.*)$/m.exec(frame) ? { id: /^id: ?(.*)$/m.exec(frame)?.[1] } : {}),
    }))
}
const stdoutOfRaw = (raw: string): string => stdoutOf(parseRaw(raw.slice(0, raw.lastIndexOf('\n\n') + 2)))

async function startMode(mode: 'serve' | 'fleet'): Promise<SbxServer> {
  const prefix = uniqueName(mode === 'serve' ? 'resume' : 'resumef')
  scopes.push(prefix)
  if (mode === 'serve') {
    const srv = await startSbxServer('serve', { config: { queue: { prefix } } })
    started.push(srv)
    return srv
  }
  const config = fleetConfig(prefix)
  const dir = configDir(config)
  const api = await startSbxServer('api', { config, cwd: dir })
  started.push(api)
  const worker = await startSbxWorker({ config, cwd: dir })
  started.push(worker)
  return api
}

describe.each(['serve', 'fleet'] as const)('job events resume (%s)', (mode) => {
  let srv: SbxServer
  const session = `resume-${mode}`
  beforeAll(async () => {
    srv = await startMode(mode)
  }, 180_000)

  const submit = async (command: string): Promise<string> => {
    const res = await srv.post('/v1/exec?wait=false', {
      provider: 'docker',
      profile: 'default',
      command,
      sessionId: session,
    })
    expect(res.status).toBe(202)
    return ((await res.json()) as { id: string }).id
  }
  const touch = async (name: string): Promise<void> => {
    const res = await srv.fetch(`/v1/sessions/${session}/files?path=${name}`, {
      method: 'PUT',
      body: '',
      headers: { 'content-type': 'application/octet-stream' },
    })
    expect(res.status).toBe(200)
  }

  test('disconnect mid-job, reconnect with Last-Event-ID: the stdout adds up to the full output exactly; curl reattaches', async () => {
    const id = await submit(COMMAND)

    const first = await openJobEvents(srv, id)
    await stdoutReaches(first, '\n3000\n')
    first.close()
    const seen = [...first.events]
    const lastId = seen.filter((e) => e.id !== undefined).at(-1)?.id
    expect(lastId).toMatch(/^\d+$/)

    // Output goes on while the client is away; another process attaches and sees it all so far.
    await touch('go1')
    const curl = curlEvents(srv, id)
    await curl.reached('\n6000\n')
    expect(stdoutOfRaw(curl.out()).startsWith(seq(1, 6000))).toBe(true)

    const second = await openJobEvents(srv, id, undefined, { lastEventId: lastId as string })
    await touch('go2')
    const result = JSON.parse((await second.next((e) => e.event === 'result', 60_000)).data) as {
      state: string
      result: { stdout: string }
    }
    second.close()
    expect(result.state).toBe('completed')
    expect(result.result.stdout).toBe(seq(1, 9000))
    expect(stdoutOf(seen) + stdoutOf(second.events)).toBe(seq(1, 9000))
    expect(second.events.some((e) => e.event === 'missed')).toBe(false)
    const ids = [...seen, ...second.events].filter((e) => e.id !== undefined).map((e) => Number(e.id))
    expect(ids).toEqual([...ids].sort((a, b) => a - b))
    expect(new Set(ids).size).toBe(ids.length)

    // The reattached process got the same whole output, then the result, and its stream ended.
    expect(await curl.ended).toBe(0)
    const events = parseRaw(curl.out())
    expect(stdoutOf(events)).toBe(seq(1, 9000))
    expect(events.at(-1)?.event).toBe('result')
  }, 180_000)

  test('what is no longer retained comes as one missed event with its size; the rest follows in order', async () => {
    // 1.5 MiB of live output (768 KiB per stream, the head of the 1 MiB cap): more than the 1 MiB retained.
    const id = await submit(
      "head -c 786432 /dev/zero | tr '\\0' o; head -c 786432 /dev/zero | tr '\\0' e >&2",
    )
    // A first reader to the end: then the job is done and only the retained output is left.
    const live = await openJobEvents(srv, id)
    await live.next((e) => e.event === 'result')
    live.close()
    const late = await openJobEvents(srv, id)
    await late.next((e) => e.event === 'result')
    late.close()
    const missed = late.events.filter((e) => e.event === 'missed')
    expect(missed).toHaveLength(1)
    expect(late.events[0]?.event).toBe('missed')
    const bytes = (JSON.parse(missed[0]?.data ?? '{}') as { bytes: number }).bytes
    const got = late.events
      .filter((e) => e.event === 'stdout' || e.event === 'stderr')
      .reduce((n, e) => n + Buffer.byteLength(JSON.parse(e.data) as string), 0)
    expect(bytes).toBeGreaterThan(0)
    expect(bytes + got).toBe(2 * 786432)
    expect(Number(late.events.filter((e) => e.id).at(-1)?.id)).toBe(2 * 786432)

    const bad = await srv.fetch(`/v1/jobs/${id}/events`, { headers: { 'last-event-id': 'yesterday' } })
    expect(bad.status).toBe(400)
    expect(((await bad.json()) as { error: { message: string } }).error.message).toMatch(/Last-Event-ID/)
    // The OpenAPI document describes the header.
    const doc = (await (await srv.fetch('/openapi.json')).json()) as {
      paths: Record<string, { get?: { parameters?: { name: string; in: string }[] } }>
    }
    const params = doc.paths['/v1/jobs/{id}/events']?.get?.parameters ?? []
    expect(params).toContainEqual(expect.objectContaining({ name: 'last-event-id', in: 'header' }))
  }, 180_000)
})
