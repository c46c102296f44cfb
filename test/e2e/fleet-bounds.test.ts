import { afterAll, describe, expect, test } from 'vitest'
import {
  fleetConfig,
  scopeContainers,
  startSbxServer,
  startSbxWorker,
  uniqueName,
  removeScope,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/*
 * F2: what bounds a fleet. `sbx api` + `sbx worker` on the shared Redis. The tenant quota
 * (`quotas.maxSandboxes`) governs; a profile cap (`profiles.<p>.pool.maxSize`) applies only when set;
 * reaching either is a fast 429 QUOTA_EXCEEDED naming the config key and what frees room.
 */

interface ExecAnswer {
  status: number
  ms: number
  retryAfter: string | null
  body: {
    state?: string
    result?: { stdout: string; sandboxId: string }
    error?: { code: string; message: string }
  }
}

async function exec(
  api: SbxServer,
  sessionId: string,
  profile = 'default',
  key?: string,
): Promise<ExecAnswer> {
  const t0 = Date.now()
  const res = await api.post(
    '/v1/exec',
    { provider: 'docker', profile, sessionId, command: 'echo ok' },
    key === undefined ? {} : { key },
  )
  return {
    status: res.status,
    ms: Date.now() - t0,
    retryAfter: res.headers.get('retry-after'),
    body: (await res.json()) as ExecAnswer['body'],
  }
}

function expectCompleted(a: ExecAnswer): void {
  expect(a.status, JSON.stringify(a.body)).toBe(200)
  expect(a.body.state, JSON.stringify(a.body)).toBe('completed')
  expect(a.body.result?.stdout).toBe('ok\n')
}

/** A 429 QUOTA_EXCEEDED answered fast (no acquire wait), with Retry-After and the advice. */
function expectRefused(a: ExecAnswer, configKey: string): void {
  expect(a.status, JSON.stringify(a.body)).toBe(429)
  expect(a.body.error?.code).toBe('QUOTA_EXCEEDED')
  expect(a.body.error?.message).toContain(configKey)
  expect(a.body.error?.message).toContain('DELETE /v1/sessions/<id>')
  expect(a.body.error?.message).not.toMatch(/acquire timeout/i)
  expect(a.retryAfter).not.toBeNull()
  expect(a.ms).toBeLessThan(3_000)
}

describe('fleet bounds through sbx api + sbx worker', () => {
  const started: { stop(): Promise<void> }[] = []
  const scopes: string[] = []
  afterAll(async () => {
    for (const s of started.reverse()) await s.stop()
    for (const scope of scopes) await removeScope(scope)
  })

  async function fleet(
    tag: string,
    extra: Parameters<typeof fleetConfig>[1],
    env?: Record<string, string>,
  ): Promise<SbxServer> {
    const prefix = uniqueName(tag)
    scopes.push(prefix)
    const config = fleetConfig(prefix, extra)
    const api = await startSbxServer('api', { config, ...(env ? { env } : {}) })
    started.push(api)
    started.push(await startSbxWorker({ config }))
    return api
  }

  /** Two `sbx api` replicas of one fleet with `quotas` (and a `sbx worker` when asked). */
  async function twoReplicas(
    tag: string,
    quotas: NonNullable<Parameters<typeof fleetConfig>[1]>['quotas'],
    opts: { worker?: boolean } = {},
  ): Promise<[SbxServer, SbxServer]> {
    const prefix = uniqueName(tag)
    scopes.push(prefix)
    const config = fleetConfig(prefix, { quotas })
    const api1 = await startSbxServer('api', { config })
    started.push(api1)
    const api2 = await startSbxServer('api', { config })
    started.push(api2)
    if (opts.worker) started.push(await startSbxWorker({ config }))
    return [api1, api2]
  }

  test('a profile cap and the tenant quota refuse at once with the right advice; deleting a session frees room', async () => {
    const api = await fleet('bnds', {
      quotas: { maxSandboxes: 3, requestsPerSecond: 1000, maxConcurrentJobs: 64 },
      profiles: { capped: { provider: 'docker', pool: { maxSize: 2 } } },
    })
    expectCompleted(await exec(api, 'c1', 'capped'))
    expectCompleted(await exec(api, 'c2', 'capped'))
    // The profile's cap (2), not the tenant's quota (3), is what is full.
    expectRefused(await exec(api, 'c3', 'capped'), 'profiles.capped.pool.maxSize = 2')
    expectCompleted(await exec(api, 'd1'))
    // Now the tenant holds 3 of 3.
    const overQuota = await exec(api, 'd2')
    expectRefused(overQuota, 'quotas.maxSandboxes = 3')
    // A refused command created no session record and ran nowhere.
    const listed = (await (await api.fetch('/v1/sessions')).json()) as { sessions: { id: string }[] }
    expect(listed.sessions.map((s) => s.id).sort()).toEqual(['c1', 'c2', 'd1'])
    // Creating a session that could not get a sandbox is refused the same way, at once.
    const t0 = Date.now()
    const created = await api.post('/v1/sessions', { id: 'f1', provider: 'docker', profile: 'default' })
    expect(created.status).toBe(429)
    expect(((await created.json()) as { error: { message: string } }).error.message).toContain(
      'quotas.maxSandboxes',
    )
    expect(Date.now() - t0).toBeLessThan(3_000)
    // Bound sessions keep working at the bound.
    expectCompleted(await exec(api, 'c1', 'capped'))
    // Deleting a session frees its room, for the tenant and for the profile.
    expect((await api.fetch('/v1/sessions/c1', { method: 'DELETE' })).status).toBe(200)
    expectCompleted(await exec(api, 'c3', 'capped'))
    expect((await api.fetch('/v1/sessions/c2', { method: 'DELETE' })).status).toBe(200)
    expectCompleted(await exec(api, 'd2'))
  }, 180_000)

  test('an engine cap (providers.docker.maxSandboxes) holds across profiles and tenants', async () => {
    const keyA = `sbx_test_a_${uniqueName('k')}`
    const keyB = `sbx_test_b_${uniqueName('k')}`
    const api = await fleet(
      'bnde',
      {
        providers: { docker: { enabled: true, maxSandboxes: 2 } },
        quotas: { maxSandboxes: 10, requestsPerSecond: 1000, maxConcurrentJobs: 64 },
        profiles: { other: { provider: 'docker' } },
        apiKeys: [
          { key: keyA, tenant: 'ta' },
          { key: keyB, tenant: 'tb' },
        ],
      },
      { SBX_API_KEY: keyA },
    )
    expectCompleted(await exec(api, 'a1'))
    expectCompleted(await exec(api, 'b1', 'other', keyB))
    // Each tenant is far below its quota of 10, and each profile is unbounded: the engine is full.
    expectRefused(await exec(api, 'a2', 'other'), 'providers.docker.maxSandboxes = 2')
    expectRefused(await exec(api, 'b2', 'default', keyB), 'providers.docker.maxSandboxes = 2')
    expect((await api.fetch('/v1/sessions/b1', { method: 'DELETE', key: keyB })).status).toBe(200)
    expectCompleted(await exec(api, 'a2', 'other'))
  }, 180_000)

  test('quotas.maxSandboxes above the old hidden cap of 32 really allows that many sessions', async () => {
    const n = 33
    const api = await fleet('bndn', {
      quotas: { maxSandboxes: n, requestsPerSecond: 1000, maxConcurrentJobs: 64 },
    })
    const answers = await Promise.all(Array.from({ length: n }, (_, i) => exec(api, `s${i}`)))
    for (const a of answers) expectCompleted(a)
    expect(new Set(answers.map((a) => a.body.result?.sandboxId)).size).toBe(n)
    expect((await scopeContainers(scopes.at(-1) ?? '')).length).toBe(n)
    expectRefused(await exec(api, 'one-more'), `quotas.maxSandboxes = ${n}`)
  }, 240_000)

  test('quotas.maxConcurrentJobs holds across two sbx api replicas (the redis driver counts for the fleet)', async () => {
    const [api1, api2] = await twoReplicas(
      'bndj',
      { maxSandboxes: 8, requestsPerSecond: 1000, maxConcurrentJobs: 2 },
      { worker: true },
    )
    const submit = (api: SbxServer, command: string) =>
      api.post('/v1/exec?wait=false', { provider: 'docker', profile: 'default', command })
    // Two jobs that run until cancelled, one through each replica: the tenant's cap (2) is full.
    const ids: string[] = []
    for (const api of [api1, api2]) {
      const r = await submit(api, 'sleep 120')
      expect(r.status, await r.clone().text()).toBe(202)
      ids.push(((await r.json()) as { id: string }).id)
    }
    // A third through either replica is refused at once, naming the quota; nothing was queued.
    for (const api of [api1, api2]) {
      const t0 = Date.now()
      const refused = await submit(api, 'echo over')
      expect(refused.status).toBe(429)
      expect(refused.headers.get('retry-after')).not.toBeNull()
      const body = (await refused.json()) as ExecAnswer['body']
      expect(body.error?.code).toBe('QUOTA_EXCEEDED')
      expect(body.error?.message).toContain('2 jobs queued or running (quota 2)')
      expect(body.error?.message).toContain('quotas.maxConcurrentJobs')
      expect(Date.now() - t0).toBeLessThan(3_000)
    }
    const listed = (await (await api1.fetch('/v1/jobs')).json()) as { jobs: { id: string }[] }
    expect(listed.jobs.map((j) => j.id).sort()).toEqual([...ids].sort())
    // Cancelling one (through the other replica) frees its slot once it has ended.
    expect((await api2.fetch(`/v1/jobs/${ids[0]}`, { method: 'DELETE' })).status).toBeLessThan(300)
    const ended = await api2.fetch(`/v1/jobs/${ids[0]}/events`)
    expect(await ended.text()).toContain('event: result')
    const again = await api1.post('/v1/exec', { provider: 'docker', profile: 'default', command: 'echo ok' })
    expect(again.status, await again.clone().text()).toBe(200)
    expect(((await again.json()) as ExecAnswer['body']).state).toBe('completed')
    await api1.fetch(`/v1/jobs/${ids[1]}`, { method: 'DELETE' })
  }, 180_000)

  test('quotas.requestsPerSecond holds across two sbx api replicas: one bucket per tenant in Redis', async () => {
    const [api1, api2] = await twoReplicas('bndr', {
      maxSandboxes: 8,
      requestsPerSecond: 5,
      maxConcurrentJobs: 64,
    })
    // 40 requests at once, half through each replica: the tenant's bucket holds a burst of 10 (2 × 5).
    // Counted per process, each replica would pass 10 of its own.
    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) => (i % 2 ? api1 : api2).fetch('/v1/sessions')),
    )
    const passed = answers.filter((r) => r.status === 200).length
    const limited = answers.filter((r) => r.status === 429)
    console.log(`[fleet-bounds] 40 requests through two replicas at 5/s (burst 10): ${passed} passed`)
    expect(passed).toBeGreaterThanOrEqual(10)
    expect(passed).toBeLessThanOrEqual(12)
    expect(limited.length).toBe(40 - passed)
    expect(limited[0]?.headers.get('retry-after')).toMatch(/^\d+$/)
    const body = (await limited[0]?.json()) as ExecAnswer['body']
    expect(body.error?.code).toBe('RATE_LIMITED')
  }, 120_000)
})
