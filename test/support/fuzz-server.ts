import { request } from 'node:http'
import { expect } from 'vitest'
import { loadConfig } from '../../src/config/load.js'
import { createLogger } from '../../src/logger.js'
import { createRuntime } from '../../src/runtime/create-runtime.js'
import type { Runtime } from '../../src/runtime/create-runtime.js'
import { startServer } from '../../src/cli/serve.js'
import type { RunningServer } from '../../src/cli/serve.js'

/** The key of the fuzzing tenant. */
export const KEY = 'fuzz-key-0123456789abcdef'
/** The key of a tenant that owns nothing (every id it names is unknown). */
export const EMPTY_KEY = 'empty-key-0123456789abcdef'

/**
 * Small limits keep "over the limit" bodies cheap to send. Bodies sent whole stay under ~260 KB: past
 * that, on loopback, the server's early 413 often reaches the client as a connection reset instead
 * (the unread rest of the body); `declareOnly` covers larger declared lengths.
 */
export const BODY_LIMIT = 64 * 1024
export const FILE_LIMIT = 128 * 1024

/** A live embedded server (in-process queue, real Docker provider) for fuzzing over real HTTP. */
export interface LiveServer {
  readonly runtime: Runtime
  readonly server: RunningServer
  close(): Promise<void>
}

/** Starts the embedded runtime and a server on a free port, with a rate limit fuzzing never reaches. */
export async function startLiveServer(): Promise<LiveServer> {
  const loaded = loadConfig({ cwd: '/nonexistent-dir-for-defaults', env: {} })
  loaded.config.quotas.requestsPerSecond = 1_000_000
  loaded.config.server.bodyLimitBytes = BODY_LIMIT
  loaded.config.server.fileLimitBytes = FILE_LIMIT
  const prefix = `fuzz${process.pid}${Date.now().toString(36)}`
  const runtime = await createRuntime(loaded, {
    role: 'all',
    prefix,
    logger: createLogger({ level: 'silent' }),
  })
  const server = await startServer(runtime, {
    port: 0,
    host: '127.0.0.1',
    keys: [
      { key: KEY, tenant: 'fuzz' },
      { key: EMPTY_KEY, tenant: 'empty' },
    ],
  })
  return {
    runtime,
    server,
    async close() {
      // Session sandboxes outlive a pool shutdown by design: delete the sessions first.
      for (const s of await runtime.sessions.list('fuzz')) await runtime.sessions.delete('fuzz', s.id)
      await server.close()
      await runtime.close({ deadlineMs: 5_000 })
    },
  }
}

/** Reads a response and checks it is a 4xx with the JSON error body `{ error: { code, message } }`. */
export async function expectClientError(res: Response, what: string): Promise<{ code: string }> {
  const text = await res.text()
  const label = `${what} → ${res.status} ${text.slice(0, 300)}`
  expect(res.status, label).toBeGreaterThanOrEqual(400)
  expect(res.status, label).toBeLessThan(500)
  return expectErrorBody(res, text, label)
}

/**
 * Checks a response to input that may or may not be valid: never a 5xx, and every error is the JSON
 * error body. Returns the status.
 */
export async function expectNoServerError(
  res: Response,
  what: string,
  opts: { jsonRpc?: boolean } = {},
): Promise<number> {
  if (res.ok && (res.headers.get('content-type') ?? '').startsWith('text/event-stream')) {
    // An event stream (a random path that is `/v1/events`) stays open until the client leaves.
    await res.body?.cancel()
    return res.status
  }
  const text = await res.text()
  const label = `${what} → ${res.status} ${text.slice(0, 300)}`
  if (res.status === 501) {
    // Not a fault: a feature this process does not offer (e.g. the dashboard outside the bullmq
    // driver) answers 501 UNSUPPORTED on purpose, saying why.
    expect(expectErrorBody(res, text, label, opts.jsonRpc).code, label).toBe('UNSUPPORTED')
    return res.status
  }
  expect(res.status, label).toBeLessThan(500)
  if (res.status >= 400) expectErrorBody(res, text, label, opts.jsonRpc)
  return res.status
}

/** `jsonRpc`: the MCP transport's own errors are JSON-RPC errors, whose code is a number. */
function expectErrorBody(res: Response, text: string, label: string, jsonRpc = false): { code: string } {
  expect(res.headers.get('content-type') ?? '', label).toMatch(/^application\/json/)
  const body = JSON.parse(text) as { error?: { code?: unknown; message?: unknown } }
  expect(jsonRpc ? ['string', 'number'] : ['string'], label).toContain(typeof body.error?.code)
  expect(typeof body.error?.message, label).toBe('string')
  return { code: body.error?.code as string }
}

/**
 * Sends only the headers of a request declaring `contentLength` bytes, and resolves with the answer
 * the server gives before any body byte arrives.
 */
export function declareOnly(
  url: string,
  method: string,
  contentLength: number,
): Promise<{ status: number; contentType: string; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method,
        headers: {
          authorization: `Bearer ${KEY}`,
          'content-type': 'application/json',
          'content-length': String(contentLength),
        },
      },
      (res) => {
        const chunks: Buffer[] = []
        res.on('data', (c: Buffer) => chunks.push(c))
        res.on('error', reject)
        res.on('end', () => {
          resolve({
            status: res.statusCode ?? 0,
            contentType: String(res.headers['content-type'] ?? ''),
            text: Buffer.concat(chunks).toString('utf8'),
          })
          req.destroy()
        })
      },
    )
    req.on('error', reject)
    req.flushHeaders()
  })
}
