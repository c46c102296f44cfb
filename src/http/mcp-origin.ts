import { hostname, networkInterfaces } from 'node:os'
import { AppError } from '../errors.js'

/** Which `Host` and `Origin` headers `/mcp` accepts (DNS-rebinding protection). */
export interface McpOriginOptions {
  /** The address the server listens on (`server.host`). */
  readonly listenHost: string
  /** `server.allowedHosts`: host names (no port); `*` accepts any. @default the listen address and the localhost names */
  readonly allowedHosts?: readonly string[]
  /** `server.allowedOrigins`: origins (`scheme://host[:port]`); `*` accepts any. @default http(s) origins on an allowed host */
  readonly allowedOrigins?: readonly string[]
}

const LOCAL_NAMES = ['localhost', '127.0.0.1', '::1']
const WILDCARDS = new Set(['0.0.0.0', '::', ''])

/** The host names accepted by default: the listen address and localhost (every local name for a wildcard). */
export function defaultAllowedHosts(listenHost: string): string[] {
  const host = bare(listenHost)
  if (!WILDCARDS.has(host)) return [...new Set([host, ...LOCAL_NAMES])]
  const addresses = Object.values(networkInterfaces())
    .flatMap((list) => list ?? [])
    .map((a) => a.address)
  return [...new Set([...LOCAL_NAMES, hostname().toLowerCase(), ...addresses])]
}

/**
 * Checks a request's `Host` and `Origin` before anything else reads it: a page on another site that
 * rebinds its DNS name to this server sends its own name in both, and gets a 403 saying which header
 * was refused and which config key admits it. A request without `Origin` (non-browser clients) is
 * judged by `Host` alone.
 */
export function createMcpOriginCheck(opts: McpOriginOptions): (headers: Headers) => void {
  const hosts = new Set((opts.allowedHosts ?? defaultAllowedHosts(opts.listenHost)).map((h) => bare(h)))
  const anyHost = hosts.has('*')
  const origins = opts.allowedOrigins ? new Set(opts.allowedOrigins.map((o) => o.toLowerCase())) : undefined
  return function checkMcpOrigin(headers: Headers): void {
    const host = headers.get('host')
    const name = host === null ? undefined : hostOf(host)
    if (!anyHost && (name === undefined || !hosts.has(name)))
      throw new AppError(
        'FORBIDDEN',
        `Host header ${JSON.stringify(host ?? '')} is not an allowed host of /mcp (DNS-rebinding protection); ` +
          `connect by one of ${[...hosts].join(', ')} or add the name to server.allowedHosts`,
      )
    const origin = headers.get('origin')
    if (origin === null) return
    const ok = origins
      ? origins.has('*') || origins.has(origin.toLowerCase())
      : anyHost || originHostAllowed(origin, hosts)
    if (!ok)
      throw new AppError(
        'FORBIDDEN',
        `Origin ${JSON.stringify(origin)} is not an allowed origin of /mcp (DNS-rebinding protection); ` +
          'add it to server.allowedOrigins',
      )
  }
}

function originHostAllowed(origin: string, hosts: ReadonlySet<string>): boolean {
  try {
    const u = new URL(origin)
    return (u.protocol === 'http:' || u.protocol === 'https:') && hosts.has(bare(u.hostname))
  } catch {
    return false
  }
}

/** The host name of a `Host` header value (`name:port`, `[v6]:port`), lower-cased, or undefined when malformed. */
function hostOf(header: string): string | undefined {
  try {
    return bare(new URL(`http://${header}`).hostname)
  } catch {
    return undefined
  }
}

function bare(host: string): string {
  const h = host.trim().toLowerCase()
  return h.startsWith('[') && h.endsWith(']') ? h.slice(1, -1) : h
}
