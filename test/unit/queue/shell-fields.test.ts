import { describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { createInProcessJobQueue } from '../../../src/queue/index.js'
import { ExecJobSchema } from '../../../src/queue/schemas.js'
import { QueueRouteExecutor } from '../../../src/routing/index.js'
import type { RouteRequest } from '../../../src/routing/index.js'
import { ProfileCatalog, resolveProfile } from '../../../src/sandbox/profiles.js'
import { shellOfJob } from '../../../src/worker/exec-processor.js'

const targets = new ProfileCatalog(
  ['docker'],
  [
    resolveProfile('default', { provider: 'docker' }),
    resolveProfile('fresh', { provider: 'docker', shell: 'fresh' }),
    resolveProfile('kept', { provider: 'docker', shell: 'persistent' }),
  ],
)
const router = new QueueRouteExecutor({ queue: createInProcessJobQueue(), targets })
const route = (over: Partial<RouteRequest> = {}): RouteRequest => ({
  providerId: 'docker',
  profile: 'default',
  command: 'pwd',
  callId: 'c1',
  toolName: 'bash',
  ...over,
})
const shellFields = (r: RouteRequest) => {
  const job = router.buildJob(r)
  return { shell: job.shell, shellDefault: job.shellDefault }
}

describe('shell of a routed job', () => {
  test('the call wins, then the profile, then the surface default; nothing set is fresh', () => {
    expect(shellFields(route())).toEqual({ shell: undefined, shellDefault: undefined })
    expect(shellFields(route({ shellDefault: 'persistent' }))).toEqual({
      shell: undefined,
      shellDefault: 'persistent',
    })
    expect(shellFields(route({ profile: 'fresh', shellDefault: 'persistent' }))).toEqual({
      shell: 'fresh',
      shellDefault: undefined,
    })
    expect(shellFields(route({ profile: 'kept' }))).toEqual({ shell: 'persistent', shellDefault: undefined })
    expect(shellFields(route({ profile: 'kept', shell: 'fresh' }))).toEqual({
      shell: 'fresh',
      shellDefault: undefined,
    })
  })

  test('a job that needs no shell field has none (workers from before the field still parse it)', () => {
    const job = router.buildJob(route())
    expect('shell' in job || 'shellDefault' in job).toBe(false)
    expect(ExecJobSchema.parse(router.buildJob(route({ shellDefault: 'persistent' })))).toMatchObject({
      shellDefault: 'persistent',
    })
  })

  test('the same callId with another shell is another job', () => {
    expect(router.jobIdOf(route({ shell: 'persistent' }))).not.toBe(router.jobIdOf(route()))
  })

  test('the worker: persistent where the sandbox has it, the default falls back to fresh, an explicit ask fails clearly', () => {
    const job = router.buildJob(route({ shellDefault: 'persistent' }))
    expect(shellOfJob(job, true)).toEqual({ shell: 'persistent' })
    expect(shellOfJob(job, false)).toEqual({})
    expect(shellOfJob(job, undefined)).toEqual({})
    const explicit = router.buildJob(route({ shell: 'persistent' }))
    // A sandbox that says it has none (false) refuses the call itself, saying why.
    expect(shellOfJob(explicit, false)).toEqual({ shell: 'persistent' })
    let err: unknown
    try {
      shellOfJob(explicit, undefined)
    } catch (e) {
      err = e
    }
    expect(err).toBeInstanceOf(AppError)
    expect((err as AppError).code).toBe('BAD_REQUEST')
    expect((err as AppError).message).toMatch(/no persistent shells yet.*shell: 'fresh'/)
  })
})
