import type { IncomingMessage } from 'node:http'
import { describe, expect, test } from 'vitest'
import {
  appProtocols,
  chooseProtocol,
  chosenProtocols,
  keyFromProtocols,
  offeredProtocols,
} from '../../../src/http/ws-protocols.js'

const bearer = (key: string): string => `sbx.bearer.${Buffer.from(key).toString('base64url')}`

describe('WebSocket subprotocols', () => {
  test('a key offered as sbx.bearer.<base64url> is read back; none offered is undefined', () => {
    const header = `sbx.terminal.v1, ${bearer('k-0123456789/+=abc')}`
    expect(offeredProtocols(header)).toEqual(['sbx.terminal.v1', bearer('k-0123456789/+=abc')])
    expect(keyFromProtocols(header)).toBe('k-0123456789/+=abc')
    expect(keyFromProtocols('sbx.terminal.v1')).toBeUndefined()
    expect(keyFromProtocols(undefined)).toBeUndefined()
    expect(keyFromProtocols('sbx.bearer.')).toBeUndefined()
  })

  test('the key protocol is never forwarded nor selected', () => {
    const header = `${bearer('secret')}, chat, sbx.terminal.v1`
    expect(appProtocols(header)).toEqual(['chat', 'sbx.terminal.v1'])
    const req = {} as IncomingMessage
    expect(chooseProtocol(new Set([bearer('secret'), 'chat']), req)).toBe('chat')
    expect(chooseProtocol(new Set([bearer('secret')]), req)).toBe(false)
  })

  test("a handler's choice (the sandbox server's) wins, if it was offered", () => {
    const req = {} as IncomingMessage
    chosenProtocols.set(req, 'b')
    expect(chooseProtocol(new Set(['a', 'b']), req)).toBe('b')
    chosenProtocols.set(req, '')
    expect(chooseProtocol(new Set(['a']), req)).toBe(false)
  })
})
