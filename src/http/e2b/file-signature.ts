/**
 * Signed `/files` URLs (`sandbox.downloadUrl` / `uploadUrl`): a URL carrying `signature` (and
 * optionally `signature_expiration`, Unix seconds) is authorised without `X-Access-Token`. The
 * signature is what the SDK derives from the sandbox's envd access token: `v1_` + the unpadded
 * base64 SHA-256 of `<path>:<operation>:<username>:<token>[:<expiration>]`, where `path` and
 * `username` are the URL's query values as given (empty when absent) and the operation is `read`
 * (GET) or `write` (POST), so a download URL opens no upload. The signature is checked first and the
 * expiration after it, as envd does: a forger never learns whether a guessed expiry was the problem.
 */
import { createHash, timingSafeEqual } from 'node:crypto'
import { E2BApiError } from './errors.js'

/** What a signed request asks for: the query values the signature covers. */
export interface SignedFileRequest {
  signature: string
  /** `signature_expiration` as sent (Unix seconds), when sent. */
  expiration: string | undefined
  path: string
  username: string
  operation: 'read' | 'write'
}

/** The signed request of a `/files` call, or undefined when the URL carries no `signature`. */
export function signedFileRequest(url: URL, method: string): SignedFileRequest | undefined {
  const signature = url.searchParams.get('signature')
  if (signature === null) return undefined
  return {
    signature,
    expiration: url.searchParams.get('signature_expiration') ?? undefined,
    path: url.searchParams.get('path') ?? '',
    username: url.searchParams.get('username') ?? '',
    operation: method === 'GET' ? 'read' : 'write',
  }
}

/** The signature the SDK computes for `req` with the sandbox's access token. */
export function fileSignature(req: Omit<SignedFileRequest, 'signature'>, accessToken: string): string {
  const raw = [
    req.path,
    req.operation,
    req.username,
    accessToken,
    ...(req.expiration ? [req.expiration] : []),
  ]
  const digest = createHash('sha256').update(raw.join(':'), 'utf8').digest('base64')
  return `v1_${digest.replace(/=+$/, '')}`
}

/** What every signature looks like (`v1_` + 43 base64 characters): anything else matches no token. */
const SIGNATURE_SHAPE = /^v1_[A-Za-z0-9+/]{43}$/

/** Whether the signature could be one at all: checked before any sandbox's token is tried. */
export function wellFormed(req: SignedFileRequest): boolean {
  return SIGNATURE_SHAPE.test(req.signature)
}

/** Whether `req.signature` is the one `accessToken` gives (constant time); expiry is not looked at. */
export function signatureMatches(req: SignedFileRequest, accessToken: string): boolean {
  const want = Buffer.from(fileSignature(req, accessToken))
  const got = Buffer.from(req.signature)
  return want.length === got.length && timingSafeEqual(want, got)
}

/**
 * Throws envd's 401 for a signature that does not match the token, or one past its expiration
 * (`nowMs`, default now).
 */
export function checkFileSignature(req: SignedFileRequest, accessToken: string, nowMs = Date.now()): void {
  if (!signatureMatches(req, accessToken)) throw new E2BApiError(401, 'invalid signature')
  if (req.expiration === undefined) return
  const expiration = Number(req.expiration)
  if (!Number.isInteger(expiration)) throw new E2BApiError(401, 'invalid signature_expiration')
  if (expiration * 1000 < nowMs) throw new E2BApiError(401, 'signature is already expired')
}
