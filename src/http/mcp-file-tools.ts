import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js'
import type { AppDeps } from './deps.js'
import { base64Bytes, utf8Text } from './mcp-file-encoding.js'
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
 * Registers `read_file` (UTF-8 text, optionally a line range, or base64 bytes), `write_file` (text or
 * base64 bytes), `edit_file` (one exact replacement in a text file) and `list_sessions` on `server`,
 * through the session file API of the MCP session's sandbox. Bytes are never mangled: a file that is
 * not UTF-8 text is an error suggesting base64.
 */
export function registerFileTools(server: McpServer, ctx: McpFileToolsContext): void {
  const { sessions, tenant, session, busy } = ctx
  const bytesOf = async (path: string): Promise<Uint8Array | undefined> =>
    sessions.readFile(tenant, session(), path)
  /** The file as text, `{ binary }` when it is not UTF-8 text, undefined when it does not exist. */
  const read = async (path: string): Promise<string | { binary: number } | undefined> => {
    const data = await bytesOf(path)
    return data ? (utf8Text(data) ?? { binary: data.byteLength }) : undefined
  }
  server.registerTool(
    'read_file',
    {
      title: 'Read a file',
      description:
        'Read a file from the sandbox: UTF-8 text, whole or lines startLine..endLine (1-based, inclusive), ' +
        'or with encoding base64 its bytes base64-encoded (for binary files).',
      inputSchema: readFileArgs,
      annotations: { readOnlyHint: true },
    },
    async ({ path, encoding, startLine, endLine }) =>
      busy(async () => {
        if (encoding === 'base64') {
          if (startLine != null || endLine != null)
            return text(
              'startLine and endLine select lines of a text file; with encoding base64 the whole file is returned: send them as null',
              true,
            )
          const data = await bytesOf(path)
          if (data === undefined) return text(`no such file: ${path}`, true)
          return text(Buffer.from(data.buffer, data.byteOffset, data.byteLength).toString('base64'))
        }
        const content = await read(path)
        if (content === undefined) return text(`no such file: ${path}`, true)
        if (typeof content !== 'string') return text(binaryHint(path, content.binary, 'read it'), true)
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
      description:
        'Write a file in the sandbox, replacing it whole (parent folders are created): content is UTF-8 text, ' +
        'or with encoding base64 the base64 of the bytes (for binary files).',
      inputSchema: writeFileArgs,
      annotations: { destructiveHint: true },
    },
    async ({ path, content, encoding }) =>
      busy(async () => {
        const bytes = encoding === 'base64' ? base64Bytes(content) : new TextEncoder().encode(content)
        if (typeof bytes === 'string') return text(bytes, true)
        await sessions.writeFile(tenant, session(), path, bytes)
        return text(`wrote ${bytes.byteLength} bytes to ${path}`)
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
        if (typeof content !== 'string')
          return text(binaryHint(path, content.binary, 'rewrite it with write_file'), true)
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

/** The error for a binary file met by a text operation: what it is and how to `what` instead. */
function binaryHint(path: string, bytes: number, what: string): string {
  return (
    `${path} is a binary file (${bytes} bytes that are not UTF-8 text); ` +
    `${what} with encoding: "base64" (the bytes base64-encoded). Nothing was changed`
  )
}
