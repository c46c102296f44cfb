import { afterEach, expect, test } from 'vitest'
import type { JobEvent } from '../../../src/services/index.js'
import { resultOfOutcome } from '../../../src/queue/index.js'
import type { JobProcessor, JobQueue, LoggedChunk } from '../../../src/queue/index.js'
import type { QueueRouteExecutor } from '../../../src/routing/queue-route-executor.js'
import { QueueExecService } from '../../../src/services/exec-service.js'
import type { SessionDirectory } from '../../../src/services/session-directory.js'
import { bullmqUnderTest, makeJob } from '../../support/queue-drivers.js'
import type { QueueUnderTest } from '../../support/queue-drivers.js'
import { completedResult } from '../../support/scripted-processor.js'

let q: QueueUnderTest | undefined
afterEach(async () => {
  await q?.cleanup()
  q = undefined
})

/** A gate a test opens once. */
function gate(): { wait: Promise<void>; open: () => void } {
  let open = (): void => undefined
  const wait = new Promise<void>((r) => (open = r))
  return { wait, open }
}

test('a live chunk whose message was lost (a subscription not yet active again) is read from the log, never reported missed', async () => {
  q = await bullmqUnderTest()
  const start = gate()
  const finish = gate()
  const processor: JobProcessor = async (job, ctx) => {
    const early = resultOfOutcome(await ctx.fence.begin({ sandboxId: 'sb-test' }))
    if (early) return early
    await start.wait
    ctx.publish({ stream: 'stdout', data: 'begun\n' })
    ctx.publish({ stream: 'stdout', data: 'next\n' })
    await finish.wait
    return completedResult(ctx, 'begun\nnext\n')
  }
  await q.queue.consume(processor, { concurrency: 1, workerId: 'w1' })
  // The API process's view of the queue loses the first live message, as a pub/sub connection does
  // while it resubscribes after a Redis restart. Everything else is the real queue on real Redis.
  const real = q.queue
  let dropped = false
  const lossy: JobQueue = Object.assign(Object.create(real) as JobQueue, {
    subscribeOutput: (id: string, listener: (c: LoggedChunk) => void) =>
      real.subscribeOutput(id, (c) => {
        if (!dropped) {
          dropped = true
          return
        }
        listener(c)
      }),
  })
  const service = new QueueExecService(lossy, {} as QueueRouteExecutor, {} as SessionDirectory)
  const job = makeJob('echo begun; echo next')
  await real.submit(job)
  const abort = new AbortController()
  const events = await service.events(job.tenant, job.jobId, abort.signal)
  if (!events) throw new Error('the job was not found')
  start.open()
  const got: JobEvent[] = []
  for await (const e of events) {
    got.push(e)
    if (got.length === 2) finish.open()
  }
  expect(dropped).toBe(true)
  expect(got.map((e) => [e.type, 'data' in e ? e.data : undefined])).toEqual([
    ['stdout', 'begun\n'],
    ['stdout', 'next\n'],
    ['result', undefined],
  ])
})
