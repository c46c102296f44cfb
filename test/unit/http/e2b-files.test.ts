import { getSignature } from 'e2b'
import { describe, expect, test } from 'vitest'
import { entriesOf } from '../../../src/http/e2b/entry-info.js'
import { uploadMetadata } from '../../../src/http/e2b/file-metadata.js'
import { checkFileSignature, fileSignature, signedFileRequest } from '../../../src/http/e2b/file-signature.js'

const TOKEN = 'f0e1d2c3b4a5968778695a4b3c2d1e0f'

describe('E2B signed /files URLs', () => {
  test("our signature is the SDK's (getSignature), with and without expiration and user", async () => {
    for (const c of [
      { path: 'hello.txt', operation: 'read' as const, user: 'user' },
      { path: '/home/user/a b.txt', operation: 'write' as const, user: undefined },
      { path: 'x', operation: 'read' as const, user: 'root', expirationInSeconds: 120 },
    ]) {
      const sdk = await getSignature({ ...c, envdAccessToken: TOKEN })
      const ours = fileSignature(
        {
          path: c.path,
          operation: c.operation,
          username: c.user ?? '',
          expiration: sdk.expiration === null ? undefined : String(sdk.expiration),
        },
        TOKEN,
      )
      expect(ours).toBe(sdk.signature)
    }
  })

  test('the URL decides what is checked: path, user, operation by method; invalid before expired', async () => {
    const sdk = await getSignature({
      path: 'a.txt',
      operation: 'read',
      user: 'user',
      envdAccessToken: TOKEN,
      expirationInSeconds: -5,
    })
    const url = new URL(
      `http://h/files?path=a.txt&username=user&signature=${encodeURIComponent(sdk.signature)}&signature_expiration=${sdk.expiration}`,
    )
    const read = signedFileRequest(url, 'GET')!
    expect(read).toMatchObject({ path: 'a.txt', username: 'user', operation: 'read' })
    expect(() => checkFileSignature(read, TOKEN)).toThrow('signature is already expired')
    expect(() => checkFileSignature(read, TOKEN, (sdk.expiration! - 1) * 1000)).not.toThrow()
    // Another token, another method (a write), another path: invalid, never "expired".
    expect(() => checkFileSignature(read, 'other-token')).toThrow('invalid signature')
    expect(() => checkFileSignature(signedFileRequest(url, 'POST')!, TOKEN)).toThrow('invalid signature')
    url.searchParams.set('path', 'b.txt')
    expect(() => checkFileSignature(signedFileRequest(url, 'GET')!, TOKEN)).toThrow('invalid signature')
    expect(signedFileRequest(new URL('http://h/files?path=a.txt'), 'GET')).toBeUndefined()
  })
})

describe('E2B upload metadata and entries', () => {
  test('X-Metadata-* headers become lowercased keys; bad keys, values and sizes are 400s naming the problem', () => {
    expect(uploadMetadata(new Headers({ 'X-Metadata-Author': 'mish', 'content-type': 'x' }))).toEqual({
      author: 'mish',
    })
    expect(uploadMetadata(new Headers({ 'content-type': 'x' }))).toBeUndefined()
    expect(() => uploadMetadata(new Headers({ 'X-Metadata-good': 'bad\u007fvalue' }))).toThrow(
      /printable US-ASCII/,
    )
    expect(() => uploadMetadata(new Headers({ ['X-Metadata-' + 'k'.repeat(247)]: 'v' }))).toThrow(/1-246/)
    const big: Record<string, string> = {}
    for (let i = 0; i < 5; i++) big[`X-Metadata-k${i}`] = 'v'.repeat(1000)
    expect(() => uploadMetadata(new Headers(big))).toThrow(/4096-byte limit/)
  })

  test('stat lines joined with the agent info lines by path; an old agent error line is ignored', () => {
    const out = [
      '/home/user',
      'regular file|3|644|-rw-r--r--|user|user|1700000000|a.txt',
      'symbolic link|5|777|lrwxrwxrwx|user|user|1700000000|l',
      '{"path":"a.txt","metadata":{"author":"mish"}}',
      '{"path":"l","target":"/home/user/a.txt","metadata":{}}',
      '{"error":"BAD_REQUEST","message":"unknown or malformed --proc-fs-info invocation (2 arguments)"}',
    ].join('\n')
    const [a, l] = entriesOf(out)
    expect(a).toMatchObject({
      path: '/home/user/a.txt',
      type: 'FILE_TYPE_FILE',
      metadata: { author: 'mish' },
    })
    expect(a).not.toHaveProperty('symlinkTarget')
    expect(l).toMatchObject({
      path: '/home/user/l',
      type: 'FILE_TYPE_SYMLINK',
      symlinkTarget: '/home/user/a.txt',
    })
    expect(l).not.toHaveProperty('metadata')
  })
})
