import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { AppError } from '../errors.js'
import type { AppDeps } from './deps.js'
import type { Principal } from './keyring.js'
import { registerFileTools, text } from './mcp-file-tools.js'
import { registerCodeTools } from './mcp-code-tools.js'
import { registerProcessTools } from './mcp-process-tools.js'
import { onConsumerCancel, requestIdsOf } from './mcp-disconnect.js'
import type { RequestId } from './mcp-disconnect.js'
import { createMcpOriginCheck } from './mcp-origin.js'
import { createProgressStream } from './mcp-progress.js'
import type { McpOriginOptions } from './mcp-origin.js'
import { bashArgs, mcpInstructions } from './mcp-schemas.js'
import type { McpShellProfile } from './mcp-schemas.js'

/** Where MCP `bash` calls go (the server's shell routing policy), and how sessions live. */
export interface McpOptions {
  providerId: string
  profile: string
  /** The shell profile's timeouts, for `timeoutMs` bounds, tool descriptions and instructions. */
  shellProfile?: McpShellProfile
  /**
   * An MCP session with no request for this long and no call running is closed, and its sandbox
   * session deleted (ms): one-shot clients never send DELETE. @default 600000
   */
  idleTtlMs?: number
  /** Allowed `Host` / `Origin` headers. @default the listen address 127.0.0.1 and the localhost names */
  origin?: McpOriginOptions
}

interface McpSession {
  transport: WebStandardStreamableHTTPServerTransport
  tenant: string
  sandboxSession: string
  lastUsed: number
  /** Requests and tool calls running now: a busy session does not expire. */
  busy: number
}

/** Expired session ids remembered to say why they are gone (bounded). */
const EXPIRED_REMEMBERED = 1_000

/**
 * The `/mcp` endpoint (Streamable HTTP, stateful, SSE responses so progress can stream): tools `bash`
 * (through the server's interceptor chain, so it is routed into a sandbox by policy), `read_file`,
 * `write_file`, `edit_file`, `list_sessions`. The bearer key selects the tenant; each MCP session maps
 * to one sandbox session `mcp-<id>`, deleted when the client closes the session or it stays idle.
 */
export class McpEndpoint {
  private readonly sessions = new Map<string, McpSession>()
  private readonly expired = new Map<string, { tenant: string; idleMs: number }>()
  private readonly sweeper: NodeJS.Timeout
  private readonly ttlMs: number
  /** Refuses a `Host` / `Origin` that is not allowed (403), before authentication. */
  readonly checkHeaders: (headers: Headers) => void

  constructor(
    private readonly deps: Pick<AppDeps, 'toolCalls' | 'sessions' | 'logger' | 'processes' | 'code'>,
    private readonly options: McpOptions,
  ) {
    this.ttlMs = options.idleTtlMs ?? 600_000
    this.sweeper = setInterval(
      () => void this.sweep(),
      Math.min(60_000, Math.max(100, Math.floor(this.ttlMs / 4))),
    )
    this.sweeper.unref()
    this.checkHeaders = createMcpOriginCheck(options.origin ?? { listenHost: '127.0.0.1' })
  }

  /** Handles one HTTP request of an authenticated principal. */
  async handle(req: Request, principal: Principal): Promise<Response> {
    const sid = req.headers.get('mcp-session-id')
    if (sid) {
      const s = this.sessions.get(sid)
      // Another tenant's MCP session id is indistinguishable from an unknown one.
      if (!s || s.tenant !== principal.tenant) {
        const gone = this.expired.get(sid)
        if (gone && gone.tenant === principal.tenant)
          throw new AppError(
            'NOT_FOUND',
            `MCP session ${sid} expired after ${gone.idleMs} ms without a request (server.mcpSessionIdleMs); ` +
              'its sandbox and files were deleted; initialize a new session',
          )
        throw new AppError('NOT_FOUND', `no MCP session ${sid}; initialize a new one`)
      }
      const ids = await requestIdsOf(req)
      return this.busy(s, async () => cancelOnDisconnect(s, ids, await s.transport.handleRequest(req)))
    }
    if (req.method !== 'POST')
      throw new AppError('BAD_REQUEST', 'MCP requests without a session id must be an initialize POST')
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      onsessioninitialized: async (id) => {
        const sandboxSession = `mcp-${id}`
        await this.deps.sessions.create(principal.tenant, {
          id: sandboxSession,
          provider: this.options.providerId,
          profile: this.options.profile,
        })
        this.sessions.set(id, {
          transport,
          tenant: principal.tenant,
          sandboxSession,
          lastUsed: Date.now(),
          busy: 0,
        })
      },
      onsessionclosed: async (id) => void (await this.closeSession(id)),
    })
    const server = this.createServer(principal.tenant, () => {
      const id = transport.sessionId
      return id ? this.sessions.get(id) : undefined
    })
    await server.connect(transport)
    return transport.handleRequest(req)
  }

  /** Closes every MCP session (their sandbox sessions are deleted). */
  async close(): Promise<void> {
    clearInterval(this.sweeper)
    await Promise.all([...this.sessions.keys()].map((id) => this.closeSession(id)))
  }

  /** Runs `run` with the session marked busy, and counts it as used at both ends. */
  private async busy<T>(s: McpSession | undefined, run: () => Promise<T>): Promise<T> {
    if (!s) return run()
    s.busy++
    s.lastUsed = Date.now()
    try {
      return await run()
    } finally {
      s.busy--
      s.lastUsed = Date.now()
    }
  }

  private createServer(tenant: string, current: () => McpSession | undefined): McpServer {
    const { shellProfile } = this.options
    const server = new McpServer(
      { name: 'sandbox-router', version: '0.1.0' },
      {
        instructions: mcpInstructions({
          idleMs: this.ttlMs,
          ...(shellProfile ? { profile: shellProfile } : {}),
        }),
      },
    )
    const need = (): string => {
      const s = current()
      if (!s) throw new AppError('BAD_REQUEST', 'MCP session not initialized')
      return s.sandboxSession
    }
    const busy = <T>(run: () => Promise<T>): Promise<T> => this.busy(current(), run)
    server.registerTool(
      'bash',
      {
        title: 'Run a shell command',
        description:
          'Run a shell command in this session’s sandbox (files in /workspace persist across calls). ' +
          (shellProfile?.shell === 'persistent'
            ? 'One persistent shell per session: cd and exported variables carry over to the next call. '
            : shellProfile?.shell === 'fresh'
              ? 'Each call runs in a fresh shell: cd and exported variables do not carry over. '
              : '') +
          'Returns exit code, stdout and stderr. ' +
          (shellProfile
            ? `Killed after timeoutMs (default ${shellProfile.defaultTimeoutMs} ms, at most ${shellProfile.maxTimeoutMs} ms).`
            : 'Killed after timeoutMs (default: the profile’s).'),
        // The checks of POST /v1/exec: a bad command is refused before any job exists.
        inputSchema: bashArgs(shellProfile),
        annotations: { destructiveHint: true, openWorldHint: false },
      },
      async ({ command, cwd, timeoutMs }, extra) => {
        const max = shellProfile?.maxTimeoutMs
        if (timeoutMs != null && max !== undefined && timeoutMs > max)
          return text(
            `timeoutMs ${timeoutMs} is over the maximum of profile '${shellProfile?.name ?? this.options.profile}' ` +
              `(${max} ms); ask for at most ${max}. Nothing ran`,
            true,
          )
        const args = JSON.stringify(cwd ? { command, cwd } : { command })
        const token = extra._meta?.progressToken
        const progress = token === undefined ? undefined : createProgressStream(token, extra.sendNotification)
        const r = await busy(() =>
          this.deps.toolCalls.evaluate(
            tenant,
            { name: 'bash', arguments: args, callId: `mcp-${crypto.randomUUID()}`, type: 'function' },
            {
              sessionId: need(),
              signal: extra.signal,
              ...(timeoutMs == null ? {} : { timeoutMs }),
              ...(progress ? { onStdout: progress.onChunk, onStderr: progress.onChunk } : {}),
            },
          ),
        ).finally(() => progress?.stop())
        // The pipeline's text, as /v1/tool-calls and the agent give it; an allowed call has none (no host tools).
        if (r.output === undefined)
          return text('bash is not routed by this server’s policy; refusing to run it on the host', true)
        // An error: blocked, a call that did not run to an end (QUOTA_EXCEEDED, SANDBOX_LOST, cancelled…),
        // a non-zero exit or a timeout.
        const failed =
          r.outcome !== 'ok' || (r.result !== undefined && (r.result.exitCode !== 0 || r.result.timedOut))
        return text(r.output, failed)
      },
    )
    registerFileTools(server, { sessions: this.deps.sessions, tenant, session: need, busy })
    if (this.deps.processes)
      registerProcessTools(server, { processes: this.deps.processes, tenant, session: need, busy })
    if (this.deps.code)
      registerCodeTools(server, {
        code: this.deps.code,
        toolCalls: this.deps.toolCalls,
        tenant,
        session: need,
        busy,
      })
    return server
  }

  private async closeSession(id: string): Promise<void> {
    const s = this.sessions.get(id)
    if (!s) return
    this.sessions.delete(id)
    try {
      await this.deps.sessions.delete(s.tenant, s.sandboxSession)
    } catch (err) {
      this.deps.logger.warn(
        { err, session: s.sandboxSession },
        'could not delete the sandbox session of a closed MCP session',
      )
    }
    await s.transport.close().catch(() => undefined)
  }

  private async sweep(): Promise<void> {
    const cutoff = Date.now() - this.ttlMs
    for (const [id, s] of this.sessions) {
      if (s.busy > 0 || s.lastUsed >= cutoff) continue
      const idleMs = Date.now() - s.lastUsed
      this.expired.set(id, { tenant: s.tenant, idleMs: this.ttlMs })
      while (this.expired.size > EXPIRED_REMEMBERED) {
        const oldest = this.expired.keys().next().value
        if (oldest === undefined) break
        this.expired.delete(oldest)
      }
      await this.closeSession(id)
      this.deps.logger.info(
        { tenant: s.tenant, mcpSession: id, session: s.sandboxSession, idleMs },
        'MCP session expired (idle); its sandbox session was deleted',
      )
    }
  }
}

/**
 * A client that drops the connection of an SSE answer is gone: its calls in that POST (`ids`) are
 * cancelled as if it had sent notifications/cancelled, so their commands are killed instead of
 * running to their timeout.
 */
function cancelOnDisconnect(s: McpSession, ids: readonly RequestId[], res: Response): Response {
  if (!ids.length || !res.body || !res.headers.get('content-type')?.startsWith('text/event-stream'))
    return res
  const body = onConsumerCancel(res.body, () => {
    for (const requestId of ids)
      s.transport.onmessage?.({
        jsonrpc: '2.0',
        method: 'notifications/cancelled',
        params: { requestId, reason: 'the client closed the connection' },
      })
  })
  return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
}
