import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { startFakeDaytona } from '../fakes/daytona/index.js'
import type { FakeDaytona } from '../fakes/daytona/index.js'
import { openEventStream } from '../support/job-stream.js'
import type { EventStream, SseEvent } from '../support/job-stream.js'
import { removeScope, startSbxServer, uniqueName } from '../support/sbx-cli.js'
import type { SbxServer } from '../support/sbx-cli.js'

/**
 * Circuit transitions on the service's lifecycle stream (`GET /v1/events` of `sbx serve`): the Daytona
 * fake answers 429, a failover policy opens its circuit (CIRCUIT_OPEN with the provider and the
 * reason), the cool-down ends and a probe goes through (CIRCUIT_HALF_OPEN), the probe succeeds
 * (CIRCUIT_CLOSED) — each once, in order; a reader that resumes with Last-Event-ID gets only later ones.
 */
const scope = uniqueName('circuit-events')
const COOLDOWN_MS = 1_500

let daytona: FakeDaytona
let server: SbxServer
let stream: EventStream | undefined

interface Lifecycle {
  type: string
  runtime: string
  message?: string
  attributes: {
    provider: string
    from: string
    to: string
    failures: number
    reason: string
    openUntil?: number
  }
}
const parse = (e: SseEvent): Lifecycle => JSON.parse(e.data) as Lifecycle

beforeAll(async () => {
  daytona = await startFakeDaytona()
  server = await startSbxServer('serve', {
    config: {
      queue: { prefix: scope },
      profiles: { dt: { provider: 'daytona', snapshot: 'sbx-test', defaultTimeoutMs: 20_000 } },
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
      },
    },
    env: { DAYTONA_API_KEY: daytona.apiKey, DAYTONA_API_URL: daytona.apiUrl },
  })
}, 180_000)

afterAll(async () => {
  stream?.close()
  await server?.stop()
  await removeScope(scope)
  await daytona?.close()
}, 120_000)

const exec = async (body: Record<string, unknown>) => {
  const r = await server.post('/v1/exec', { provider: 'burst', profile: 'auto', ...body })
  return (await r.json()) as { state: string; result?: { route?: { providerId: string } } }
}

describe('circuit events on the lifecycle stream of sbx serve', () => {
  test('open, half-open and closed are streamed once each, with provider and reason', async () => {
    stream = await openEventStream(server, '/v1/events')
    daytona.faults.rateLimitCreates(1_000, 1)
    for (const s of ['a', 'b', 'c']) {
      const j = await exec({ sessionId: s, command: 'echo ok' })
      expect(j.state).toBe('completed')
      expect(j.result?.route?.providerId).toBe('docker')
    }
    const open = parse(await stream.next((e) => parse(e).type === 'CIRCUIT_OPEN'))
    expect(open).toMatchObject({
      runtime: 'router',
      message: 'daytona',
      attributes: { provider: 'daytona', from: 'closed', to: 'open', failures: 2 },
    })
    expect(open.attributes.reason).toMatch(/^2 consecutive failed create\(s\); last: .*429/)
    expect(open.attributes.openUntil).toBeGreaterThan(Date.now() - COOLDOWN_MS)

    // Daytona recovers; after the cool-down (a deadline the event states) the next new session probes it and closes the circuit.
    daytona.faults.rateLimitCreates(0)
    const openUntil = open.attributes.openUntil ?? 0
    await new Promise((r) => setTimeout(r, Math.max(0, openUntil - Date.now() + 50)))
    const probe = await exec({ sessionId: 'd', command: 'echo back' })
    expect(probe.result?.route?.providerId).toBe('daytona')
    await stream.next((e) => parse(e).type === 'CIRCUIT_CLOSED')
    const seen = stream.events.map(parse)
    expect(seen.map((e) => `${e.type} ${e.attributes.from}→${e.attributes.to}`)).toEqual([
      'CIRCUIT_OPEN closed→open',
      'CIRCUIT_HALF_OPEN open→half-open',
      'CIRCUIT_CLOSED half-open→closed',
    ])
    expect(seen[1]?.attributes.reason).toBe(
      `cool-down of ${COOLDOWN_MS} ms over: one probe may try the provider`,
    )
    expect(seen[2]?.attributes.reason).toBe('a create succeeded')

    // A reader resuming after the opening gets the two later events only.
    const resumed = await openEventStream(server, '/v1/events', undefined, {
      lastEventId: stream.events[0]?.id ?? '',
    })
    await resumed.next((e) => parse(e).type === 'CIRCUIT_CLOSED')
    expect(resumed.events.map((e) => parse(e).type)).toEqual(['CIRCUIT_HALF_OPEN', 'CIRCUIT_CLOSED'])
    resumed.close()
  }, 180_000)

  test('a Last-Event-ID that is not an event id is refused with the reason', async () => {
    const r = await server.fetch('/v1/events', { headers: { 'last-event-id': 'yesterday' } })
    expect(r.status).toBe(400)
    expect(await r.text()).toMatch(/Last-Event-ID must be the id of an event of this stream/)
  })
})
