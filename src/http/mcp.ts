import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { z } from 'zod'
import { AppError } from '../errors.js'
import type { AppDeps } from './deps.js'
import { checkCommand, checkCwd } from './input-limits.js'
import type { Principal } from './keyring.js'

/** Where MCP `bash` calls go: the server's shell routing policy. */
export interface McpOptions {
  providerId: string
  profile: string
  /** Idle MCP sessions are closed (and their sandbox session deleted) after this long (ms). @default 1800000 */
  idleTtlMs?: number
}

interface McpSession {
  transport: WebStandardStreamableHTTPServerTransport
  tenant: string
  sandboxSession: string
  lastUsed: number
}

type TextResult = { content: { type: 'text'; text: string }[]; isError?: boolean }
const text = (t: string, isError = false): TextResult => ({
  content: [{ type: 'text', text: t }],
  ...(isError ? { isError } : {}),
})

/**
 * The `/mcp` endpoint (Streamable HTTP, stateful): tools `bash` (through the server's interceptor
 * chain, so it is routed into a sandbox by policy), `read_file`, `write_file`, `list_sessions`. The
 * bearer key selects the tenant; each MCP session maps to one sandbox session `mcp-<id>`.
 */
export class McpEndpoint {
  private readonly sessions = new Map<string, McpSession>()
  private readonly sweeper: NodeJS.Timeout

  constructor(
    private readonly deps: Pick<AppDeps, 'toolCalls' | 'sessions' | 'logger'>,
    private readonly options: McpOptions,
  ) {
    const ttl = options.idleTtlMs ?? 1_800_000
    this.sweeper = setInterval(() => void this.sweep(ttl), Math.min(ttl, 60_000))
    this.sweeper.unref()
  }

  /** Handles one HTTP request of an authenticated principal. */
  async handle(req: Request, principal: Principal): Promise<Response> {
    const sid = req.headers.get('mcp-session-id')
    if (sid) {
      const s = this.sessions.get(sid)
      // Another tenant's MCP session id is indistinguishable from an unknown one.
      if (!s || s.tenant !== principal.tenant)
        throw new AppError('NOT_FOUND', `no MCP session ${sid}; initialize a new one`)
      s.lastUsed = Date.now()
      return s.transport.handleRequest(req)
    }
    if (req.method !== 'POST')
      throw new AppError('BAD_REQUEST', 'MCP requests without a session id must be an initialize POST')
    const transport = new WebStandardStreamableHTTPServerTransport({
      sessionIdGenerator: () => crypto.randomUUID(),
      enableJsonResponse: true,
      onsessioninitialized: async (id) => {
        const sandboxSession = `mcp-${id}`
        await this.deps.sessions.create(principal.tenant, {
          id: sandboxSession,
          provider: this.options.providerId,
          profile: this.options.profile,
        })
        this.sessions.set(id, { transport, tenant: principal.tenant, sandboxSession, lastUsed: Date.now() })
      },
      onsessionclosed: async (id) => void (await this.closeSession(id)),
    })
    const server = this.createServer(principal.tenant, () => {
      const id = transport.sessionId
      return id ? this.sessions.get(id)?.sandboxSession : undefined
    })
    await server.connect(transport)
    return transport.handleRequest(req)
  }

  /** Closes every MCP session (their sandbox sessions are deleted). */
  async close(): Promise<void> {
    clearInterval(this.sweeper)
    await Promise.all([...this.sessions.keys()].map((id) => this.closeSession(id)))
  }

  private createServer(tenant: string, sandboxSession: () => string | undefined): McpServer {
    const server = new McpServer({ name: 'sandbox-router', version: '0.1.0' })
    const need = (): string => {
      const s = sandboxSession()
      if (!s) throw new AppError('BAD_REQUEST', 'MCP session not initialized')
      return s
    }
    server.registerTool(
      'bash',
      {
        description:
          'Run a shell command in this session’s sandbox (files persist across calls). Returns exit code, stdout and stderr.',
        // The checks of POST /v1/exec: a bad command is refused before any job exists.
        inputSchema: {
          command: z
            .string()
            .min(1)
            .superRefine((v, ctx) => checkCommand(v, [], ctx)),
          cwd: z
            .string()
            .superRefine((v, ctx) => checkCwd(v, [], ctx))
            .optional(),
        },
      },
      async ({ command, cwd }) => {
        const args = JSON.stringify(cwd ? { command, cwd } : { command })
        const r = await this.deps.toolCalls.evaluate(
          tenant,
          { name: 'bash', arguments: args, callId: `mcp-${crypto.randomUUID()}`, type: 'function' },
          { sessionId: need() },
        )
        // The pipeline's text, as /v1/tool-calls and the agent give it; an allowed call has none (no host tools).
        if (r.output === undefined)
          return text('bash is not routed by this server’s policy; refusing to run it on the host', true)
        return text(r.output, r.outcome !== 'ok' || (r.result !== undefined && r.result.exitCode !== 0))
      },
    )
    server.registerTool(
      'read_file',
      { description: 'Read a UTF-8 file from the sandbox', inputSchema: { path: z.string().min(1) } },
      async ({ path }) => {
        const data = await this.deps.sessions.readFile(tenant, need(), path)
        return data ? text(new TextDecoder().decode(data)) : text(`no such file: ${path}`, true)
      },
    )
    server.registerTool(
      'write_file',
      {
        description: 'Write a UTF-8 file in the sandbox (parents are created)',
        inputSchema: { path: z.string().min(1), content: z.string() },
      },
      async ({ path, content }) => {
        await this.deps.sessions.writeFile(tenant, need(), path, new TextEncoder().encode(content))
        return text(`wrote ${Buffer.byteLength(content)} bytes to ${path}`)
      },
    )
    server.registerTool('list_sessions', { description: 'List this tenant’s sandbox sessions' }, async () => {
      const list = await this.deps.sessions.list(tenant)
      return text(
        JSON.stringify(
          list.map((s) => ({ id: s.id, provider: s.provider, profile: s.profile, sandboxId: s.sandboxId })),
        ),
      )
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

  private async sweep(ttlMs: number): Promise<void> {
    const cutoff = Date.now() - ttlMs
    for (const [id, s] of this.sessions) if (s.lastUsed < cutoff) await this.closeSession(id)
  }
}
