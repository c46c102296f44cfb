/**
 * envd's API for every sandbox on our one port: the SDK names the sandbox in the `E2b-Sandbox-Id`
 * header (when `E2B_SANDBOX_URL` points at us) and authenticates with the `X-Access-Token` create
 * gave it. `/health`, `/files` (read; write as multipart — the SDK's default — or octet-stream,
 * gzip decoded) and `process.Process/*` over Connect JSON. An unknown sandbox is a 502, as E2B's
 * sandbox proxy answers.
 */
import { gunzipSync } from 'node:zlib'
import { posix } from 'node:path'
import type { Context } from 'hono'
import type { App } from '../app.js'
import {
  ConnectRpcError,
  isStreaming,
  openStream,
  parseEnvelopedRequest,
  unaryError,
  unaryResponse,
} from './connect.js'
import type { E2BRouteDeps } from './deps.js'
import { E2BApiError, e2bErrorResponse } from './errors.js'
import { answerExecute } from './code-execute.js'
import { storeMetadata, uploadMetadata } from './file-metadata.js'
import { checkFileSignature, signedFileRequest, type SignedFileRequest } from './file-signature.js'
import { unaryFilesystem } from './filesystem-rpc.js'
import { watchDir } from './filesystem-watch.js'
import { connectErrorOf, connectProcess, startProcess, unaryProcess } from './process-rpc.js'
import type { E2BLifecycle } from './lifecycle.js'
import { E2BPtys } from './pty-rpc.js'
import type { E2BSandbox, E2BSandboxStore } from './sandboxes.js'
import { RateLimiter } from '../../services/rate-limit.js'

/**
 * Signed `/files` URLs that name no sandbox are matched against every sandbox's token (a read of all
 * records) before anything authenticates them: at most this many per second per client address.
 */
const UNNAMED_SIGNED_PER_SECOND = 20
const unnamedSigned = new RateLimiter(UNNAMED_SIGNED_PER_SECOND)

/** The caller's address (Node's socket), for the limit above. */
const clientAddress = (c: Context): string =>
  (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket
    ?.remoteAddress ?? 'unknown'

/** The sandbox an envd request names, or the error answer (502 unknown, 401 bad token). */
async function sandboxOf(
  c: Context,
  store: E2BSandboxStore,
  deps: E2BRouteDeps,
  lifecycle: E2BLifecycle,
): Promise<E2BSandbox> {
  const id = c.req.header('e2b-sandbox-id') ?? ''
  const found = await store.byToken(id, c.req.header('x-access-token'))
  if (found === 'unknown') throw new E2BApiError(502, `The sandbox ${id} was not found`)
  if (found === 'bad-token')
    throw new E2BApiError(401, 'invalid or missing X-Access-Token (the envdAccessToken create returned)')
  await deps.admitRequest(found.tenant)
  // As E2B's proxy: a paused sandbox does not answer (the SDK's isRunning() is then false), unless
  // it was created with autoResume: then the request wakes it.
  if (found.paused && !(await lifecycle.wake(found)))
    throw new E2BApiError(502, `The sandbox ${id} is paused; Sandbox.connect resumes it`)
  return found
}

/**
 * The sandbox of a `/files` call: as {@link sandboxOf} when it carries `X-Access-Token`, else
 * authorised by the URL's signature (`downloadUrl` / `uploadUrl`). A signed URL that names no sandbox
 * (the SDK's form when `E2B_SANDBOX_URL` is set) is matched against every sandbox's token.
 */
async function fileSandboxOf(
  c: Context,
  store: E2BSandboxStore,
  deps: E2BRouteDeps,
  lifecycle: E2BLifecycle,
  signed: SignedFileRequest | undefined,
): Promise<E2BSandbox> {
  const id = c.req.header('e2b-sandbox-id')
  if (!signed || (id && c.req.header('x-access-token') !== undefined))
    return sandboxOf(c, store, deps, lifecycle)
  if (!id) {
    const admitted = unnamedSigned.take(clientAddress(c))
    if (!admitted.ok)
      throw new E2BApiError(
        429,
        `too many signed /files URLs that name no sandbox (at most ${UNNAMED_SIGNED_PER_SECOND}/s per client): use the sandbox's host name (49983-<sandboxId>.<domain>) or send the E2b-Sandbox-Id header`,
        { 'retry-after': String(Math.ceil(admitted.retryAfterMs / 1000)) },
      )
  }
  const found = id ? await store.byId(id) : await store.bySignature(signed)
  if (!found && id) throw new E2BApiError(502, `The sandbox ${id} was not found`)
  if (!found) throw new E2BApiError(401, 'invalid signature')
  checkFileSignature(signed, found.accessToken)
  await deps.admitRequest(found.tenant)
  if (found.paused && !(await lifecycle.wake(found)))
    throw new E2BApiError(502, `The sandbox ${found.sandboxId} is paused; Sandbox.connect resumes it`)
  return found
}

async function readFile(deps: E2BRouteDeps, s: E2BSandbox, c: Context): Promise<Response> {
  const path = c.req.query('path') ?? ''
  if (!path) throw new E2BApiError(400, 'path is required')
  const data = await deps.sessions.readFile(s.tenant, s.sandboxId, path).catch((err: unknown) => {
    const e = err as { code?: string; message?: string }
    if (e.code === 'NOT_FOUND') throw new E2BApiError(404, `path '${path}' does not exist`)
    throw err
  })
  if (!data) throw new E2BApiError(502, `The sandbox ${s.sandboxId} was not found`)
  return new Response(data, { status: 200, headers: { 'content-type': 'application/octet-stream' } })
}

async function writeOne(deps: E2BRouteDeps, s: E2BSandbox, path: string, data: Uint8Array) {
  if (!path) throw new E2BApiError(400, 'path is required (query path, or the multipart file name)')
  if (data.length > deps.fileLimitBytes)
    throw new E2BApiError(
      413,
      `file over ${deps.fileLimitBytes} bytes; send less or raise server.fileLimitBytes`,
    )
  const r = await deps.sessions.writeFile(s.tenant, s.sandboxId, path, data)
  if (!r) throw new E2BApiError(502, `The sandbox ${s.sandboxId} was not found`)
  // envd answers with the absolute path: a relative one is under the user's home (our sandbox's cwd).
  const absolute = posix.resolve(s.cwd, path)
  return { name: posix.basename(absolute), type: 'file', path: absolute }
}

async function writeFiles(deps: E2BRouteDeps, s: E2BSandbox, c: Context): Promise<Response> {
  const type = c.req.header('content-type') ?? ''
  const queryPath = c.req.query('path') ?? ''
  const metadata = uploadMetadata(c.req.raw.headers)
  const written: { name: string; type: string; path: string; metadata?: Record<string, string> }[] = []
  if (type.startsWith('multipart/form-data')) {
    const form = await c.req.raw.formData()
    for (const entry of form.getAll('file')) {
      // A plain field (`form.append('file', 'text')`, as a browser posts to an uploadUrl) is the
      // content of the query's path.
      if (typeof entry === 'string') {
        if (!queryPath)
          throw new E2BApiError(
            400,
            'multipart field "file" is text, not a file: name the path in the query (path=…)',
          )
        written.push(await writeOne(deps, s, queryPath, new TextEncoder().encode(entry)))
        continue
      }
      written.push(
        await writeOne(deps, s, queryPath || entry.name, new Uint8Array(await entry.arrayBuffer())),
      )
    }
    if (written.length === 0) throw new E2BApiError(400, 'multipart upload has no "file" field')
  } else if (type.startsWith('application/octet-stream') || type === '') {
    let data = new Uint8Array(await c.req.arrayBuffer())
    if ((c.req.header('content-encoding') ?? '').toLowerCase() === 'gzip') {
      try {
        data = new Uint8Array(gunzipSync(data))
      } catch {
        throw new E2BApiError(400, 'Content-Encoding is gzip but the body is not gzip data')
      }
    }
    written.push(await writeOne(deps, s, queryPath, data))
  } else {
    throw new E2BApiError(
      400,
      `unsupported upload type '${type}': send multipart/form-data or application/octet-stream`,
    )
  }
  if (metadata) {
    await storeMetadata(
      deps,
      s,
      written.map((w) => w.path),
      metadata,
    )
    for (const w of written) w.metadata = metadata
  }
  return Response.json(written)
}

/** Registers envd's routes (they answer only requests carrying `E2b-Sandbox-Id`). */
export function registerEnvd(
  app: App,
  deps: E2BRouteDeps,
  store: E2BSandboxStore,
  lifecycle: E2BLifecycle,
): void {
  const ptys = new E2BPtys(deps, store)
  const rest =
    (fn: (s: E2BSandbox, c: Context) => Promise<Response>) =>
    async (c: Context, next: () => Promise<void>): Promise<Response | void> => {
      if (!c.req.header('e2b-sandbox-id')) return next()
      try {
        return await fn(await sandboxOf(c, store, deps, lifecycle), c)
      } catch (err) {
        return e2bErrorResponse(err)
      }
    }
  app.get(
    '/health',
    rest(async () => new Response(null, { status: 204 })),
  )
  // `/files` also answers a signed URL without the sandbox header (E2B_SANDBOX_URL's form).
  const files =
    (fn: (s: E2BSandbox, c: Context) => Promise<Response>) =>
    async (c: Context, next: () => Promise<void>): Promise<Response | void> => {
      const signed = signedFileRequest(new URL(c.req.url), c.req.method)
      if (!c.req.header('e2b-sandbox-id') && !signed) return next()
      try {
        return await fn(await fileSandboxOf(c, store, deps, lifecycle, signed), c)
      } catch (err) {
        return e2bErrorResponse(err)
      }
    }
  app.get(
    '/files',
    files((s, c) => readFile(deps, s, c)),
  )
  app.post(
    '/files',
    files((s, c) => writeFiles(deps, s, c)),
  )

  // The code interpreter's `/execute` (port 49999 on E2B), on the same port and sandbox header.
  app.post(
    '/execute',
    rest(async (s, c) => {
      const code = deps.code
      if (!code) throw new E2BApiError(501, 'this server has no code interpreter')
      return answerExecute(c.req.raw, async (cell) => {
        const r = await code.run(s.tenant, s.sandboxId, cell, { signal: c.req.raw.signal })
        if (!r) throw new E2BApiError(502, `The sandbox ${s.sandboxId} was not found`)
        return r
      })
    }),
  )

  app.post('/:service{process\\.Process|filesystem\\.Filesystem}/:method', async (c, next) => {
    if (!c.req.header('e2b-sandbox-id')) return next()
    const streaming = isStreaming(c.req.header('content-type'))
    const method = c.req.param('method')
    try {
      const s = await sandboxOf(c, store, deps, lifecycle)
      const raw = new Uint8Array(await c.req.arrayBuffer())
      if (streaming) {
        const message = parseEnvelopedRequest(raw) as Record<string, unknown>
        if (c.req.param('service') === 'filesystem.Filesystem' && method === 'WatchDir')
          return await watchDir(deps, s, message, c.req.raw.headers)
        if (c.req.param('service') !== 'process.Process')
          throw new ConnectRpcError(
            'unimplemented',
            `${c.req.param('service')}/${method} (streaming) is not implemented by sandbox-router`,
          )
        const headers = c.req.raw.headers
        if (method === 'Start')
          return message.pty
            ? await ptys.start(s, message, headers)
            : await startProcess(deps, store, s, message, headers)
        if (method === 'Connect')
          return ptys.connect(s, message, headers) ?? (await connectProcess(deps, store, s, message, headers))
        throw new ConnectRpcError(
          'unimplemented',
          `process.Process/${method} (streaming) is not implemented by sandbox-router`,
        )
      }
      let message: Record<string, unknown> = {}
      try {
        message = JSON.parse(Buffer.from(raw).toString('utf8') || '{}') as Record<string, unknown>
      } catch {
        throw new ConnectRpcError('invalid_argument', 'request body is not JSON')
      }
      if (c.req.param('service') !== 'process.Process')
        return unaryResponse(await unaryFilesystem(deps, s, method, message))
      return unaryResponse(
        (await ptys.unary(s, method, message)) ?? (await unaryProcess(deps, store, s, method, message)),
      )
    } catch (err) {
      const e =
        err instanceof E2BApiError
          ? new ConnectRpcError(err.status === 401 ? 'unauthenticated' : 'unavailable', err.message)
          : connectErrorOf(err)
      if (err instanceof E2BApiError && err.status === 502 && !streaming) return e2bErrorResponse(err)
      if (streaming) {
        const { response, stream } = openStream()
        stream.end({ code: e.code, message: e.message })
        return response
      }
      return unaryError(e.code, e.message)
    }
  })
}
