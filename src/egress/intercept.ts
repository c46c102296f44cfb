import { isIP, type Socket } from 'node:net'
import type { Duplex } from 'node:stream'
import { TLSSocket, connect as tlsConnect, rootCertificates } from 'node:tls'
import { type CaPair, type LeafPair, createLeaf } from './tls-ca.js'

const MAX_HEAD = 64 * 1024
const HOP_HEADERS = new Set(['proxy-connection', 'proxy-authorization', 'connection', 'keep-alive'])

/** What {@link interceptTls} needs besides the sockets. */
export interface InterceptOptions {
  /** The sandbox's CA; leaves for the destinations are minted from it. */
  ca: CaPair
  /** Leaf certificates by host, kept per sandbox. */
  leaves: Map<string, Promise<LeafPair>>
  /** Placeholder → real value of the brokered secrets bound to this destination. */
  values: readonly (readonly [string, string])[]
  /** Extra CA (PEM) trusted for upstream servers, besides Node's bundled roots. */
  upstreamCa?: string
  connectTimeoutMs: number
  /** Called once the request went out with the secrets in it, with its method. */
  onForwarded: (method: string) => void
  /** Called when the tunnel is closed without forwarding, with why. */
  onRefused: (reason: string) => void
}

function leafFor(opts: InterceptOptions, host: string): Promise<LeafPair> {
  let leaf = opts.leaves.get(host)
  if (!leaf) {
    leaf = createLeaf(opts.ca, host)
    opts.leaves.set(host, leaf)
    leaf.catch(() => opts.leaves.delete(host))
  }
  return leaf
}

/** Reads an HTTP request head (up to the blank line) from `stream`; the bytes after it are `rest`. */
function readHead(stream: Duplex): Promise<{ head: string; rest: Buffer }> {
  return new Promise((resolve, reject) => {
    let buf = Buffer.alloc(0)
    const onData = (chunk: Buffer): void => {
      buf = Buffer.concat([buf, chunk])
      const end = buf.indexOf('\r\n\r\n')
      if (end < 0 && buf.length <= MAX_HEAD) return
      cleanup()
      if (end < 0) reject(new Error('request head over 64 KiB'))
      else resolve({ head: buf.subarray(0, end).toString('latin1'), rest: buf.subarray(end + 4) })
    }
    const onEnd = (): void => {
      cleanup()
      reject(new Error('the client closed the connection before a whole request head'))
    }
    const cleanup = (): void => {
      stream.off('data', onData).off('end', onEnd).off('error', onEnd)
      stream.pause()
    }
    stream.on('data', onData).once('end', onEnd).once('error', onEnd)
  })
}

/** The request head with the secrets put into header values, hop-by-hop headers dropped, one request. */
function rewrite(head: string, values: InterceptOptions['values']): { text: string; method: string } {
  const [requestLine = '', ...lines] = head.split('\r\n')
  const out = [requestLine]
  for (const line of lines) {
    const i = line.indexOf(':')
    const name = line.slice(0, i).trim()
    if (HOP_HEADERS.has(name.toLowerCase())) continue
    let value = line.slice(i + 1).trim()
    for (const [placeholder, real] of values) value = value.split(placeholder).join(real)
    out.push(`${name}: ${value}`)
  }
  out.push('Connection: close')
  return { text: `${out.join('\r\n')}\r\n\r\n`, method: requestLine.split(' ')[0] ?? '' }
}

function dialTls(dest: { host: string; port: number }, opts: InterceptOptions): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const sock = tlsConnect({
      host: dest.host,
      port: dest.port,
      ...(isIP(dest.host) ? {} : { servername: dest.host }),
      ...(opts.upstreamCa ? { ca: [...rootCertificates, opts.upstreamCa] } : {}),
      ALPNProtocols: ['http/1.1'],
    })
    const timer = setTimeout(() => {
      sock.destroy()
      reject(new Error(`${dest.host}:${dest.port} did not complete TLS within ${opts.connectTimeoutMs} ms`))
    }, opts.connectTimeoutMs)
    sock.once('secureConnect', () => {
      clearTimeout(timer)
      resolve(sock)
    })
    sock.once('error', (err) => {
      clearTimeout(timer)
      reject(new Error(`TLS to ${dest.host}:${dest.port} failed: ${err.message}`))
    })
  })
}

function answer(sock: Duplex, status: string, text: string): void {
  const body = `${text}\n`
  sock.end(
    `HTTP/1.1 ${status}\r\nContent-Type: text/plain\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\nX-Sbx-Egress: error\r\n\r\n${body}`,
  )
}

/**
 * Intercepts one CONNECT tunnel to a destination that brokered secrets are bound to (profiles with
 * `network.tlsIntercept`): answers `200`, terminates the sandbox's TLS with a leaf certificate for
 * the CONNECT host signed by the sandbox's CA, reads one request, puts the secrets into its header
 * values, and sends it over a new TLS connection to the real server (verified against Node's roots
 * and `upstreamCa`); the answer is relayed back. A hello naming another server is refused.
 */
export async function interceptTls(
  client: Socket,
  dest: { host: string; port: number },
  opts: InterceptOptions,
): Promise<void> {
  const leaf = await leafFor(opts, dest.host)
  client.write('HTTP/1.1 200 Connection Established\r\n\r\n')
  const secure = new TLSSocket(client, {
    isServer: true,
    key: leaf.keyPem,
    cert: leaf.certPem,
    ALPNProtocols: ['http/1.1'],
  })
  secure.on('error', () => client.destroy())
  client.resume()
  await new Promise<void>((resolve, reject) => {
    secure.once('secure', () => resolve())
    secure.once('error', reject)
    secure.once('close', () => reject(new Error('closed during the TLS handshake')))
  }).catch((err: unknown) => {
    opts.onRefused(`TLS handshake with the sandbox failed: ${(err as Error).message}`)
    throw err
  })
  const sni = secure.servername
  if (typeof sni === 'string' && sni.toLowerCase() !== dest.host) {
    opts.onRefused(`TLS SNI '${sni}' differs from CONNECT host ${dest.host}`)
    secure.destroy()
    return
  }
  const { head, rest } = await readHead(secure)
  let upstream: TLSSocket
  try {
    upstream = await dialTls(dest, opts)
  } catch (err) {
    opts.onRefused((err as Error).message)
    answer(secure, '502 Bad Gateway', `sbx egress: ${(err as Error).message}`)
    return
  }
  const { text, method } = rewrite(head, opts.values)
  upstream.write(text)
  if (rest.length) upstream.write(rest)
  opts.onForwarded(method)
  upstream.on('error', () => secure.destroy())
  secure.on('error', () => upstream.destroy())
  secure.pipe(upstream)
  upstream.pipe(secure)
  secure.resume()
}
