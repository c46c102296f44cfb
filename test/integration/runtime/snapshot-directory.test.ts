import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import {
  MemorySnapshotDirectory,
  RedisSnapshotDirectory,
  type SnapshotDirectory,
  type SnapshotRecord,
} from '../../../src/services/snapshot-directory.js'
import { deleteKeys } from '../../support/redis.js'

/* Snapshot records on the real Redis and in memory: tenant-scoped, and the quota holds under a race. */
const redis = new Redis(process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379')
const prefix = `test-snapdir-${randomUUID()}:`
afterAll(async () => {
  await deleteKeys(`${prefix}*`, redis)
  await redis.quit()
})

const record = (tenant: string, id = `snap-${randomUUID()}`): SnapshotRecord => ({
  id,
  tenant,
  provider: 'docker',
  profile: 'pws',
  sessionId: 's1',
  createdAt: Date.now(),
  state: 'creating',
  workspaceBytes: 0,
})

describe.each([
  ['redis', () => new RedisSnapshotDirectory(redis, `${prefix}${randomUUID()}:`)],
  ['memory', () => new MemorySnapshotDirectory()],
] as [string, () => SnapshotDirectory][])('%s snapshot directory', (_name, make) => {
  test('records are per tenant; update touches only existing ones', async () => {
    const d = make()
    const a = record('ta')
    await d.add(a, 5)
    expect(await d.get('tb', a.id)).toBeUndefined()
    expect(await d.list('tb')).toEqual([])
    await d.update({ ...a, state: 'ready', workspaceBytes: 7 })
    expect(await d.get('ta', a.id)).toMatchObject({ state: 'ready', workspaceBytes: 7 })
    expect(await d.delete('tb', a.id)).toBe(false)
    expect(await d.delete('ta', a.id)).toBe(true)
    await d.update(a)
    expect(await d.get('ta', a.id)).toBeUndefined()
  })

  test("a record left on its engine leaves the tenant's records and quota, and waits for that engine", async () => {
    const d = make()
    const a = { ...record('tl'), state: 'ready' as const, engineId: 'eng-a' }
    await d.add(a, 1)
    expect(await d.leaveOnEngine(a)).toBe(true)
    expect(await d.get('tl', a.id)).toBeUndefined()
    expect(await d.list('tl')).toEqual([])
    await d.add(record('tl'), 1) // the quota counts it no more
    expect(await d.leftovers('eng-b')).toEqual([])
    expect(await d.leftovers('eng-a')).toEqual([a])
    // Only once: a second delete finds no record.
    expect(await d.leaveOnEngine(a)).toBe(false)
    await d.forgetLeftover('eng-a', a.id)
    expect(await d.leftovers('eng-a')).toEqual([])
  })

  test('the quota holds when many adds race', async () => {
    const d = make()
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => d.add(record('tq'), 3)))
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3)
    const refused = results.find((r) => r.status === 'rejected')
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(AppError)
    expect(((refused as PromiseRejectedResult).reason as AppError).code).toBe('QUOTA_EXCEEDED')
    expect(await d.list('tq')).toHaveLength(3)
  })
})
