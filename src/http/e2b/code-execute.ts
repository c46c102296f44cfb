/**
 * The `/execute` protocol of E2B's code interpreter (port 49999 of a sandbox), as the pinned
 * `@e2b/code-interpreter` SDK speaks it: a JSON body `{code, language?, context_id?, env_vars?}`,
 * answered with NDJSON lines `stdout` / `stderr` / `result` / `error` / `number_of_executions` /
 * `end_of_execution`, backed by the service's kernel ({@link CodeResult}). No HTTP framework here: plain Fetch types.
 */
import type { CodeLanguage, CodeResult, RunCodeRequest } from '../../sandbox/code/types.js'

/** A bad `/execute` request: the status and the message to answer with. */
export class E2BExecuteError extends Error {
  override readonly name = 'E2BExecuteError'
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message)
  }
}

const LANGUAGES: Record<string, CodeLanguage> = {
  python: 'python',
  python3: 'python',
  js: 'javascript',
  javascript: 'javascript',
  node: 'javascript',
  nodejs: 'javascript',
}

/** E2B's default contexts: the SDK sends no `context_id` unless the app made a context. */
const DEFAULT_CONTEXTS = new Set(['', 'default', 'python', 'javascript', 'js'])

/** The cell an `/execute` body asks for (without a timeout: the caller sets it). */
export function parseExecuteBody(body: unknown): Omit<RunCodeRequest, 'timeoutMs'> {
  if (typeof body !== 'object' || body === null || Array.isArray(body))
    throw new E2BExecuteError(400, 'the body must be a JSON object {code, language?}')
  const b = body as Record<string, unknown>
  if (typeof b['code'] !== 'string' || !b['code'].trim())
    throw new E2BExecuteError(400, 'code is required: a non-empty string, the cell to run')
  const langName = b['language'] === undefined || b['language'] === null ? 'python' : b['language']
  const language = typeof langName === 'string' ? LANGUAGES[langName.toLowerCase()] : undefined
  if (!language)
    throw new E2BExecuteError(
      400,
      `language ${JSON.stringify(langName)} is not supported by sandbox-router; use 'python' or 'js'`,
    )
  const ctx = b['context_id']
  if (ctx !== undefined && ctx !== null && !(typeof ctx === 'string' && DEFAULT_CONTEXTS.has(ctx)))
    throw new E2BExecuteError(
      400,
      `context ${JSON.stringify(ctx)}: sandbox-router keeps one kernel per language; pass language instead of a context`,
    )
  const env = b['env_vars']
  if (env !== undefined && env !== null) {
    if (
      typeof env !== 'object' ||
      Array.isArray(env) ||
      Object.values(env).some((v) => typeof v !== 'string')
    )
      throw new E2BExecuteError(400, 'env_vars must be an object of string values')
  }
  return {
    code: b['code'],
    language,
    ...(env ? { env: env as Record<string, string> } : {}),
  }
}

const FIELDS: Record<string, string> = {
  'text/plain': 'text',
  'text/html': 'html',
  'text/markdown': 'markdown',
  'image/svg+xml': 'svg',
  'image/png': 'png',
  'image/jpeg': 'jpeg',
  'application/pdf': 'pdf',
  'text/latex': 'latex',
  'application/json': 'json',
  'application/javascript': 'javascript',
}

/** The NDJSON lines answering one cell, in the order E2B's server sends them. */
export function executionLines(r: CodeResult): string[] {
  const ts = Date.now() * 1000
  const lines: object[] = []
  if (r.stdout) lines.push({ type: 'stdout', text: r.stdout, timestamp: ts })
  if (r.stderr) lines.push({ type: 'stderr', text: r.stderr, timestamp: ts })
  for (const o of r.outputs) {
    const msg: Record<string, unknown> = { type: 'result', is_main_result: o.type === 'result' }
    for (const [mime, value] of Object.entries(o.data)) {
      const field = FIELDS[mime]
      if (field === 'json') {
        try {
          msg['json'] = JSON.parse(value) as unknown
        } catch {
          msg['json'] = value
        }
      } else if (field) msg[field] = value
      else msg[mime] = value
    }
    lines.push(msg)
  }
  if (r.error) lines.push({ type: 'error', ...r.error })
  lines.push({ type: 'number_of_executions', execution_count: r.executionCount })
  lines.push({ type: 'end_of_execution' })
  return lines.map((l) => JSON.stringify(l))
}

/**
 * Answers an `/execute` request: parses it, runs the cell with `run` (which picks the timeout), and
 * streams the NDJSON lines. Bad input is a 400 with a plain-text message (what the SDK shows).
 */
export async function answerExecute(
  request: Request,
  run: (cell: Omit<RunCodeRequest, 'timeoutMs'>) => Promise<CodeResult>,
): Promise<Response> {
  let body: unknown
  try {
    body = JSON.parse(await request.text())
  } catch {
    return new Response('the body must be JSON {code, language?}', { status: 400 })
  }
  let cell
  try {
    cell = parseExecuteBody(body)
  } catch (err) {
    if (err instanceof E2BExecuteError) return new Response(err.message, { status: err.status })
    throw err
  }
  const r = await run(cell)
  return new Response(`${executionLines(r).join('\n')}\n`, {
    status: 200,
    headers: { 'content-type': 'application/x-ndjson' },
  })
}
