/*
 * The engine directory on the real Redis (issue 17): placement on the least loaded live engine with
 * room, sessions kept on their engine, drained and down engines skipped (the session re-placed, the
 * engine it left reported), a routed job id keeping its lane, and caps.
 */
import { randomUUID } from 'node:crypto'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { EngineDirectory, laneName } from '../../../src/queue/engines/engine-directory.js'
import type { ExecJob } from '../../../src/queue/schemas.js'

const REDIS_URL = process.env['REDIS_URL'] ?? 'redis://127.0.0.1:6379'
let redis: Redis
let prefix: string
let dir: EngineDirectory

beforeAll(async () => {
  redis = new Redis(REDIS_URL)
  prefix = `engdir-${randomUUID().slice(0, 8)}`
  dir = new EngineDirectory(redis, { prefix, staleMs: 3_000 })
})

afterAll(async () => {
  const keys = await redis.keys(`${prefix}:*`)
  if (keys.length) await redis.del(...keys)
  await redis.quit()
})

const job = (sessionId?: string): ExecJob => ({
  jobId: `j${randomUUID().replace(/-/g, '')}`,
  tenant: 't',
  ...(sessionId === undefined ? {} : { sessionId }),
  providerId: 'docker',
  profile: 'default',
  command: 'true',
  timeoutMs: 1_000,
  outputCapBytes: 1_024,
  idempotent: false,
  callId: randomUUID(),
  toolName: 'exec',
  submittedAt: Date.now(),
})

const beat = (id: string, running: number, cap?: number, healthy = true, seenAt = Date.now()) =>
  dir.beat(id, { seenAt, healthy, running, workerId: `w-${id}`, ...(cap === undefined ? {} : { cap }) })

describe('engine directory', () => {
  test('placement alternates over equal engines, keeps sessions, skips drained and down ones', async () => {
    await beat('a', 0, 10)
    await beat('b', 0, 10)
    const placed = new Map<string, string>()
    for (let i = 0; i < 10; i++) {
      const r = await dir.route(job(`s${i}`))
      if ('none' in r) throw new Error('no engine')
      placed.set(`s${i}`, r.engineId)
    }
    const on = (e: string) => [...placed.values()].filter((x) => x === e).length
    expect([on('a'), on('b')]).toEqual([5, 5])
    // A session stays on its engine; a resubmitted job keeps its lane.
    const again = job('s0')
    expect(await dir.route(again)).toMatchObject({ engineId: placed.get('s0'), how: 'kept' })
    expect(await dir.route(again)).toMatchObject({ engineId: placed.get('s0'), how: 'job' })
    expect(await dir.laneOf(again.jobId)).toBe(placed.get('s0'))

    // Drained: its sessions are re-placed, naming the engine they left.
    const onA = [...placed].find(([, e]) => e === 'a')?.[0] ?? ''
    await dir.setDraining('a', true)
    expect(await dir.route(job(onA))).toMatchObject({ engineId: 'b', previous: 'a', how: 'placed' })
    expect((await dir.list()).find((e) => e.id === 'a')).toMatchObject({ state: 'live', draining: true })
    await dir.setDraining('a', false)

    // Down (unhealthy, or not seen within staleMs): skipped.
    await beat('b', 5, 10, false)
    expect(await dir.route(job())).toMatchObject({ engineId: 'a' })
    await beat('b', 5, 10, true, Date.now() - 10_000)
    expect((await dir.list()).find((e) => e.id === 'b')?.state).toBe('down')
    expect(await dir.route(job())).toMatchObject({ engineId: 'a' })
  })

  test('caps: the engine with room wins; none with room or none live says so', async () => {
    await beat('a', 10, 10)
    await beat('b', 3, 10)
    expect(await dir.route(job('cap-1'))).toMatchObject({ engineId: 'b' })
    await beat('b', 10, 10)
    expect(await dir.route(job('cap-2'))).toEqual({ none: true, live: 2 })
    await beat('a', 0, 10, false)
    await beat('b', 0, 10, false)
    expect(await dir.route(job('cap-3'))).toEqual({ none: true, live: 0 })
  })

  test('memory: reserved memory weighs placement; a configured capacity refuses past it', async () => {
    const GiB = 1024 ** 3
    const mem = (id: string, running: number, reservedGiB: number, capacityGiB: number, strict: boolean) =>
      dir.beat(id, {
        seenAt: Date.now(),
        healthy: true,
        running,
        cap: 100,
        workerId: `w-${id}`,
        memoryBytes: capacityGiB * GiB,
        memoryStrict: strict,
        reservedBytes: reservedGiB * GiB,
      })
    // Fewer sandboxes on a, but their limits take most of its memory: b wins.
    await mem('a', 2, 14, 16, false)
    await mem('b', 6, 4, 16, false)
    expect(await dir.route(job('mem-1'), Date.now(), 1 * GiB)).toMatchObject({ engineId: 'b' })
    // Only a weight when the capacity is the engine's own memory: a full engine still takes a session.
    await mem('a', 2, 16, 16, false)
    await mem('b', 2, 16, 16, false)
    expect(await dir.route(job('mem-2'), Date.now(), 1 * GiB)).toMatchObject({ how: 'placed' })
    // A configured capacity (strict) is a bound: the limit must fit (fresh engines: a and b have
    // placements pending from above, which count until their sandboxes are reported).
    await beat('a', 0, 10, false)
    await beat('b', 0, 10, false)
    await mem('c', 2, 15.5, 16, true)
    await mem('d', 2, 14.5, 16, true)
    expect(await dir.route(job('mem-3'), Date.now(), 1 * GiB)).toMatchObject({ engineId: 'd' })
    // mem-3's placement is pending on d (its sandbox not yet reported): the next 1 GiB does not fit.
    expect(await dir.route(job('mem-4'), Date.now(), 1 * GiB)).toEqual({ none: true, live: 2 })
    // Engine views carry the figures (/v1/providers, sbx engine ls).
    expect((await dir.list()).find((e) => e.id === 'd')).toMatchObject({
      memoryBytes: 16 * GiB,
      reservedBytes: 14.5 * GiB,
      memoryStrict: true,
    })
  })

  test('adoption: one worker holds a down engine lane at a time', async () => {
    expect(await dir.adopt('x', 'w1', 5_000)).toBe(true)
    expect(await dir.adopt('x', 'w2', 5_000)).toBe(false)
    expect(await dir.adopt('x', 'w1', 5_000)).toBe(true)
    await dir.release('x', 'w1')
    expect(await dir.adopt('x', 'w2', 5_000)).toBe(true)
  })

  test('gateways: each worker of an engine keeps its own entry; a stale one drops out; pin places', async () => {
    const now = Date.now()
    const gw = (url: string, seenAt: number, healthy = true) =>
      dir.beat('g', { seenAt, healthy, running: 0, workerId: url, gatewayUrl: url })
    await gw('http://w1:1', now)
    await gw('http://w2:2', now - 1_000)
    // The record holds the last writer's URL only; the live set holds both.
    expect((await dir.engine('g', now))?.gatewayUrl).toBe('http://w2:2')
    expect(await dir.gateways('g', now)).toEqual(['http://w1:1', 'http://w2:2'])
    // w2 stops beating: past the staleness window it is gone, w1 stays; an unhealthy beat renews nothing.
    await gw('http://w1:1', now + 2_500)
    await gw('http://w3:3', now + 2_500, false)
    expect(await dir.gateways('g', now + 2_500 + 1)).toEqual(['http://w1:1'])
    await dir.dropGateway('g', 'http://w1:1')
    expect(await dir.gateways('g', now + 2_501)).toEqual([])
    // A pinned session stays on its engine while that engine is live, even if another is emptier.
    await beat('p1', 5, 10)
    await beat('p2', 0, 10)
    const s = { tenant: 't', sessionId: 'pinned', providerId: 'docker', profile: 'default' }
    await dir.pin(s, 'p1')
    expect(await dir.place(s)).toMatchObject({ engineId: 'p1', how: 'kept' })
  })

  test('lane names hold no colon', () => {
    expect(laneName('sbx-exec', 'EJL4:67DC:JATX')).toBe('sbx-exec-ejl467dcjatx')
  })
})
