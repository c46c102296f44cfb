import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { RedisServer, commandCalls } from '../support/redis-server.js'
import {
  fleetConfig,
  removeScopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
} from '../support/sbx-cli.js'
import type { LineChild, SbxServer } from '../support/sbx-cli.js'

/*
 * The lean Redis path of a fleet (docs/redis-path.md): `sbx api` + `sbx worker` on a redis-server of
 * the test's own, so `INFO commandstats` counts only their traffic. A warm routed command subscribes to
 * nothing (one pattern subscription per API process carries every job's result and output), reads the
 * job no more than its idempotency lookup needs (the wait that follows reads nothing), reads no BullMQ
 * event stream, and indexes it without MULTI; results, streamed output and idempotent resubmissions
 * still arrive.
 */

interface JobBody {
  id?: string
  state?: string
  result?: { stdout: string }
}

const delta = (a: Map<string, number>, b: Map<string, number>, name: string): number =>
  (b.get(name) ?? 0) - (a.get(name) ?? 0)

const total = (m: Map<string, number>): number => [...m.values()].reduce((a, v) => a + v, 0)

describe.each(['bullmq', 'redis'] as const)(
  'fleet (queue driver %s): the Redis path of a routed command',
  (driver) => {
    const prefix = uniqueName('rpath')
    let redis: RedisServer
    let api: SbxServer
    let worker: LineChild

    const exec = async (command: string, key?: string): Promise<JobBody> => {
      const res = await api.post(
        '/v1/exec',
        { provider: 'docker', profile: 'default', sessionId: 'warm', command },
        key === undefined ? {} : { headers: { 'idempotency-key': key } },
      )
      const body = (await res.json()) as JobBody
      expect(res.status, JSON.stringify(body)).toBe(200)
      return body
    }

    beforeAll(async () => {
      redis = await RedisServer.start()
      const config = fleetConfig(prefix, { queue: { driver, redisUrl: redis.url, prefix } } as never)
      api = await startSbxServer('api', { config })
      worker = await startSbxWorker({ config })
      // The session's sandbox is bound, and the API's result paths are open.
      expect((await exec('true')).state).toBe('completed')
    }, 180_000)

    afterAll(async () => {
      await api?.fetch('/v1/sessions/warm', { method: 'DELETE' }).catch(() => undefined)
      await worker?.stop()
      await api?.stop()
      await redis?.destroy()
      await removeScopeContainers(prefix)
    }, 60_000)

    test('warm commands: no SUBSCRIBE/UNSUBSCRIBE, no MULTI, bounded job reads; results intact', async () => {
      const n = 10
      const before = await commandCalls(redis.port)
      for (let i = 0; i < n; i++) {
        const job = await exec(`echo hi-${i}`)
        expect(job.state).toBe('completed')
        expect(job.result?.stdout).toBe(`hi-${i}\n`)
      }
      const after = await commandCalls(redis.port)
      expect(delta(before, after, 'subscribe')).toBe(0)
      expect(delta(before, after, 'unsubscribe')).toBe(0)
      expect(delta(before, after, 'psubscribe')).toBe(0)
      expect(delta(before, after, 'multi')).toBe(0)
      // The idempotency lookup and BullMQ's moveToActive read the job hash; the wait of a job its API
      // process just added reads nothing (its listener was in place before the job existed).
      expect(delta(before, after, 'hgetall')).toBeLessThanOrEqual(2 * n + 2)
      // No BullMQ event-stream reader: results (a gave-up job's too) come on the job channel.
      expect(delta(before, after, 'xread')).toBe(0)
      expect(after.get('psubscribe')).toBe(1)
      if (driver === 'redis') {
        // The job lifecycle of our own: one script each for add (with the idempotency lookup and the
        // session record), take and finish (with the last chunk, held up to 2 ms for it): 37 commands
        // per command, 43 when the chunk went on its own (docs/redis-path.md); no BullMQ stream or
        // marker.
        const commands = total(after) - total(before)
        expect(commands / n).toBeLessThanOrEqual(46)
        expect(delta(before, after, 'xadd')).toBe(0)
        expect(delta(before, after, 'bzpopmin')).toBe(0)
      }
    }, 120_000)

    test('a resubmission with the same Idempotency-Key answers the finished job without running it again', async () => {
      const key = uniqueName('idem')
      const first = await exec('echo once >> runs.txt; wc -l < runs.txt', key)
      expect(first.state).toBe('completed')
      const again = await exec('echo once >> runs.txt; wc -l < runs.txt', key)
      expect(again.id).toBe(first.id)
      expect(again.result?.stdout).toBe(first.result?.stdout)
      expect((await exec('wc -l < runs.txt')).result?.stdout.trim()).toBe(first.result?.stdout.trim())
    }, 60_000)

    test('streamed output still reaches the caller over the pattern subscription', async () => {
      const res = await api.post('/v1/exec?wait=false', {
        provider: 'docker',
        profile: 'default',
        sessionId: 'warm',
        command: 'echo streamed',
      })
      expect(res.status).toBe(202)
      const { id } = (await res.json()) as JobBody
      const events = await api.fetch(`/v1/jobs/${id}/events`)
      const text = await events.text()
      expect(text).toContain('streamed')
      expect(text).toContain('event: result')
    }, 60_000)
  },
)
