import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, test } from 'vitest'
import { RedisSessionStore } from '../../../src/sessions/index.js'
import type { BindingRecord } from '../../../src/sessions/index.js'
import { runSessionStoreSuite } from '../../support/session-store-suite.js'
import { deleteKeys } from '../../support/redis.js'

const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379')
afterAll(async () => {
  await redis.quit()
})

runSessionStoreSuite('redis', async () => {
  const prefix = `test-sessions-${randomUUID()}:`
  const store = new RedisSessionStore({ redis, prefix })
  return {
    store,
    cleanup: async () => {
      await store.close()
      await deleteKeys(`${prefix}*`, redis)
    },
  }
})

describe('a binding made without a replacement notice (redis)', () => {
  const T0 = 1_700_000_000_000
  const rec = (id: string): BindingRecord => ({
    ref: { providerId: 'docker', id, profile: 'default' },
    tenant: 'acme',
    slots: [],
    boundAt: T0,
  })
  const lock = { name: 'bind:s1', token: 'me', ttlMs: 1000 }

  test('says so in its record, so its uses read no notice; callers never see the mark', async () => {
    const prefix = `test-sessions-${randomUUID()}:`
    const store = new RedisSessionStore({ redis, prefix })
    try {
      await store.bind('s1', rec('c1'), T0 + 5000)
      expect(JSON.parse((await redis.hget(`${prefix}bindings`, 's1')) as string)).toMatchObject({
        noticeFree: true,
      })
      const used = await store.useOrLock('s1', { leaseId: 'l1', expiresAt: T0 + 1000 }, T0 + 5000, lock)
      expect(used).toEqual({ binding: rec('c1') })
      expect(await store.getBinding('s1')).toEqual(rec('c1'))
      // Replaced: the notice is written with the binding dropped; a record read back and bound
      // again (carrying the mark) does not hide it.
      await store.unbind('s1', 'c1', { at: T0 + 1, reason: 'exited (137)' })
      const marked = { ...rec('c2'), noticeFree: true } as BindingRecord
      await store.bind('s1', marked, T0 + 5000)
      const after = await store.useOrLock('s1', { leaseId: 'l2', expiresAt: T0 + 1000 }, T0 + 5000, lock)
      expect(after).toMatchObject({ binding: rec('c2'), replaced: { previousSandboxId: 'c1' } })
    } finally {
      await store.close()
      await deleteKeys(`${prefix}*`, redis)
    }
  })
})
