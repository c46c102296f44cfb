import type { IncomingMessage, ServerResponse } from 'node:http'
import { posix } from 'node:path'
import { AppError } from '../../../src/errors.js'
import type { Sandbox as BackendSandbox } from '../../../src/sandbox/types.js'
import type { FakeContext } from './control-plane.js'
import { readBody, readJson, sendError, sendJson } from './http-util.js'
import { DOWNLOAD_BOUNDARY, boundaryOf, downloadEnd, downloadPart, parseMultipart } from './multipart.js'
import { touch } from './lifecycle.js'

/** Daytona's daemon accepts only these env names. */
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/
/** The daemon's working directory, against which relative paths resolve. */
const HOME = '/workspace'
/** Without a timeout the daemon waits as long as the command runs; the fake caps that at a day. */
const NO_TIMEOUT_MS = 24 * 60 * 60 * 1000

/** Per-route handling times of the toolbox (ms), for the bench. */
export type Timings = Map<string, number[]>
/** Per-route bytes of response bodies the toolbox sent (what crossed the wire to the client). */
export type SentBytes = Map<string, number>

/** Counts what `res` writes, under the route shape `route()` names once the response ends. */
function countSent(res: ServerResponse, sent: SentBytes, route: () => string): void {
  let bytes = 0
  const size = (chunk: unknown): number =>
    typeof chunk === 'string' ? Buffer.byteLength(chunk) : chunk instanceof Uint8Array ? chunk.length : 0
  const write = res.write.bind(res) as (...args: unknown[]) => boolean
  const end = res.end.bind(res) as (...args: unknown[]) => ServerResponse
  res.write = ((chunk: unknown, ...rest: unknown[]) => {
    bytes += size(chunk)
    return write(chunk, ...rest)
  }) as ServerResponse['write']
  res.end = ((chunk?: unknown, ...rest: unknown[]) => {
    if (typeof chunk !== 'function') bytes += size(chunk)
    const key = route()
    sent.set(key, (sent.get(key) ?? 0) + bytes)
    bytes = 0
    return end(chunk, ...rest)
  }) as ServerResponse['end']
}

/**
 * `POST /process/execute`: like the daemon, the command is piped to the shell's stdin in a
 * process group of its own, stdout and stderr share one buffer, and on timeout the group is
 * killed and 408 is answered with the output discarded.
 */
async function execute(backend: BackendSandbox, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = ((await readJson(req)) ?? {}) as {
    command?: unknown
    cwd?: unknown
    envs?: unknown
    timeout?: unknown
  }
  if (typeof body.command !== 'string' || body.command.trim() === '') {
    sendError(res, req, 400, 'bad request: command cannot be empty or whitespace-only')
    return
  }
  const envs = (typeof body.envs === 'object' && body.envs !== null ? body.envs : {}) as Record<
    string,
    string
  >
  const bad = Object.keys(envs).find((k) => !ENV_NAME.test(k))
  if (bad !== undefined) {
    sendError(res, req, 400, `bad request: invalid environment variable name: '${bad}'`)
    return
  }
  const timeout = typeof body.timeout === 'number' && body.timeout > 0 ? body.timeout * 1000 : NO_TIMEOUT_MS
  try {
    const r = await backend.exec({
      command: 'if [ -x /bin/bash ]; then exec /bin/bash 2>&1; fi; exec /bin/sh 2>&1',
      cwd: typeof body.cwd === 'string' ? body.cwd : HOME,
      env: envs,
      stdin: body.command,
      timeoutMs: timeout,
      outputCapBytes: 512 * 1024 * 1024,
    })
    if (r.timedOut) {
      sendError(res, req, 408, 'command execution timeout')
      return
    }
    sendJson(res, 200, { exitCode: r.exitCode ?? -1, result: r.stdout })
  } catch (err) {
    if (err instanceof AppError && err.code === 'BAD_REQUEST') {
      // The daemon reports a failed start (e.g. a missing cwd) as exit code -1 with the error text.
      sendJson(res, 200, { exitCode: -1, result: err.message })
      return
    }
    throw err
  }
}

async function upload(backend: BackendSandbox, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const boundary = boundaryOf(req.headers['content-type'])
  if (!boundary) {
    sendJson(res, 400, { errors: ['invalid multipart form'] })
    return
  }
  const parts = parseMultipart(await readBody(req), boundary)
  const dests = new Map<string, string>()
  const errors: string[] = []
  const files: Array<{ path: string; bytes: number }> = []
  for (const part of parts) {
    const index = /^files\[(.+)\]\.(path|file)$/.exec(part.name)
    if (!index) continue
    if (index[2] === 'path') {
      dests.set(index[1] ?? '', part.data.toString('utf8').trim())
      continue
    }
    const dest = dests.get(index[1] ?? '')
    if (!dest) {
      errors.push(`file[${index[1]}]: missing .path metadata`)
      continue
    }
    try {
      await backend.writeFile(posix.resolve(HOME, dest), part.data)
      files.push({ path: dest, bytes: part.data.length })
    } catch (err) {
      const text = err instanceof Error ? err.message : String(err)
      // The daemon's wording (`os.Create` failing), e.g. "/etc/x: create: open /etc/x: permission denied".
      errors.push(
        /\b(EACCES|EPERM|EROFS)\b/.test(text)
          ? `${dest}: create: open ${dest}: permission denied`
          : `${dest}: ${text}`,
      )
    }
  }
  sendJson(res, errors.length ? 400 : 200, errors.length ? { errors, files } : { files })
}

/**
 * The daemon's error of one file it could not read (`fs/download_files.go`, `classifyPathStatError`):
 * missing → 404 `FILE_NOT_FOUND`, no permission → 403 `FILE_ACCESS_DENIED`, a directory → 400
 * `INVALID_FILE_PATH`, anything else → 500 `FILE_READ_FAILED`. The backend's errors name the errno.
 */
function readFailure(err: unknown, path: string): { statusCode: number; code: string; message: string } {
  const text = err instanceof Error ? err.message : String(err)
  if (err instanceof AppError && err.code === 'NOT_FOUND')
    return { statusCode: 404, code: 'FILE_NOT_FOUND', message: `file not found: ${path}` }
  if (/\b(EACCES|EPERM)\b/.test(text))
    return { statusCode: 403, code: 'FILE_ACCESS_DENIED', message: `permission denied: ${path}` }
  if (/\b(EISDIR|directory)\b/.test(text))
    return {
      statusCode: 400,
      code: 'INVALID_FILE_PATH',
      message: `invalid file path: path points to a directory: ${path}`,
    }
  return { statusCode: 500, code: 'FILE_READ_FAILED', message: `failed to open file: ${text}` }
}

async function download(
  ctx: FakeContext,
  backend: BackendSandbox,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const body = (await readJson(req)) as { paths?: unknown } | undefined
  const paths = Array.isArray(body?.paths) ? body.paths.filter((p): p is string => typeof p === 'string') : []
  if (paths.length === 0) {
    sendJson(res, 400, { error: 'request body must be {"paths": [ ... ]} and non-empty' })
    return
  }
  const chunks: Buffer[] = []
  for (const path of paths) {
    try {
      chunks.push(downloadPart('file', path, Buffer.from(await backend.readFile(posix.resolve(HOME, path)))))
    } catch (err) {
      const payload = {
        ...readFailure(err, path),
        // Current daemons say who answered; the SDK picks its error class by (source, code).
        ...(ctx.daemonErrorSource ? { source: 'DAYTONA_DAEMON' } : {}),
        timestamp: new Date().toISOString(),
        path,
        method: 'POST',
      }
      chunks.push(downloadPart('error', path, Buffer.from(JSON.stringify(payload))))
    }
  }
  chunks.push(downloadEnd())
  const payload = Buffer.concat(chunks)
  res.writeHead(200, {
    'content-type': `multipart/form-data; boundary=${DOWNLOAD_BOUNDARY}`,
    'content-length': String(payload.length),
  })
  res.end(payload)
}

/** Routes `/toolbox/{sandboxId}/...` (the daemon behind Daytona's toolbox proxy). */
export async function handleToolbox(
  ctx: FakeContext,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
  timings: Timings,
  sent: SentBytes,
): Promise<void> {
  const [, sandboxId, ...rest] = url.pathname.split('/').filter(Boolean)
  const route = `${req.method} /${rest.join('/')}`
  // Session routes are counted per shape: ids are replaced by placeholders.
  const shape = `${req.method} /${rest.map((part, i) => (i === 2 || i === 4 ? '{id}' : part)).join('/')}`
  countSent(res, sent, () => (rest[0] === 'process' && rest[1] === 'session' ? shape : route))
  const record = sandboxId ? ctx.records.get(sandboxId) : undefined
  if (!record) {
    sendError(res, req, 404, `sandbox container not found: ${sandboxId}`)
    return
  }
  // Daytona's proxy counts every toolbox request as activity, whatever the answer.
  touch(record)
  if (!record.backend || record.state === 'destroying' || record.state === 'destroyed') {
    sendError(res, req, 404, `sandbox container not found: ${sandboxId}`)
    return
  }
  if (record.state !== 'started') {
    // The runner finds no address for a container that does not run.
    sendError(res, req, 400, `no IP address found. Is the Sandbox started? (state: ${record.state})`)
    return
  }
  const entry = { req, res }
  const open = ctx.inflight.get(record.id) ?? new Set()
  ctx.inflight.set(record.id, open.add(entry))
  record.openRequests++
  res.on('close', () => {
    record.openRequests--
    ctx.inflight.get(record.id)?.delete(entry)
    touch(record)
  })
  const started = performance.now()
  if (await ctx.sessions.handle(record.backend, req, res, rest)) {
    // Timed per route shape.
    const list = timings.get(shape) ?? []
    list.push(performance.now() - started)
    timings.set(shape, list)
    return
  }
  switch (route) {
    case 'POST /process/execute':
      await execute(record.backend, req, res)
      break
    case 'POST /files/bulk-upload':
      await upload(record.backend, req, res)
      break
    case 'POST /files/bulk-download':
      await download(ctx, record.backend, req, res)
      break
    default:
      sendError(res, req, 404, `fake Daytona toolbox: no route ${route}`)
      return
  }
  const list = timings.get(route) ?? []
  list.push(performance.now() - started)
  timings.set(route, list)
}
