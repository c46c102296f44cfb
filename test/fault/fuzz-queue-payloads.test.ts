import fc from 'fast-check'
import { randomUUID } from 'node:crypto'
import { Queue, QueueEvents } from 'bullmq'
import { Redis } from 'ioredis'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { createDockerProvider } from '../../providers/docker/index.js'
import type { DockerProvider } from '../../providers/docker/index.js'
import { createJobQueue, ExecJobResultSchema, ExecJobSchema } from '../../src/queue/index.js'
import type { ExecJobResult, JobQueue } from '../../src/queue/index.js'
import { ProviderRegistry } from '../../src/sandbox/registry.js'
import { createSessionPool, MemorySessionStore, POOL_LABELS } from '../../src/sessions/index.js'
import type { SandboxSessionPool } from '../../src/sessions/index.js'
import { startExecWorker } from '../../src/worker/index.js'
import type { ExecWorkerHandle } from '../../src/worker/index.js'
import { makeJob } from '../support/queue-drivers.js'
import { deleteKeys, REDIS_URL } from '../support/redis.js'
import { hostileJson, hostileLeaf, hostileString, shapedLike } from '../support/hostile-input.js'

/*
 * Job payloads from a foreign producer, put straight onto the BullMQ queue `sbx-exec` that a real
 * worker (the project's queue + worker code, real session pool and Docker provider) consumes: each
 * ends `failed`, runs no command, and the worker still runs a valid job afterwards.
 */

const QUEUE = 'sbx-exec'
const prefix = `sbxfuzz-${randomUUID().slice(0, 8)}`
const scope = `fz-${randomUUID().slice(0, 8)}`

let docker: DockerProvider
let pool: SandboxSessionPool
let queue: JobQueue
let worker: ExecWorkerHandle
let foreign: Queue
let events: QueueEvents
let redis: Redis
/** Jobs whose processor ran (the payload parsed), and commands handed to a sandbox. */
const started: string[] = []

beforeAll(async () => {
  docker = createDockerProvider({ instanceId: scope })
  const registry = new ProviderRegistry()
    .register(docker)
    .addProfiles({ default: { provider: 'docker', pool: { minIdle: 0, maxSize: 2 } } })
  pool = createSessionPool({
    providers: registry,
    store: new MemorySessionStore(),
    scope,
    maintenanceIntervalMs: 0,
    reapIntervalMs: 0,
  })
  queue = await createJobQueue({ driver: 'bullmq', redisUrl: REDIS_URL, prefix, queueName: QUEUE })
  worker = await startExecWorker({
    queue,
    pool,
    concurrency: 8,
    workerId: `fuzz-${scope}`,
    onJob: (e) => void (e.type === 'start' && started.push(e.job.jobId)),
  })
  redis = new Redis(REDIS_URL, { maxRetriesPerRequest: null })
  foreign = new Queue(QUEUE, { connection: redis, prefix })
  events = new QueueEvents(QUEUE, { connection: { url: REDIS_URL }, prefix })
  await events.waitUntilReady()
}, 60_000)

afterAll(async () => {
  await worker?.close({ deadlineMs: 5_000 })
  await events?.close()
  await foreign?.close()
  redis?.disconnect()
  await queue?.close()
  await pool?.shutdown({ destroyIdle: true })
  const left = await docker.docker.listContainers({
    all: true,
    filters: { label: [`${POOL_LABELS.scope}=${scope}`] },
  })
  for (const c of left) await docker.destroy({ providerId: 'docker', id: c.Id, profile: '' })
  await docker?.close()
  await deleteKeys(`${prefix}:*`)
}, 60_000)

/** Adds `data` as a foreign producer would and waits for BullMQ to finish the job. */
async function addForeign(name: string, data: unknown): Promise<{ id: string; result: unknown }> {
  const job = await foreign.add(name, data, { removeOnComplete: false, removeOnFail: false, attempts: 1 })
  const result: unknown = await job.waitUntilFinished(events, 20_000)
  return { id: job.id ?? '', result }
}

/** ExecJob-shaped objects with hostile leaves and unknown keys. */
const execShaped = shapedLike({
  jobId: hostileLeaf,
  tenant: hostileLeaf,
  sessionId: hostileLeaf,
  providerId: fc.constantFrom('docker', 'nope', ''),
  profile: fc.constantFrom('default', 'nope'),
  command: fc.constantFrom('touch /tmp/pwned', 'echo pwned'),
  cwd: hostileLeaf,
  env: fc.oneof(hostileJson(['PATH']), fc.constant({ __proto__: null, A: 1 })),
  stdin: hostileLeaf,
  timeoutMs: hostileLeaf,
  outputCapBytes: hostileLeaf,
  idempotent: hostileLeaf,
  callId: hostileLeaf,
  toolName: hostileLeaf,
  submittedAt: hostileLeaf,
})

describe('fuzzing job payloads from a foreign producer (BullMQ, real worker)', () => {
  test('malformed payloads end failed with BAD_REQUEST and run nothing', async () => {
    const payload = fc.oneof(
      execShaped,
      // A valid job with exactly one leaf broken.
      fc
        .tuple(fc.constantFrom(...Object.keys(ExecJobSchema.shape)), hostileJson())
        .map(([k, v]) => ({ ...makeJob('echo pwned'), [k]: v })),
      hostileJson(['jobId', 'command', 'providerId']),
    )
    await fc.assert(
      fc.asyncProperty(payload, hostileString(100), async (data, name) => {
        fc.pre(!ExecJobSchema.safeParse(data).success)
        const { result } = await addForeign(name, data)
        const parsed = ExecJobResultSchema.parse(result)
        expect(parsed).toMatchObject({ status: 'failed', code: 'BAD_REQUEST', retryable: false })
      }),
      { numRuns: 250, endOnFailure: true },
    )
    expect(started).toEqual([])
  }, 60_000)

  test('well-formed payloads naming unknown providers or profiles end failed and run nothing', async () => {
    const payload = fc
      .tuple(hostileString(100), hostileString(100), fc.boolean())
      .map(([provider, profile, badProvider]) =>
        makeJob(
          'touch /tmp/pwned',
          badProvider ? { providerId: `x${provider}` } : { profile: `x${profile}` },
        ),
      )
    const before = started.length
    await fc.assert(
      fc.asyncProperty(payload, async (data) => {
        const { result } = await addForeign('exec', data)
        const parsed: ExecJobResult = ExecJobResultSchema.parse(result)
        expect(parsed.status).toBe('failed')
        if (parsed.status === 'failed') expect(['UNKNOWN_PROVIDER', 'UNKNOWN_PROFILE']).toContain(parsed.code)
      }),
      { numRuns: 100, endOnFailure: true },
    )
    expect(started.length - before).toBe(100)
    const containers = await docker.docker.listContainers({
      all: true,
      filters: { label: [`${POOL_LABELS.scope}=${scope}`] },
    })
    expect(containers).toEqual([])
  }, 60_000)

  test('the worker still runs a valid job afterwards', async () => {
    const job = makeJob('echo still-alive')
    await queue.submit(job)
    const result = await queue.wait(job.jobId, { timeoutMs: 30_000 })
    expect(result).toMatchObject({ status: 'completed', result: { exitCode: 0, stdout: 'still-alive\n' } })
  }, 60_000)

  // Found by this suite: `inspect` threw a ZodError on a foreign malformed job (a 500 on GET /v1/jobs/:id).
  test('inspecting a foreign malformed job answers instead of throwing', async () => {
    const { id } = await addForeign('exec', { command: 'echo pwned' })
    const info = await queue.inspect(id)
    expect(info === undefined || info.state === 'finished').toBe(true)
  })
})
