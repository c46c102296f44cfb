import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll } from 'vitest'
import { RedisSessionStore } from '../../../src/sessions/index.js'
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
