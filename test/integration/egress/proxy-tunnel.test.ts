import { mkdtempSync, rmSync } from 'node:fs'
import net from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import tls from 'node:tls'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type EgressAuditEvent, EgressProxy } from '../../../src/egress/proxy.js'

/**
 * The proxy's CONNECT path over its Unix socket, as the sandbox's forwarder reaches it: a TLS
 * ClientHello must name the host the tunnel was opened for. The upstream is a local TCP server that
 * records whether any byte reached it (no certificate needed: the hello is what is checked).
 */

const dir = mkdtempSync(join(tmpdir(), 'sbx-egress-test-'))
const socketPath = join(dir, 'proxy.sock')
const audits: EgressAuditEvent[] = []
const proxy = new EgressProxy({ onAudit: (e) => audits.push(e) })
let upstreamPort = 0
let upstreamBytes = 0
const upstream = net.createServer((s) => s.on('data', (d: Buffer) => (upstreamBytes += d.length)))

beforeAll(async () => {
  await new Promise<void>((r) => upstream.listen(0, '127.0.0.1', r))
  upstreamPort = (upstream.address() as net.AddressInfo).port
  await proxy.listen(socketPath, {
    tenant: 't1',
    session: 's1',
    sandboxId: 'sb1',
    policy: { allow: [`localhost:${upstreamPort}`], secrets: {}, tlsIntercept: false },
  })
})
afterAll(async () => {
  await proxy.closeAll()
  upstream.close()
  rmSync(dir, { recursive: true, force: true })
})

/** Opens a CONNECT tunnel and starts TLS with `servername`; resolves when the proxy closes it or bytes flow. */
async function tunnelWithSni(servername: string): Promise<string> {
  const sock = net.connect(socketPath)
  sock.write(`CONNECT localhost:${upstreamPort} HTTP/1.1\r\nHost: localhost:${upstreamPort}\r\n\r\n`)
  const head = await new Promise<string>((resolve) => sock.once('data', (d: Buffer) => resolve(d.toString())))
  if (!head.startsWith('HTTP/1.1 200')) return head
  const before = upstreamBytes
  const t = tls.connect({ socket: sock, servername, rejectUnauthorized: false })
  t.on('error', () => undefined)
  await new Promise<void>((resolve) => {
    sock.once('close', () => resolve())
    const poll = setInterval(() => {
      if (upstreamBytes > before) {
        clearInterval(poll)
        resolve()
      }
    }, 5)
    sock.once('close', () => clearInterval(poll))
  })
  t.destroy()
  return upstreamBytes > before ? 'relayed' : 'closed'
}

describe('egress proxy CONNECT', () => {
  test('a hello naming the CONNECT host is relayed', async () => {
    expect(await tunnelWithSni('localhost')).toBe('relayed')
  })

  test('a hello naming another host is cut off before a byte reaches the upstream, and audited', async () => {
    expect(await tunnelWithSni('elsewhere.test')).toBe('closed')
    expect(audits.at(-1)).toMatchObject({
      tenant: 't1',
      session: 's1',
      verdict: 'deny',
      destination: `elsewhere.test:${upstreamPort}`,
    })
    expect(audits.at(-1)?.reason).toContain("TLS SNI 'elsewhere.test' differs from CONNECT host localhost")
  })

  test('a CONNECT to another port is refused at once with the rule', async () => {
    expect(await tunnelWithSni('localhost').then(() => 'ok')).toBe('ok')
    const sock = net.connect(socketPath)
    sock.write(`CONNECT localhost:1 HTTP/1.1\r\n\r\n`)
    const answer = await new Promise<string>((resolve) => {
      let text = ''
      sock.on('data', (d: Buffer) => (text += d.toString()))
      sock.on('close', () => resolve(text))
    })
    expect(answer).toContain('403 Forbidden')
    expect(answer).toContain(`sbx egress refused localhost:1: localhost:1 matches no rule`)
  })
})
