/**
 * File metadata of uploads (`files.write(…, { metadata })`): each `X-Metadata-<key>: <value>` header
 * of a `POST /files` is stored on every file of the upload as the extended attribute
 * `user.e2b.<key>` (key lowercased), as envd does, and comes back on `getInfo`, `list` and `rename`
 * (entry-info.ts). An upload replaces the metadata: the agent's truncating write drops the old
 * attributes, and these are set after it.
 */
import { E2BApiError } from './errors.js'
import type { E2BRouteDeps } from './deps.js'
import type { E2BSandbox } from './sandboxes.js'
import { AGENT, agentFailure, agentLacksMode, runHelper } from './sandbox-helper.js'

const HEADER_PREFIX = 'x-metadata-'
const KEY = /^[a-z0-9!#$%&'*+\-.^_`|~]+$/
const VALUE = /^[\x20-\x7e]*$/
/** Linux's xattr name limit (255) less the `user.e2b.` prefix. */
const MAX_KEY_BYTES = 246
/** Keys (with the prefix) and values of one file together, envd's per-inode budget. */
const MAX_TOTAL_BYTES = 4096

/** The upload's metadata (undefined when it sends none); a 400 naming what is wrong otherwise. */
export function uploadMetadata(headers: Headers): Record<string, string> | undefined {
  const metadata: Record<string, string> = {}
  let total = 0
  headers.forEach((value, name) => {
    if (!name.startsWith(HEADER_PREFIX)) return
    const key = name.slice(HEADER_PREFIX.length)
    if (!KEY.test(key) || key.length > MAX_KEY_BYTES)
      throw new E2BApiError(
        400,
        `invalid metadata key ${JSON.stringify(key)}: 1-${MAX_KEY_BYTES} HTTP token characters (X-Metadata-<key>)`,
      )
    if (!VALUE.test(value))
      throw new E2BApiError(
        400,
        `invalid metadata value for key ${JSON.stringify(key)}: printable US-ASCII only`,
      )
    total += 'user.e2b.'.length + key.length + value.length
    metadata[key] = value
  })
  if (total > MAX_TOTAL_BYTES)
    throw new E2BApiError(
      400,
      `metadata of ${total} bytes is over the ${MAX_TOTAL_BYTES}-byte limit per file`,
    )
  return Object.keys(metadata).length ? metadata : undefined
}

/** Replaces the metadata of the written files (absolute paths) with `metadata`. */
export async function storeMetadata(
  deps: E2BRouteDeps,
  s: E2BSandbox,
  paths: string[],
  metadata: Record<string, string>,
): Promise<void> {
  const pairs = Object.entries(metadata).flat()
  const r = await runHelper(deps, s, `${AGENT} --proc-fs-meta-set "$@"`, [
    String(paths.length),
    ...paths,
    ...pairs,
  ])
  const line = r.stdout.split('\n')[0] ?? ''
  if (r.exitCode === 0 && line.startsWith('{"ok"')) return
  const f = agentFailure(line)
  if (f && agentLacksMode(f))
    throw new E2BApiError(
      501,
      'file metadata needs a newer agent than this sandbox has (it was created before the service was upgraded); create a new sandbox',
    )
  if (f?.error === 'UNSUPPORTED')
    throw new E2BApiError(
      400,
      `${f.message}: this filesystem keeps no extended attributes; write the file elsewhere`,
    )
  throw new E2BApiError(
    500,
    f?.message ?? (r.stderr.trim() || `storing metadata failed (exit ${r.exitCode})`),
  )
}
