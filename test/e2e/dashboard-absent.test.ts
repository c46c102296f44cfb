import { afterAll, describe, expect, test } from 'vitest'
import { fleetConfig, removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * The queue dashboard shows BullMQ queues, so only a fleet on `queue.driver: bullmq` mounts it
 * (test/e2e/offline-pages.test.ts, test/e2e/admin.test.ts). Elsewhere `/admin/queues` says why it is
 * absent and where jobs are seen instead, rather than a bare 404.
 */
const scope = uniqueName('nodash')
const servers: SbxServer[] = []

afterAll(async () => {
  await Promise.all(servers.map((s) => s.stop()))
  await removeScope(scope)
})

describe('no queue dashboard without BullMQ', () => {
  test.each([
    [
      'sbx api on the default redis driver',
      () => startSbxServer('api', { config: fleetConfig(scope, { queue: { driver: 'redis' } }) }),
    ],
    [
      'sbx serve (embedded)',
      () => startSbxServer('serve', { config: { providers: { docker: { enabled: false } } } }),
    ],
  ])('%s: /admin/queues answers 501 naming queue.driver: bullmq', async (_name, start) => {
    const server = await start()
    servers.push(server)
    for (const path of ['/admin/queues', '/admin/queues/api/queues']) {
      const res = await server.fetch(path)
      expect(res.status, path).toBe(501)
      const body = (await res.json()) as { error: { code: string; message: string } }
      expect(body.error.code).toBe('UNSUPPORTED')
      expect(body.error.message).toContain('queue.driver: bullmq')
      expect(body.error.message).toContain('GET /v1/jobs')
    }
  })
})
