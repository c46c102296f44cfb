import type { IncomingMessage } from 'node:http'

/**
 * WebSocket subprotocols of the service. Browsers cannot set headers on a WebSocket, so a key can
 * travel as one of the offered subprotocols instead of `Authorization: Bearer`:
 * `new WebSocket(url, ['sbx.terminal.v1', 'sbx.bearer.' + base64url(key)])`. The server never
 * selects (echoes) the key protocol.
 */
export const BEARER_PROTOCOL_PREFIX = 'sbx.bearer.'

/** The terminal's message protocol (binary: terminal bytes; text: JSON control messages). */
export const TERMINAL_PROTOCOL = 'sbx.terminal.v1'

/** The offered subprotocols of a `Sec-WebSocket-Protocol` header, in order. */
export function offeredProtocols(header: string | undefined): string[] {
  return (header ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)
}

/** The API key carried as `sbx.bearer.<base64url(key)>`, if offered. */
export function keyFromProtocols(header: string | undefined): string | undefined {
  const p = offeredProtocols(header).find((x) => x.startsWith(BEARER_PROTOCOL_PREFIX))
  if (!p) return undefined
  const key = Buffer.from(p.slice(BEARER_PROTOCOL_PREFIX.length), 'base64url').toString('utf8')
  return key || undefined
}

/** The offered subprotocols without the key-carrying one (what a sandbox server may choose from). */
export function appProtocols(header: string | undefined): string[] {
  return offeredProtocols(header).filter((p) => !p.startsWith(BEARER_PROTOCOL_PREFIX))
}

/**
 * The subprotocol a handler picked for an upgrade (a port's server chose it, say). A WebSocket
 * server's `handleProtocols` answers with it, else with the first offered protocol that is not a key.
 */
export const chosenProtocols = new WeakMap<IncomingMessage, string>()

/** `handleProtocols` of the service's WebSocket server. */
export function chooseProtocol(protocols: Set<string>, request: IncomingMessage): string | false {
  const chosen = chosenProtocols.get(request)
  if (chosen !== undefined) return protocols.has(chosen) ? chosen : false
  for (const p of protocols) if (!p.startsWith(BEARER_PROTOCOL_PREFIX)) return p
  return false
}
