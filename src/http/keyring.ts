import { createHash, timingSafeEqual } from 'node:crypto'
import { AppError } from '../errors.js'

/** Who a request is, once its bearer key matched. */
export interface Principal {
  readonly tenant: string
  readonly admin: boolean
  /** First 8 hex chars of the key's sha256: safe to log, identifies the key. */
  readonly keyId: string
}

/** One configured key: only its hash is kept. */
export interface KeyEntry {
  /** The plain key (hashed immediately), or… */
  key?: string
  /** …its sha256 hex. */
  sha256?: string
  tenant: string
  admin?: boolean
}

/** sha256 of a key, as hex. */
export function hashKey(key: string): string {
  return createHash('sha256').update(key, 'utf8').digest('hex')
}

/**
 * Maps bearer keys to tenants. Keys are stored hashed; lookup hashes the presented key and compares
 * it with every entry in constant time (no early exit), so timing reveals nothing about which key
 * or how much of it matched.
 */
export class Keyring {
  private readonly entries: { hash: Buffer; principal: Principal }[]

  constructor(keys: readonly KeyEntry[]) {
    this.entries = keys.map((k) => {
      const hex = k.sha256 ?? (k.key !== undefined ? hashKey(k.key) : undefined)
      if (!hex || !/^[0-9a-f]{64}$/.test(hex)) {
        throw new AppError('CONFIG_INVALID', `API key for tenant "${k.tenant}" needs a key or a sha256`)
      }
      return {
        hash: Buffer.from(hex, 'hex'),
        principal: { tenant: k.tenant, admin: k.admin ?? false, keyId: hex.slice(0, 8) },
      }
    })
  }

  get size(): number {
    return this.entries.length
  }

  /** The principal of a presented key, or `undefined`. */
  verify(presented: string): Principal | undefined {
    const h = Buffer.from(hashKey(presented), 'hex')
    let found: Principal | undefined
    for (const e of this.entries) {
      if (timingSafeEqual(e.hash, h) && !found) found = e.principal
    }
    return found
  }
}
