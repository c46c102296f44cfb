import type { IncomingMessage, ServerResponse } from 'node:http'

/** Reads a whole request body. */
export async function readBody(req: IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of req) chunks.push(chunk as Buffer)
  return Buffer.concat(chunks)
}

/** Reads a JSON body; undefined when it is not JSON. */
export async function readJson(req: IncomingMessage): Promise<unknown> {
  const body = await readBody(req)
  try {
    return body.length ? (JSON.parse(body.toString('utf8')) as unknown) : undefined
  } catch {
    return undefined
  }
}

/** Sends a JSON response. */
export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  const payload = Buffer.from(JSON.stringify(body))
  res.writeHead(status, {
    'content-type': 'application/json; charset=utf-8',
    'content-length': String(payload.length),
    ...headers,
  })
  res.end(payload)
}

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  404: 'Not Found',
  408: 'Request Timeout',
  409: 'Conflict',
  429: 'Too Many Requests',
  500: 'Internal Server Error',
}

/** Sends an error in the shape Daytona's API and daemon use (`statusCode`, `message`, `error`/`code`). */
export function sendError(
  res: ServerResponse,
  req: IncomingMessage,
  status: number,
  message: string,
  extra: { code?: string; headers?: Record<string, string> } = {},
): void {
  sendJson(
    res,
    status,
    {
      statusCode: status,
      message,
      error: REASONS[status] ?? 'Error',
      ...(extra.code ? { code: extra.code } : {}),
      timestamp: new Date().toISOString(),
      path: req.url ?? '',
      method: req.method ?? '',
    },
    extra.headers,
  )
}
