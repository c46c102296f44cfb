/**
 * The fake envd: `process.Process` over Connect-RPC (JSON codec) and the REST `/files` and
 * `/health` endpoints, for every sandbox on one port (the SDK names the sandbox in the
 * `E2b-Sandbox-Id` header when `sandboxUrl` is set). A request for a sandbox that is gone or paused
 * gets 502, as E2B's sandbox proxy answers.
 */
import type { IncomingMessage, ServerResponse } from 'node:http'
import { posix } from 'node:path'
import {
  ConnectRpcError,
  isStreamingRequest,
  openStream,
  parseEnvelopedRequest,
  readBody,
  writeUnary,
  writeUnaryError,
} from './connect-rpc.js'
import { answerExecute } from '../../../src/http/e2b/code-execute.js'
import { kernelsOf } from './code-kernels.js'
import { runFileCommand } from './files.js'
import { FakeProcess, type ProcessConfig, type ProcessListener } from './processes.js'
import type { FakeSandbox, SandboxStore } from './sandboxes.js'

/** What the envd routes need from the fake server. */
export interface EnvdContext {
  store: SandboxStore
  /** Multiplies the `Keepalive-Ping-Interval` the SDK asks for (seconds), to test it quickly. */
  keepaliveScale: number
}

type Json = Record<string, unknown>

function obj(value: unknown): Json {
  return value && typeof value === 'object' && !Array.isArray(value) ? (value as Json) : {}
}

/** `Authorization: Basic base64(user:)` → the docker exec user. */
function execUser(req: IncomingMessage, username?: string | null): string | undefined {
  let name = username ?? undefined
  const auth = req.headers.authorization
  if (!name && auth?.startsWith('Basic ')) {
    name = Buffer.from(auth.slice(6), 'base64').toString('utf8').split(':')[0]
  }
  // E2B's default user is `user` (uid 1000); the base image calls uid 1000 `sandbox`.
  if (!name || name === 'user') return undefined
  return name === 'root' ? '0:0' : name
}

function pidOf(message: Json): number {
  const selector = obj(message.process)
  const pid = selector.pid
  if (typeof pid !== 'number') throw new ConnectRpcError('invalid_argument', 'process selector needs a pid')
  return pid
}

function processOf(sandbox: FakeSandbox, message: Json): FakeProcess {
  const pid = pidOf(message)
  const proc = sandbox.processes.get(pid)
  if (!proc?.running) throw new ConnectRpcError('not_found', `process with pid ${pid} not found`)
  return proc
}

function configOf(message: Json): ProcessConfig {
  const p = obj(message.process)
  if (typeof p.cmd !== 'string' || !p.cmd)
    throw new ConnectRpcError('invalid_argument', 'process.cmd is required')
  const args = Array.isArray(p.args) ? p.args.filter((a): a is string => typeof a === 'string') : []
  const envs: Record<string, string> = {}
  for (const [k, v] of Object.entries(obj(p.envs))) if (typeof v === 'string') envs[k] = v
  return { cmd: p.cmd, args, envs, ...(typeof p.cwd === 'string' && p.cwd ? { cwd: p.cwd } : {}) }
}

/** Streams a process's events into a server-streaming response (Start and Connect). */
function pipeEvents(
  ctx: EnvdContext,
  req: IncomingMessage,
  res: ServerResponse,
): { listener: ProcessListener; attach: (detach: () => void) => void; fail: (err: unknown) => void } {
  const stream = openStream(res)
  const timers: NodeJS.Timeout[] = []
  let detach: () => void = () => undefined
  stream.onEnd(() => {
    timers.forEach((t) => clearTimeout(t))
    detach()
  })
  // The stream deadline ends the call, not the process (E2B#500).
  const deadline = Number(req.headers['connect-timeout-ms'])
  if (deadline > 0) {
    timers.push(
      setTimeout(
        () => stream.end({ code: 'deadline_exceeded', message: `deadline of ${deadline} ms exceeded` }),
        deadline,
      ),
    )
  }
  const keepaliveS = Number(req.headers['keepalive-ping-interval'])
  if (keepaliveS > 0) {
    timers.push(
      setInterval(() => stream.send({ event: { keepalive: {} } }), keepaliveS * 1000 * ctx.keepaliveScale),
    )
  }
  return {
    listener: (event) => {
      stream.send({ event })
      if ('end' in event) stream.end()
    },
    attach: (d) => {
      detach = d
      if (stream.ended) d()
    },
    fail: (err) => {
      const message = err instanceof Error ? err.message : String(err)
      const code = err instanceof ConnectRpcError ? err.code : 'internal'
      stream.end({ code, message })
    },
  }
}

async function startProcess(
  ctx: EnvdContext,
  sandbox: FakeSandbox,
  req: IncomingMessage,
  res: ServerResponse,
) {
  const message = obj(parseEnvelopedRequest(await readBody(req)))
  const config = configOf(message)
  const pipe = pipeEvents(ctx, req, res)
  try {
    const proc = await FakeProcess.start(
      sandbox.container,
      {
        config,
        stdin: message.stdin === true,
        user: execUser(req),
        sandboxEnvs: sandbox.envVars,
        ...(typeof message.tag === 'string' ? { tag: message.tag } : {}),
      },
      pipe.listener,
    )
    sandbox.processes.set(proc.pid, proc)
    void proc.exited.then(() => sandbox.processes.delete(proc.pid))
    pipe.attach(() => proc.unsubscribe(pipe.listener))
  } catch (err) {
    pipe.fail(err)
  }
}

async function connectProcess(
  ctx: EnvdContext,
  sandbox: FakeSandbox,
  req: IncomingMessage,
  res: ServerResponse,
) {
  const message = obj(parseEnvelopedRequest(await readBody(req)))
  const proc = processOf(sandbox, message)
  const pipe = pipeEvents(ctx, req, res)
  pipe.attach(proc.subscribe(pipe.listener))
}

async function unaryProcess(sandbox: FakeSandbox, method: string, message: Json): Promise<unknown> {
  switch (method) {
    case 'List':
      return {
        processes: [...sandbox.processes.values()]
          .filter((p) => p.running)
          .map((p) => ({ pid: p.pid, config: p.config, ...(p.tag ? { tag: p.tag } : {}) })),
      }
    case 'SendInput': {
      const proc = processOf(sandbox, message)
      const stdin = obj(message.input).stdin
      if (typeof stdin !== 'string') throw new ConnectRpcError('invalid_argument', 'input.stdin is required')
      if (!proc.stdinOpen)
        throw new ConnectRpcError('failed_precondition', 'stdin is not enabled for this process')
      proc.writeStdin(Buffer.from(stdin, 'base64'))
      return {}
    }
    case 'CloseStdin': {
      const proc = processOf(sandbox, message)
      if (!proc.stdinOpen)
        throw new ConnectRpcError('failed_precondition', 'stdin is not enabled for this process')
      proc.closeStdin()
      return {}
    }
    case 'SendSignal': {
      const proc = processOf(sandbox, message)
      const signal = message.signal === 'SIGNAL_SIGTERM' || message.signal === 15 ? 'TERM' : 'KILL'
      await runFileCommand(sandbox.container, ['kill', '-s', signal, String(proc.pid)], { user: '0:0' })
      return {}
    }
    default:
      throw new ConnectRpcError('unimplemented', `process.Process/${method} is not implemented by the fake`)
  }
}

async function readFile(sandbox: FakeSandbox, req: IncomingMessage, res: ServerResponse, url: URL) {
  const path = url.searchParams.get('path') ?? ''
  const r = await runFileCommand(
    sandbox.container,
    ['/bin/sh', '-c', '[ -d "$1" ] && exit 21; [ -e "$1" ] || exit 44; exec cat "$1"', 'sh', path],
    { user: execUser(req, url.searchParams.get('username')) },
  )
  if (r.exitCode === 44) return sendJson(res, 404, { code: 404, message: `path '${path}' does not exist` })
  if (r.exitCode === 21) return sendJson(res, 400, { code: 400, message: `path '${path}' is a directory` })
  if (r.exitCode !== 0) return sendJson(res, 500, { code: 500, message: r.stderr.toString().trim() })
  res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': r.stdout.length })
  res.end(r.stdout)
}

async function writeFile(sandbox: FakeSandbox, req: IncomingMessage, res: ServerResponse, url: URL) {
  const path = url.searchParams.get('path') ?? ''
  if (!(req.headers['content-type'] ?? '').startsWith('application/octet-stream')) {
    await readBody(req)
    return sendJson(res, 400, {
      code: 400,
      message: 'the fake envd accepts application/octet-stream uploads only',
    })
  }
  const data = await readBody(req)
  const target = path.startsWith('/') ? path : `./${path}`
  const r = await runFileCommand(
    sandbox.container,
    ['/bin/sh', '-c', 'mkdir -p "$(dirname "$1")" && cat > "$1"', 'sh', target],
    { user: execUser(req, url.searchParams.get('username')), stdin: data },
  )
  if (r.exitCode !== 0) return sendJson(res, 400, { code: 400, message: r.stderr.toString().trim() })
  sendJson(res, 200, [{ name: posix.basename(path), type: 'file', path }])
}

function sendJson(res: ServerResponse, status: number, body: unknown): void {
  const data = Buffer.from(JSON.stringify(body), 'utf8')
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': data.length })
  res.end(data)
}

/** Routes one envd request for `sandboxId`. */
/** The code interpreter's `/execute` (port 49999): the shared module over the sandbox's kernels. */
async function execute(sandbox: FakeSandbox, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const body = await readBody(req)
  const answer = await answerExecute(new Request('http://fake/execute', { method: 'POST', body }), (cell) =>
    kernelsOf(sandbox.container).run(cell, 60_000),
  )
  res.writeHead(answer.status, Object.fromEntries(answer.headers))
  res.end(Buffer.from(await answer.arrayBuffer()))
}

export async function handleEnvd(
  ctx: EnvdContext,
  sandboxId: string,
  req: IncomingMessage,
  res: ServerResponse,
  url: URL,
): Promise<void> {
  const sandbox = ctx.store.get(sandboxId)
  const rpc = /^\/process\.Process\/([A-Za-z]+)$/.exec(url.pathname)?.[1]
  const streaming = isStreamingRequest(req)
  try {
    if (!sandbox || sandbox.state !== 'running') {
      await readBody(req)
      return sendJson(res, 502, { code: 502, message: `The sandbox ${sandboxId} was not found`, sandboxId })
    }
    if (req.headers['x-access-token'] !== sandbox.envdAccessToken) {
      await readBody(req)
      if (rpc) throw new ConnectRpcError('unauthenticated', 'invalid or missing X-Access-Token')
      return sendJson(res, 401, { code: 401, message: 'invalid or missing X-Access-Token' })
    }
    if (url.pathname === '/health') {
      res.writeHead(204).end()
      return
    }
    if (url.pathname === '/files' && req.method === 'GET') return await readFile(sandbox, req, res, url)
    if (url.pathname === '/files' && req.method === 'POST') return await writeFile(sandbox, req, res, url)
    if (url.pathname === '/execute' && req.method === 'POST') return await execute(sandbox, req, res)
    if (rpc === 'Start' && streaming) return await startProcess(ctx, sandbox, req, res)
    if (rpc === 'Connect' && streaming) return await connectProcess(ctx, sandbox, req, res)
    if (rpc) {
      const message = obj(JSON.parse((await readBody(req)).toString('utf8') || '{}'))
      return writeUnary(res, await unaryProcess(sandbox, rpc, message))
    }
    await readBody(req)
    throw new ConnectRpcError(
      'unimplemented',
      `${req.method} ${url.pathname} is not implemented by the fake envd`,
    )
  } catch (err) {
    const code = err instanceof ConnectRpcError ? err.code : 'internal'
    const message = err instanceof Error ? err.message : String(err)
    if (res.headersSent) {
      res.destroy()
      return
    }
    if (streaming) return openStream(res).end({ code, message })
    writeUnaryError(res, code, message)
  }
}
