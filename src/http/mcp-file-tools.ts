import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { AppDeps } from './deps.js'
import { editFileArgs, noArgs, readFileArgs, writeFileArgs } from './mcp-schemas.js'

/** A tool result: one text item, `isError` when the call failed. */
export type TextResult = { content: { type: 'text'; text: string }[]; isError?: boolean }

/** One text item; `isError: true` when the call failed. */
export const text = (t: string, isError = false): TextResult => ({
  content: [{ type: 'text', text: t }],
  ...(isError ? { isError } : {}),
})

/** What the file tools need: the tenant's session service, and the current MCP session's sandbox session. */
export interface McpFileToolsContext {
  readonly sessions: AppDeps['sessions']
  readonly tenant: string
  /** The sandbox session of this MCP session (throws before initialization). */
  readonly session: () => string
  /** Marks the MCP session busy while `run` runs (it does not expire meanwhile). */
  readonly busy: <T>(run: () => Promise<T>) => Promise<T>
}

/**
 * Registers `read_file` (optionally a line range), `write_file`, `edit_file` (one exact replacement)
 * and `list_sessions` on `server`, through the session file API of the MCP session's sandbox.
 */
export function registerFileTools(server: McpServer, ctx: McpFileToolsContext): void {
  const { sessions, tenant, session, busy } = ctx
  const read = async (path: string): Promise<string | undefined> => {
    const data = await sessions.readFile(tenant, session(), path)
    return data ? new TextDecoder().decode(data) : undefined
  }
  server.registerTool(
    'read_file',
    {
      title: 'Read a file',
      description:
        'Read a UTF-8 file from the sandbox, whole or lines startLine..endLine (1-based, inclusive).',
      inputSchema: readFileArgs,
      annotations: { readOnlyHint: true },
    },
    async ({ path, startLine, endLine }) =>
      busy(async () => {
        const content = await read(path)
        if (content === undefined) return text(`no such file: ${path}`, true)
        if (startLine == null && endLine == null) return text(content)
        const lines = content.split('\n')
        const first = startLine ?? 1
        const last = Math.min(endLine ?? lines.length, lines.length)
        if (first > last)
          return text(
            `startLine ${first} is past ${endLine == null ? `the end of ${path} (${lines.length} lines)` : `endLine ${endLine}`}`,
            true,
          )
        return text(lines.slice(first - 1, last).join('\n'))
      }),
  )
  server.registerTool(
    'write_file',
    {
      title: 'Write a file',
      description: 'Write a UTF-8 file in the sandbox, replacing it whole (parent folders are created).',
      inputSchema: writeFileArgs,
      annotations: { destructiveHint: true },
    },
    async ({ path, content }) =>
      busy(async () => {
        await sessions.writeFile(tenant, session(), path, new TextEncoder().encode(content))
        return text(`wrote ${Buffer.byteLength(content)} bytes to ${path}`)
      }),
  )
  server.registerTool(
    'edit_file',
    {
      title: 'Edit a file',
      description:
        'Replace one exact occurrence of oldText with newText in a UTF-8 file; fails when oldText occurs zero or several times.',
      inputSchema: editFileArgs,
      annotations: { destructiveHint: true },
    },
    async ({ path, oldText, newText }) =>
      busy(async () => {
        const content = await read(path)
        if (content === undefined) return text(`no such file: ${path}`, true)
        const at = content.indexOf(oldText)
        if (at < 0) return text(`oldText does not occur in ${path}; nothing was changed`, true)
        const again = content.indexOf(oldText, at + 1)
        if (again >= 0) {
          const count = content.split(oldText).length - 1
          return text(
            `oldText occurs ${count} times in ${path}; include more surrounding text so it matches once. Nothing was changed`,
            true,
          )
        }
        const next = content.slice(0, at) + newText + content.slice(at + oldText.length)
        await sessions.writeFile(tenant, session(), path, new TextEncoder().encode(next))
        const line = content.slice(0, at).split('\n').length
        return text(`replaced 1 occurrence at line ${line} of ${path}`)
      }),
  )
  server.registerTool(
    'list_sessions',
    {
      title: 'List sandbox sessions',
      description: 'List this tenant’s sandbox sessions (this MCP session’s is mcp-<its id>).',
      inputSchema: noArgs('list_sessions'),
      annotations: { readOnlyHint: true },
    },
    async () =>
      busy(async () => {
        const list = await sessions.list(tenant)
        return text(
          JSON.stringify(
            list.map((s) => ({ id: s.id, provider: s.provider, profile: s.profile, sandboxId: s.sandboxId })),
          ),
        )
      }),
  )
}
