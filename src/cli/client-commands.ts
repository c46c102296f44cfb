import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { AppError } from '../errors.js'
import { assertSessionId } from '../sessions/session-id.js'
import type { CliIO } from './output.js'
import { paint, UsageError } from './output.js'
import { sseEvents } from './sse.js'

/** Where the CLI's HTTP commands talk to, and with which key. */
export interface ServerTarget {
  url: string
  key: string
}

/** `--url` (or SBX_URL, default http://127.0.0.1:8080) and `--key` (or SBX_API_KEY, else `.sbx/api-key`). */
export function serverTarget(values: { url?: string | boolean; key?: string | boolean }): ServerTarget {
  const url =
    (typeof values.url === 'string' ? values.url : process.env['SBX_URL']) ?? 'http://127.0.0.1:8080'
  let key = typeof values.key === 'string' ? values.key : process.env['SBX_API_KEY']
  const file = join(process.cwd(), '.sbx', 'api-key')
  if (!key && existsSync(file)) key = readFileSync(file, 'utf8').trim()
  if (!key)
    throw new UsageError(
      'no API key: pass --key, set SBX_API_KEY, or run `sbx serve` here first (it writes .sbx/api-key)',
    )
  return { url: url.replace(/\/$/, ''), key }
}

/** Calls the API; non-2xx answers become AppErrors with the server's code and message. */
export async function callApi(t: ServerTarget, path: string, init: RequestInit = {}): Promise<Response> {
  const headers = new Headers(init.headers)
  headers.set('authorization', `Bearer ${t.key}`)
  if (init.body && !headers.has('content-type')) headers.set('content-type', 'application/json')
  let res: Response
  try {
    res = await fetch(`${t.url}${path}`, { ...init, headers })
  } catch (err) {
    throw new AppError(
      'UNAVAILABLE',
      `cannot reach ${t.url}: ${(err as Error).message}; is \`sbx serve\` running?`,
      { cause: err },
    )
  }
  if (res.ok) return res
  const body = (await res.json().catch(() => ({}))) as { error?: { code?: string; message?: string } }
  const code = (body.error?.code ?? 'INTERNAL') as ConstructorParameters<typeof AppError>[0]
  throw new AppError(code, body.error?.message ?? `HTTP ${res.status}`)
}

const CLIENT_OPTIONS = {
  url: { type: 'string' },
  key: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const

/** `sbx sessions ls|rm <id>`. */
export async function sessionsCommand(sub: 'ls' | 'rm', args: readonly string[], io: CliIO): Promise<number> {
  const usage = `usage: sbx sessions ${sub === 'ls' ? 'ls' : 'rm <id>'} [--url u] [--key k] [--json]`
  let parsed
  try {
    parsed = parseArgs({ args: [...args], options: CLIENT_OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`)
  }
  const { values, positionals } = parsed
  if (values.help) return (io.out(usage), 0)
  const t = serverTarget(values)
  if (sub === 'ls') {
    const { sessions } = (await (await callApi(t, '/v1/sessions')).json()) as {
      sessions: { id: string; provider: string; profile: string; createdAt: number }[]
    }
    if (values.json) io.out(JSON.stringify(sessions))
    else if (sessions.length === 0) io.out('no sessions')
    else
      for (const s of sessions)
        io.out(`${s.id}\t${s.provider}/${s.profile}\t${new Date(s.createdAt).toISOString()}`)
    return 0
  }
  const id = positionals[0]
  if (!id) throw new UsageError(usage)
  assertSessionId(id, 'session id')
  await callApi(t, `/v1/sessions/${encodeURIComponent(id)}`, { method: 'DELETE' })
  io.out(values.json ? JSON.stringify({ deleted: id }) : `deleted session ${id}`)
  return 0
}

/** `sbx agent run "<prompt>"`: starts an agent run on the server and streams its events. */
export async function agentRunCommand(args: readonly string[], io: CliIO): Promise<number> {
  const usage =
    'usage: sbx agent run "<prompt>" [--session id] [--model name] [--max-iterations n] [--url u] [--key k] [--json]'
  let parsed
  try {
    parsed = parseArgs({
      args: [...args],
      options: {
        ...CLIENT_OPTIONS,
        session: { type: 'string' },
        model: { type: 'string' },
        'max-iterations': { type: 'string' },
      },
      allowPositionals: true,
      strict: true,
    })
  } catch (err) {
    throw new UsageError(`${(err as Error).message}\n${usage}`)
  }
  const { values, positionals } = parsed
  if (values.help) return (io.out(usage), 0)
  const input = positionals.join(' ').trim()
  if (!input) throw new UsageError(usage)
  const t = serverTarget(values)
  const body = {
    input,
    ...(values.session ? { sessionId: values.session } : {}),
    ...(values.model ? { model: values.model } : {}),
    ...(values['max-iterations'] ? { maxIterations: Number(values['max-iterations']) } : {}),
  }
  const run = (await (
    await callApi(t, '/v1/agent-runs', { method: 'POST', body: JSON.stringify(body) })
  ).json()) as { id: string; warning?: string }
  if (!values.json) io.err(`run ${run.id} queued`)
  // E.g. no agent-run worker is connected to the fleet: the run waits for one.
  if (run.warning) io.err(paint(io, 'yellow', `warning: ${run.warning}`))
  const res = await callApi(t, `/v1/agent-runs/${run.id}/events`)
  let final:
    { state: string; output?: string; finishReason?: string; error?: { message: string } } | undefined
  for await (const { event, data } of sseEvents(res)) {
    if (values.json) io.out(data)
    if (event === 'end') final = JSON.parse(data) as typeof final
    else if (!values.json) {
      const e = JSON.parse(data) as { type: string; step: number; message?: string }
      io.err(
        `${paint(io, 'dim', `[step ${e.step}]`)} ${paint(io, e.type === 'ERROR' ? 'red' : 'cyan', e.type)}${e.message ? ` ${e.message}` : ''}`,
      )
    }
  }
  if (!final)
    throw new AppError(
      'UNAVAILABLE',
      'the event stream ended before the run did; check GET /v1/agent-runs/' + run.id,
    )
  if (!values.json) {
    if (final.output) io.out(final.output)
    const line = `finished: ${final.state} (${final.finishReason ?? '-'})${final.error ? `: ${final.error.message}` : ''}`
    io.err(paint(io, final.state === 'completed' ? 'green' : 'red', line))
  }
  return final.state === 'completed' ? 0 : 1
}
