import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import type { LineChild } from '../support/redis-child.js'
import { openEventStream } from '../support/job-stream.js'
import {
  fleetConfig,
  removeScope,
  runSbx,
  startSbxServer,
  startSbxWorker,
  uniqueName,
  configDir,
} from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * Routing policies through the fleet as deployed (`sbx api` + `sbx worker`, Redis): a policy
 * `burst` fails over from the Daytona fake to Docker when Daytona answers 429, its circuit opens
 * (shared through Redis, shown by GET /v1/providers) and closes again after a successful probe; a
 * session stays pinned to the candidate that first served it; a tenant limited to the policy cannot
 * name a provider directly.
 */
const scope = uniqueName('policy')
const ADMIN = `sbx_admin_${scope.replace(/-/g, '')}`
const ACME = `sbx_acme_${scope.replace(/-/g, '')}`
const COOLDOWN_MS = 2_000

let daytona: FakeDaytona
let api: SbxServer
let worker: LineChild

interface Job {
  state: string
  result?: {
    stdout: string
    exitCode: number
    route?: {
      policy: string
      providerId: string
      profile: string
      pinned: boolean
      skipped: { providerId: string; reason: string }[]
    }
  }
  error?: { code: string; message: string }
}

beforeAll(async () => {
  daytona = await startFakeDaytona()
  const config = fleetConfig(scope, {
    profiles: { dt: { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 } },
    apiKeys: [
      { key: ADMIN, tenant: 'default', admin: true },
      { key: ACME, tenant: 'acme' },
    ],
    routing: {
      policies: {
        burst: {
          mode: 'failover',
          candidates: [
            { provider: 'daytona', profile: 'dt' },
            { provider: 'docker', profile: 'default' },
          ],
        },
      },
      circuit: { failureThreshold: 2, cooldownMs: COOLDOWN_MS },
      tenants: { acme: { allow: ['burst'] } },
    },
  })
  const env = { SBX_API_KEY: ADMIN, DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl }
  const cwd = configDir(config)
  api = await startSbxServer('api', { config, cwd, env })
  worker = await startSbxWorker({ config, cwd, env })
}, 180_000)

afterAll(async () => {
  await worker?.stop()
  await api?.stop()
  await removeScope(scope)
  await daytona?.close()
}, 120_000)

const exec = async (body: Record<string, unknown>, key = ADMIN): Promise<{ status: number; job: Job }> => {
  const r = await api.post('/v1/exec', { provider: 'burst', profile: 'auto', ...body }, { key })
  return { status: r.status, job: (await r.json()) as Job }
}

const circuitOf = async (id: string): Promise<{ state: string; failures: number }> => {
  const r = (await (await api.fetch('/v1/providers')).json()) as {
    providers: { id: string; circuit: { state: string; failures: number } }[]
  }
  const p = r.providers.find((x) => x.id === id)
  if (!p) throw new Error(`no provider ${id}`)
  return p.circuit
}

describe('a failover policy over the Daytona fake and Docker', () => {
  test('sessions land on the first healthy candidate, fail over on 429, stay pinned, and the circuit opens and closes', async () => {
    // Healthy: the first candidate takes a new session.
    const first = await exec({ sessionId: 's1', command: 'echo kept > pinned.txt; echo ok' })
    expect(first.job.state).toBe('completed')
    expect(first.job.result?.route).toMatchObject({ policy: 'burst', providerId: 'daytona', pinned: false })

    // Daytona refuses creates: new sessions and ephemeral calls fail over to Docker, saying why.
    daytona.faults.rateLimitCreates(1_000, 1)
    const second = await exec({ sessionId: 's2', command: 'echo two' })
    expect(second.job.state).toBe('completed')
    expect(second.job.result?.stdout).toBe('two\n')
    expect(second.job.result?.route?.providerId).toBe('docker')
    expect(second.job.result?.route?.skipped[0]).toMatchObject({ providerId: 'daytona' })
    expect(second.job.result?.route?.skipped[0]?.reason).toMatch(/429/)
    const ephemeral = await exec({ command: 'echo e' })
    expect(ephemeral.job.result?.route?.providerId).toBe('docker')

    // Two failed creates opened Daytona's circuit: the next new session does not even try it.
    expect(await circuitOf('daytona')).toMatchObject({ state: 'open' })
    const third = await exec({ sessionId: 's3', command: 'echo three' })
    expect(third.job.result?.route?.providerId).toBe('docker')
    expect(third.job.result?.route?.skipped[0]?.reason).toMatch(/circuit open after \d+ failed create/)

    // The pinned session stays where its files are (its sandbox exists: no create needed).
    const again = await exec({ sessionId: 's1', command: 'cat pinned.txt' })
    expect(again.job.result?.stdout).toBe('kept\n')
    expect(again.job.result?.route).toMatchObject({ providerId: 'daytona', pinned: true })
    // ... and so does the session that failed over.
    const s2 = await exec({ sessionId: 's2', command: 'echo still' })
    expect(s2.job.result?.route).toMatchObject({ providerId: 'docker', pinned: true })

    // After the cool-down the circuit is half-open; Daytona is healthy again; one probe closes it.
    daytona.faults.rateLimitCreates(0)
    for (let state = ''; state !== 'half-open';) {
      state = (await circuitOf('daytona')).state
      if (state !== 'half-open') await new Promise((r) => setTimeout(r, 100))
    }
    const probe = await exec({ sessionId: 's4', command: 'echo back' })
    expect(probe.job.result?.route?.providerId).toBe('daytona')
    expect(await circuitOf('daytona')).toMatchObject({ state: 'closed', failures: 0 })

    // The worker made the transitions; the API streams them from Redis, each once (GET /v1/events).
    const events = await openEventStream(api, '/v1/events')
    await events.next((e) => e.data.includes('CIRCUIT_CLOSED'))
    events.close()
    const seen = events.events.map(
      (e) => JSON.parse(e.data) as { type: string; attributes: { provider: string; reason: string } },
    )
    expect(seen.map((e) => `${e.type} ${e.attributes.provider}`)).toEqual([
      'CIRCUIT_OPEN daytona',
      'CIRCUIT_HALF_OPEN daytona',
      'CIRCUIT_CLOSED daytona',
    ])
    expect(seen[0]?.attributes.reason).toMatch(/429/)
  }, 180_000)

  test('a pinned session whose provider fails gets a clear error and never moves silently', async () => {
    const s = await exec({ sessionId: 'p1', command: 'echo here' })
    expect(s.job.result?.route?.providerId).toBe('daytona')
    const sandboxId = daytona.sandboxes().find((x) => x.state === 'started')?.id
    expect(sandboxId).toBeDefined()
    // Its sandbox vanishes and Daytona refuses creates: the session may not silently move to Docker.
    for (const x of daytona.sandboxes()) if (x.state === 'started') await daytona.faults.vanish(x.id)
    daytona.faults.rateLimitCreates(1_000, 1)
    const lost = await exec({ sessionId: 'p1', command: 'echo where' })
    expect(lost.job.state).toBe('failed')
    const next = await exec({ sessionId: 'p1', command: 'echo where' })
    expect(next.job.state).toBe('failed')
    expect(next.job.error?.message).toMatch(
      /pinned by routing policy 'burst' to daytona\/dt, where its files live; it does not move/,
    )
    daytona.faults.rateLimitCreates(0)
  }, 180_000)

  test('a tenant limited to the policy cannot name a provider; GET /v1/providers lists the policy', async () => {
    const direct = await api.post(
      '/v1/exec',
      { provider: 'docker', profile: 'default', command: 'true' },
      { key: ACME },
    )
    expect(direct.status).toBe(403)
    const body = (await direct.json()) as { error: { code: string; message: string } }
    expect(body.error.code).toBe('FORBIDDEN')
    expect(body.error.message).toContain('routing.tenants.acme.allow')
    const viaPolicy = await exec({ command: 'echo acme' }, ACME)
    expect(viaPolicy.job.state).toBe('completed')
    const providers = (await (await api.fetch('/v1/providers')).json()) as { policies: unknown[] }
    expect(providers.policies).toEqual([
      {
        name: 'burst',
        mode: 'failover',
        candidates: [
          { provider: 'daytona', profile: 'dt', weight: 1 },
          { provider: 'docker', profile: 'default', weight: 1 },
        ],
      },
    ])
  }, 120_000)
})

describe('a policy that names an unknown provider', () => {
  test('sbx serve refuses to start and says which candidate is wrong', async () => {
    const prefix = uniqueName('policybad')
    const cwd = configDir({
      queue: { prefix },
      routing: { policies: { p: { candidates: [{ provider: 'nope', profile: 'default' }] } } },
    })
    const r = await runSbx(['serve', '--port', '0'], { cwd, env: { SBX_API_KEY: ADMIN } })
    expect(r.code).not.toBe(0)
    expect(r.stderr).toMatch(
      /routing\.policies\.p\.candidates\[0\] \(nope\/default\): unknown sandbox provider 'nope'/,
    )
  }, 60_000)
})
