import { describe, expect, test } from 'vitest'
import {
  isRedisUnreachable,
  keyspace,
  QUEUE_NAMES,
  redactUrl,
  redisOptions,
} from '../../../src/redis/index.js'

describe('src/redis', () => {
  test('the keyspace keeps its wire values', () => {
    expect(QUEUE_NAMES).toEqual({ exec: 'sbx-exec', agentRuns: 'sbx-agent-runs' })
    const k = keyspace('sbx')
    expect([k.prefix, k.sessions, k.records, k.e2b, k.engines]).toEqual([
      'sbx',
      'sbx:sessions:',
      'sbx:',
      'sbx:e2b:',
      'sbx:engines',
    ])
    expect(k.fences('sbx-exec')).toBe('sbx:sbx-exec:sbx')
    expect(k.jobIndex('sbx-exec')).toBe('sbx:sbx-exec:sbx:index')
    expect(k.jobs('sbx-exec')).toBe('sbx:sbx-exec:rq')
  })

  test('each role has its option set', () => {
    expect(redisOptions('command', 'n')).toMatchObject({ enableOfflineQueue: false, maxRetriesPerRequest: 1 })
    expect(redisOptions('blocking', 'n')).toMatchObject({ maxRetriesPerRequest: null })
    expect(redisOptions('subscriber', 'n')).toMatchObject({ maxRetriesPerRequest: null })
    const store = redisOptions('store', 'n')
    expect(store).toMatchObject({ lazyConnect: true, maxRetriesPerRequest: 1, connectTimeout: 5_000 })
    expect(store.enableOfflineQueue).toBeUndefined()
  })

  test('outage errors are told apart, through the cause chain', () => {
    expect(isRedisUnreachable(new Error('Connection is closed.'))).toBe(true)
    expect(isRedisUnreachable(new Error('wrapped', { cause: new Error("Stream isn't writeable") }))).toBe(
      true,
    )
    expect(isRedisUnreachable(new Error('connect ECONNREFUSED /var/run/docker.sock'))).toBe(false)
  })

  test('redactUrl hides the password only', () => {
    expect(redactUrl('redis://u:secret@h:6379/0')).toBe('redis://u:***@h:6379/0')
    expect(redactUrl('redis://127.0.0.1:6379')).toBe('redis://127.0.0.1:6379')
    expect(redactUrl('not a url')).toBe('(unparseable REDIS_URL)')
  })
})
