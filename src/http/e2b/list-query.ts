/**
 * The filters and order of E2B's sandbox list (`GET /v2/sandboxes`, `GET /sandboxes`): `metadata`
 * (`k=v&…`, each side URL-encoded once more by the SDK), `state` (`running,paused`), `template` (a
 * template id, or the alias `list` reports: the profile), `startedAfter` (an RFC 3339 time: sandboxes started at or after it) and `order`
 * (`asc` or `desc` by start time, newest first by default). Bad values are a 400 naming the field.
 */
import { E2BApiError } from './errors.js'
import type { E2BSandbox } from './sandboxes.js'

/** The list's query, parsed. */
export interface E2BListQuery {
  readonly metadata: Readonly<Record<string, string>>
  readonly states: readonly ('running' | 'paused')[]
  readonly template?: string
  /** Epoch ms: only sandboxes started at or after it. */
  readonly startedAfterMs?: number
  readonly order: 'asc' | 'desc'
}

const STATES = ['running', 'paused'] as const

function metadataFilter(raw: string | undefined): Record<string, string> {
  const filter: Record<string, string> = {}
  if (!raw) return filter
  for (const [k, v] of new URLSearchParams(raw)) filter[decodeURIComponent(k)] = decodeURIComponent(v)
  return filter
}

/** Parses the list's query parameters (`query(name)` reads one). */
export function parseListQuery(query: (name: string) => string | undefined): E2BListQuery {
  const states = (query('state') || 'running,paused').split(',').map((s) => s.trim())
  for (const s of states)
    if (!(STATES as readonly string[]).includes(s))
      throw new E2BApiError(400, `state '${s}' is not one of: ${STATES.join(', ')}`)
  const order = query('order') || 'desc'
  if (order !== 'asc' && order !== 'desc')
    throw new E2BApiError(400, `order must be 'asc' or 'desc' (by start time), not '${order}'`)
  const after = query('startedAfter')
  let startedAfterMs: number | undefined
  if (after) {
    startedAfterMs = Date.parse(after)
    if (Number.isNaN(startedAfterMs))
      throw new E2BApiError(
        400,
        `startedAfter must be an RFC 3339 time (e.g. 2026-01-01T00:00:00Z), not '${after}'`,
      )
  }
  const template = query('template') || undefined
  return {
    metadata: metadataFilter(query('metadata')),
    states: states as E2BListQuery['states'],
    order,
    ...(template ? { template } : {}),
    ...(startedAfterMs === undefined ? {} : { startedAfterMs }),
  }
}

/** The sandboxes (newest first, as the store lists them) that match `q`, in its order. */
export function applyListQuery(sandboxes: readonly E2BSandbox[], q: E2BListQuery): E2BSandbox[] {
  const matching = sandboxes.filter(
    (s) =>
      q.states.includes(s.paused ? 'paused' : 'running') &&
      (q.template === undefined || s.templateId === q.template || s.profile === q.template) &&
      (q.startedAfterMs === undefined || s.startedAt.getTime() >= q.startedAfterMs) &&
      Object.entries(q.metadata).every(([k, v]) => s.metadata[k] === v),
  )
  return q.order === 'asc' ? matching.reverse() : matching
}
