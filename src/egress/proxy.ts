import { readFile, unlink, chmod } from 'node:fs/promises'
import net from 'node:net'
import {
  type CompiledEgress,
  type EgressPolicy,
  compileEgress,
  decideEgress,
  secretPlaceholder,
} from './policy.js'
import { parseEgressRule, ruleMatches } from './rules.js'
import { readSni } from './sni.js'
import { interceptTls } from './intercept.js'
import type { CaPair, LeafPair } from './tls-ca.js'

/** One egress decision, for the audit log and metrics. Never holds a secret's value. */
export interface EgressAuditEvent {
  tenant: string
  session: string
  sandboxId: string
  /** `host:port` as the sandbox asked for it. */
  destination: string
  verdict: 'allow' | 'deny'
  reason: string
  /** `CONNECT`, or the method of a plain-HTTP request. */
  method: string
  /** Names of brokered secrets put into this request. */
  secrets?: string[]
  /** Set when the proxy terminated the sandbox's TLS to put the secrets in (`network.tlsIntercept`). */
  intercepted?: true
}

/** Who is behind one listener, and what it may reach. */
export interface EgressSandboxContext {
  tenant: string
  session: string
  sandboxId: string
  policy: EgressPolicy
  /** The tenant's cap (rules), if it has one. */
  cap?: readonly string[]
  /** The sandbox's CA, for a policy with `tlsIntercept` (its key never enters the sandbox). */
  ca?: CaPair
}

/** Options of {@link EgressProxy}. */
export interface EgressProxyOptions {
  /** Called for every decision (allowed and refused). */
  onAudit?: (event: EgressAuditEvent) => void
  /** Upstream connect timeout (ms). @default 10000 */
  connectTimeoutMs?: number
  /** Where secrets' `env` values come from. @default process.env */
  env?: NodeJS.ProcessEnv
  /** PEM file of an extra CA trusted for intercepted upstream servers (besides Node's roots). */
  upstreamCaFile?: string
}

const MAX_HEAD = 64 * 1024
const HOP_HEADERS = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive'])

function reply(sock: net.Socket, status: string, text: string): void {
  const body = `${text}\n`
  sock.end(
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\nX-Sbx-Egress: ${status.startsWith('403') ? 'refused' : 'error'}\r\n\r\n${body}`,
  )
}

function splitHostPort(authority: string, defaultPort: number): { host: string; port: number } | undefined {
  const m = /^(\[[^\]]+\]|[^:]+)(?::(\d{1,5}))?$/.exec(authority.trim())
  if (!m?.[1]) return undefined
  const port = m[2] === undefined ? defaultPort : Number(m[2])
  if (port < 1 || port > 65_535) return undefined
  return {
    host: m[1]
      .replace(/^\[|\]$/g, '')
      .toLowerCase()
      .replace(/\.$/, ''),
    port,
  }
}

interface Listener {
  server: net.Server
  sockets: Set<net.Socket>
  ctx: EgressSandboxContext
  compiled: CompiledEgress
  leaves: Map<string, Promise<LeafPair>>
}

/**
 * The egress proxy: one Unix-socket listener per sandbox (its identity is the socket it came in
 * on). It speaks HTTP proxy requests (absolute URIs, or origin-form with `Host`) and `CONNECT`,
 * resolves names itself, checks every destination against the sandbox's allowlist and its
 * tenant's cap, checks a tunnelled TLS ClientHello's SNI against the CONNECT host, puts brokered
 * secrets into plain-HTTP request headers to their destinations, and answers a refusal at once
 * with `403` and the rule that refused it.
 */
export class EgressProxy {
  private readonly listeners = new Map<string, Listener>()
  private readonly connectTimeoutMs: number
  private readonly env: NodeJS.ProcessEnv
  private upstreamCa: Promise<string> | undefined

  constructor(private readonly options: EgressProxyOptions = {}) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 10_000
    this.env = options.env ?? process.env
  }

  /** Listens on `socketPath` for one sandbox (replacing a stale socket file there). */
  async listen(socketPath: string, ctx: EgressSandboxContext): Promise<void> {
    await this.close(socketPath)
    await unlink(socketPath).catch(() => undefined)
    const compiled = compileEgress(ctx.policy.allow, ctx.cap)
    const sockets = new Set<net.Socket>()
    const leaves = new Map<string, Promise<LeafPair>>()
    const server = net.createServer((sock) => {
      sockets.add(sock)
      sock.once('close', () => sockets.delete(sock))
      this.serve(sock, ctx, compiled, leaves)
    })
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject)
      server.listen(socketPath, () => resolve())
    })
    // The sandbox's user (any uid) must be able to connect; the directory is bind-mounted read-only.
    await chmod(socketPath, 0o666)
    this.listeners.set(socketPath, { server, sockets, ctx, compiled, leaves })
  }

  /** Whether a listener for `socketPath` runs in this process. */
  has(socketPath: string): boolean {
    return this.listeners.has(socketPath)
  }

  /** Stops listening on `socketPath` (open tunnels end). */
  async close(socketPath: string): Promise<void> {
    const l = this.listeners.get(socketPath)
    if (!l) return
    this.listeners.delete(socketPath)
    await new Promise<void>((resolve) => {
      l.server.close(() => resolve())
      for (const s of l.sockets) s.destroy()
    })
  }

  /** Stops every listener. */
  async closeAll(): Promise<void> {
    await Promise.all([...this.listeners.keys()].map((p) => this.close(p)))
  }

  private audit(
    ctx: EgressSandboxContext,
    e: Omit<EgressAuditEvent, 'tenant' | 'session' | 'sandboxId'>,
  ): void {
    this.options.onAudit?.({ tenant: ctx.tenant, session: ctx.session, sandboxId: ctx.sandboxId, ...e })
  }

  private serve(
    client: net.Socket,
    ctx: EgressSandboxContext,
    compiled: CompiledEgress,
    leaves: Map<string, Promise<LeafPair>>,
  ): void {
    client.on('error', () => undefined)
    let buf = Buffer.alloc(0)
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0) {
        if (buf.length > MAX_HEAD)
          reply(client, '431 Request Header Fields Too Large', 'sbx egress: request head over 64 KiB')
        return
      }
      client.off('data', onData)
      client.pause()
      const head = buf.subarray(0, end).toString('latin1')
      const rest = buf.subarray(end + 4)
      this.handle(client, head, rest, ctx, compiled, leaves).catch((err: unknown) =>
        reply(client, '502 Bad Gateway', `sbx egress: ${(err as Error).message}`),
      )
    }
    client.on('data', onData)
  }

  private async handle(
    client: net.Socket,
    head: string,
    rest: Buffer,
    ctx: EgressSandboxContext,
    compiled: CompiledEgress,
    leaves: Map<string, Promise<LeafPair>>,
  ): Promise<void> {
    const [requestLine = '', ...headerLines] = head.split('\r\n')
    const [method = '', target = '', version = 'HTTP/1.1'] = requestLine.split(' ')
    const headers = headerLines.map((l) => {
      const i = l.indexOf(':')
      return { name: l.slice(0, i).trim(), value: l.slice(i + 1).trim() }
    })
    let dest: { host: string; port: number } | undefined
    let path = target
    if (method === 'CONNECT') dest = splitHostPort(target, 443)
    else if (/^http:\/\//i.test(target)) {
      try {
        const url = new URL(target)
        dest = splitHostPort(url.host, 80)
        path = `${url.pathname}${url.search}`
      } catch {
        dest = undefined
      }
    } else if (/^https:\/\//i.test(target)) {
      reply(
        client,
        '400 Bad Request',
        'sbx egress: send https:// URLs through CONNECT (set HTTPS_PROXY), not as a plain proxy request',
      )
      return
    } else {
      const host = headers.find((h) => h.name.toLowerCase() === 'host')?.value
      dest = host === undefined ? undefined : splitHostPort(host, 80)
    }
    if (!method || !dest) {
      reply(
        client,
        '400 Bad Request',
        `sbx egress: cannot tell the destination of '${requestLine.slice(0, 200)}'`,
      )
      return
    }
    const destination = `${dest.host}:${dest.port}`
    const verdict = decideEgress(compiled, dest.host, dest.port)
    this.audit(ctx, {
      destination,
      verdict: verdict.allowed ? 'allow' : 'deny',
      reason: verdict.reason,
      method,
    })
    if (!verdict.allowed) {
      reply(client, '403 Forbidden', `sbx egress refused ${destination}: ${verdict.reason}`)
      return
    }
    const bound = Object.entries(ctx.policy.secrets).filter(([, secret]) =>
      secret.destinations.some((r) => ruleMatches(parseEgressRule(r), dest.host, dest.port)),
    )
    if (method === 'CONNECT' && bound.length && ctx.policy.tlsIntercept && ctx.ca) {
      await this.intercept(client, dest, rest, ctx, bound, leaves)
      return
    }
    if (method === 'CONNECT') {
      await this.tunnel(client, dest, rest, ctx, compiled)
      return
    }
    const out: string[] = [`${method} ${path || '/'} ${version}`]
    const values: [string, string][] = []
    for (const [name, secret] of bound)
      values.push([secretPlaceholder(name), await this.secretValue(name, secret)])
    const injected = bound.map(([name]) => name)
    for (const h of headers) {
      const lower = h.name.toLowerCase()
      if (HOP_HEADERS.has(lower) || lower === 'host') continue
      let value = h.value
      for (const [placeholder, real] of values) value = value.split(placeholder).join(real)
      out.push(`${h.name}: ${value}`)
    }
    out.push(`Host: ${dest.port === 80 ? dest.host : destination}`, 'Connection: close')
    const upstream = await this.dial(dest)
    upstream.write(`${out.join('\r\n')}\r\n\r\n`)
    if (rest.length) upstream.write(rest)
    if (injected.length)
      this.audit(ctx, {
        destination,
        verdict: 'allow',
        reason: 'brokered secrets added',
        method,
        secrets: injected,
      })
    this.splice(client, upstream)
  }

  private async intercept(
    client: net.Socket,
    dest: { host: string; port: number },
    rest: Buffer,
    ctx: EgressSandboxContext,
    bound: [string, EgressPolicy['secrets'][string]][],
    leaves: Map<string, Promise<LeafPair>>,
  ): Promise<void> {
    const destination = `${dest.host}:${dest.port}`
    // TLS interception takes the client's hello after the 200; a client that already sent bytes is
    // not one this can serve.
    if (rest.length || !ctx.ca) {
      reply(client, '400 Bad Request', 'sbx egress: send nothing after CONNECT before the 200 answer')
      return
    }
    const values: [string, string][] = []
    for (const [name, secret] of bound)
      values.push([secretPlaceholder(name), await this.secretValue(name, secret)])
    const secrets = bound.map(([name]) => name)
    const upstreamCa = await this.upstreamCaPem()
    await interceptTls(client, dest, {
      ca: ctx.ca,
      leaves,
      values,
      ...(upstreamCa ? { upstreamCa } : {}),
      connectTimeoutMs: this.connectTimeoutMs,
      onForwarded: (method) =>
        this.audit(ctx, {
          destination,
          verdict: 'allow',
          reason: 'brokered secrets added (TLS intercepted)',
          method,
          secrets,
          intercepted: true,
        }),
      onRefused: (reason) =>
        this.audit(ctx, { destination, verdict: 'deny', reason, method: 'CONNECT', intercepted: true }),
    }).catch(() => client.destroy())
  }

  private upstreamCaPem(): Promise<string | undefined> {
    const file = this.options.upstreamCaFile
    if (!file) return Promise.resolve(undefined)
    this.upstreamCa ??= readFile(file, 'utf8').catch((err: unknown) => {
      this.upstreamCa = undefined
      throw new Error(`egress.upstreamCaFile ${file} cannot be read: ${(err as Error).message}`)
    })
    return this.upstreamCa
  }

  private async tunnel(
    client: net.Socket,
    dest: { host: string; port: number },
    rest: Buffer,
    ctx: EgressSandboxContext,
    compiled: CompiledEgress,
  ): Promise<void> {
    const upstream = await this.dial(dest)
    client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
    // The first bytes decide: a TLS ClientHello must name the host the tunnel was opened for.
    // Nothing passes until the client has spoken (a whole hello, or anything not TLS) or the
    // server has (a server-first protocol), so waiting cannot slip a hello past the check.
    let first = rest
    let serverFirst: Buffer | undefined
    upstream.pause()
    while (
      serverFirst === undefined &&
      (first.length === 0 || (first[0] === 0x16 && readSni(first) === undefined))
    ) {
      if (first.length >= MAX_HEAD) {
        this.audit(ctx, {
          destination: `${dest.host}:${dest.port}`,
          verdict: 'deny',
          reason: 'TLS hello over 64 KiB without a readable server name',
          method: 'CONNECT',
        })
        upstream.destroy()
        client.destroy()
        return
      }
      const next = await new Promise<{ from: 'client' | 'upstream'; data: Buffer | null }>((resolve) => {
        const done = (v: { from: 'client' | 'upstream'; data: Buffer | null }): void => {
          client.off('data', onClient).off('end', onEnd).off('close', onEnd)
          upstream.off('data', onUpstream).off('end', onEnd).off('close', onEnd)
          client.pause()
          upstream.pause()
          resolve(v)
        }
        const onClient = (d: Buffer): void => done({ from: 'client', data: d })
        const onUpstream = (d: Buffer): void => done({ from: 'upstream', data: d })
        const onEnd = (): void => done({ from: 'client', data: null })
        client.on('data', onClient).once('end', onEnd).once('close', onEnd)
        upstream.on('data', onUpstream).once('end', onEnd).once('close', onEnd)
        client.resume()
        upstream.resume()
      })
      if (next.data === null) {
        upstream.destroy()
        client.destroy()
        return
      }
      if (next.from === 'upstream') serverFirst = next.data
      else first = Buffer.concat([first, next.data])
    }
    const sni = readSni(first)
    if (sni && sni !== dest.host) {
      const v = decideEgress(compiled, sni, dest.port)
      if (!v.allowed) {
        this.audit(ctx, {
          destination: `${sni}:${dest.port}`,
          verdict: 'deny',
          reason: `TLS SNI '${sni}' differs from CONNECT host ${dest.host}: ${v.reason}`,
          method: 'CONNECT',
        })
        upstream.destroy()
        client.destroy()
        return
      }
    }
    if (first.length) upstream.write(first)
    if (serverFirst) client.write(serverFirst)
    this.splice(client, upstream)
  }

  private async secretValue(name: string, s: EgressPolicy['secrets'][string]): Promise<string> {
    if (s.env !== undefined) {
      const v = this.env[s.env]
      if (v === undefined)
        throw new Error(`brokered secret ${name} has no value: set ${s.env} in the worker's environment`)
      return v
    }
    const text = await readFile(s.file ?? '', 'utf8').catch((err: unknown) => {
      throw new Error(`brokered secret ${name} cannot be read from ${s.file}: ${(err as Error).message}`)
    })
    return text.replace(/\r?\n$/, '')
  }

  private dial(dest: { host: string; port: number }): Promise<net.Socket> {
    return new Promise((resolve, reject) => {
      const sock = net.connect({ host: dest.host, port: dest.port })
      const timer = setTimeout(() => {
        sock.destroy()
        reject(
          new Error(
            `${dest.host}:${dest.port} did not accept a connection within ${this.connectTimeoutMs} ms`,
          ),
        )
      }, this.connectTimeoutMs)
      sock.once('connect', () => {
        clearTimeout(timer)
        resolve(sock)
      })
      sock.once('error', (err) => {
        clearTimeout(timer)
        reject(new Error(`cannot reach ${dest.host}:${dest.port}: ${err.message}`))
      })
    })
  }

  private splice(client: net.Socket, upstream: net.Socket): void {
    upstream.resume()
    upstream.on('error', () => client.destroy())
    client.on('error', () => upstream.destroy())
    client.pipe(upstream)
    upstream.pipe(client)
    client.resume()
  }
}
