import { afterEach, describe, expect, test } from 'vitest'
import { AppError } from '../../../src/errors.js'
import { ToolCallDecision, ToolResultDecision } from '../../../src/interceptors/index.js'
import type { ToolCallInterceptor } from '../../../src/interceptors/index.js'
import { runToolCall } from '../../../src/routing/index.js'
import { droppedMarker } from '../../../src/sandbox/output-cap.js'
import type { ExecResult } from '../../../src/sandbox/types.js'
import { createWorld } from '../../support/queue-world.js'
import type { World } from '../../support/queue-world.js'

async function failure(p: Promise<unknown>): Promise<AppError> {
  const err = await p.then(
    () => new Error('expected a failure'),
    (e: unknown) => e,
  )
  if (!(err instanceof AppError)) throw err
  return err
}

describe.each(['in-process', 'bullmq', 'redis'] as const)(
  'routed execution through the %s queue',
  (driver) => {
    let world: World | undefined
    afterEach(async () => {
      const w = world
      world = undefined
      if (!w) return
      await w.close()
      expect(await w.containers()).toEqual([])
    })
    const setup = async (): Promise<World> => (world = await createWorld({ driver }))

    test('a routed command runs in a sandbox and returns, with live output', async () => {
      const w = await setup()
      const out: string[] = []
      const err: string[] = []
      const r = await w.executor.execute(w.route('echo hi; echo oops >&2; exit 3', { sessionId: 's1' }), {
        onStdout: (c) => out.push(c),
        onStderr: (c) => err.push(c),
      })
      expect(r).toMatchObject({
        exitCode: 3,
        stdout: 'hi\n',
        stderr: 'oops\n',
        timedOut: false,
        truncated: false,
      })
      expect(out.join('')).toBe('hi\n')
      expect(err.join('')).toBe('oops\n')
    })

    test("a session's files persist across jobs and stay invisible to other sessions and tenants", async () => {
      const w = await setup()
      await w.executor.execute(w.route('echo kept > note.txt', { sessionId: 'a' }))
      const same = await w.executor.execute(w.route('cat note.txt', { sessionId: 'a' }))
      expect(same.stdout).toBe('kept\n')
      const other = await w.executor.execute(w.route('cat note.txt', { sessionId: 'b' }))
      expect(other.exitCode).not.toBe(0)
      const tenant = await w.executor.execute(w.route('cat note.txt', { sessionId: 'a', tenant: 'globex' }))
      expect(tenant.exitCode).not.toBe(0)
      expect(new Set([same.sandboxId, other.sandboxId, tenant.sandboxId]).size).toBe(3)
    })

    test('a timeout kills the command and keeps its partial output; timeouts clamp to the profile max', async () => {
      const w = await setup()
      const r = await w.executor.execute(
        w.route('echo before; sleep 30; echo after', { sessionId: 't', timeoutMs: 700 }),
      )
      expect(r).toMatchObject({ timedOut: true, stdout: 'before\n' })
      expect(w.executor.effectiveTimeoutMs(w.route('true', { profile: 'short', timeoutMs: 999_999 }))).toBe(
        2_000,
      )
      expect(w.executor.effectiveTimeoutMs(w.route('true', { profile: 'short' }))).toBe(1_000)
    })

    test('output past the cap keeps its head and tail around a marker, and is flagged', async () => {
      const w = await setup()
      let live = ''
      const r = await w.executor.execute(
        w.route("head -c 100000 /dev/zero | tr '\\0' a; echo done >&2", { profile: 'capped' }),
        { onStdout: (c) => (live += c) },
      )
      expect(r.truncated).toBe(true)
      expect(r.stdout).toBe('a'.repeat(512) + droppedMarker(100_000 - 1024) + 'a'.repeat(512))
      expect(live).toBe(r.stdout)
      expect(r.stderr).toBe('done\n')
      expect(r.exitCode).toBe(0)
    })

    test('aborting the call cancels the job and kills the process in the sandbox', async () => {
      const w = await setup()
      const ac = new AbortController()
      const call = w.executor.execute(
        w.route('echo started; sleep 31337; touch marker', { sessionId: 'c' }),
        {
          signal: ac.signal,
          onStdout: (c) => {
            if (c.includes('started')) ac.abort('user pressed stop')
          },
        },
      )
      const err = await failure(call)
      expect(err.code).toBe('JOB_CANCELLED')
      expect(err.message).toContain('user pressed stop')
      const check = await w.executor.execute(
        w.route('pidof sleep || echo no-sleep; test -e marker && echo marker || echo no-marker', {
          sessionId: 'c',
        }),
      )
      expect(check.stdout).toBe('no-sleep\nno-marker\n')
    })

    test('unknown providers and profiles fail up front, naming the known ones, and never run', async () => {
      const w = await setup()
      const p = await failure(w.executor.execute(w.route('echo hi', { providerId: 'nowhere' })))
      expect(p.code).toBe('UNKNOWN_PROVIDER')
      expect(p.message).toContain('docker')
      const q = await failure(w.executor.execute(w.route('echo hi', { profile: 'huge' })))
      expect(q.code).toBe('UNKNOWN_PROFILE')
      expect(q.message).toContain('capped')
      expect(await w.queue.counts()).toEqual({ waiting: 0, active: 0 })
    })

    test('resubmitting a call returns the first result without running it again; a call id reused for another command runs that command', async () => {
      const w = await setup()
      const route = w.route('echo x >> runs; wc -l < runs', { sessionId: 'r' })
      const first = await w.executor.execute(route)
      const again = await w.executor.execute({ ...route })
      expect(again).toEqual(first)
      expect((await w.executor.execute(w.route('wc -l < runs', { sessionId: 'r' }))).stdout.trim()).toBe('1')
      // Models that number their calls afresh every turn reuse `call_0`: the new command must run.
      const reused = await w.executor.execute({ ...route, command: 'echo changed; wc -l < runs' })
      expect(reused.stdout).toBe('changed\n1\n')
      expect(w.executor.jobIdOf({ ...route, command: 'other' })).not.toBe(w.executor.jobIdOf(route))
    })

    test('runToolCall formats the result and applies the after-chain', async () => {
      const w = await setup()
      const route = (command: string, profile = 'default'): ToolCallInterceptor => ({
        name: 'route',
        beforeToolCall: () => ToolCallDecision.routeTo('docker', profile, command),
      })
      const redact: ToolCallInterceptor = {
        name: 'redact',
        beforeToolCall: () => ({ kind: 'allow' }),
        afterToolCall: (_req, output) => ToolResultDecision.modify(output.replaceAll('s3cr3t', '[redacted]')),
      }
      const request = { name: 'bash', arguments: '{}', callId: 'c1', type: 'function' }
      const ok = await runToolCall(
        request,
        {},
        {
          interceptors: [route('echo token=s3cr3t'), redact],
          router: w.executor,
        },
      )
      expect(ok.output).toBe('exit_code: 0\nstdout:\ntoken=[redacted]\nstderr:\n(empty)')
      expect((ok.exec as ExecResult).stdout).toBe('token=s3cr3t\n')
      expect(ok.modifiedBy).toEqual(['redact'])
      const bad = await runToolCall(
        request,
        {},
        {
          interceptors: [route('echo hi', 'nope'), redact],
          router: w.executor,
        },
      )
      expect(bad.output).toMatch(/^error: UNKNOWN_PROFILE: /)
      expect(bad.error).toBeInstanceOf(AppError)
      expect(bad.afterBlocked).toBe(false)
    })
  },
)

describe('routed execution when the sandbox dies mid-command', () => {
  let world: World | undefined
  afterEach(async () => {
    await world?.close()
    expect(await world?.containers()).toEqual([])
    world = undefined
  })

  test('the call fails with SANDBOX_LOST and the next call of the session gets a fresh sandbox', async () => {
    const w = (world = await createWorld({ driver: 'bullmq' }))
    const first = await w.executor.execute(w.route('echo here > f; echo ok', { sessionId: 'l' }))
    let killing: Promise<unknown> | undefined
    const err = await failure(
      w.executor.execute(w.route('echo started; sleep 31337', { sessionId: 'l' }), {
        onStdout: (c) => {
          if (c.includes('started')) killing ??= w.docker.docker.getContainer(first.sandboxId).kill()
        },
      }),
    )
    await killing
    expect(err.code).toBe('SANDBOX_LOST')
    const next = await w.executor.execute(w.route('test -e f && echo old || echo fresh', { sessionId: 'l' }))
    expect(next.stdout).toBe('fresh\n')
    expect(next.sandboxId).not.toBe(first.sandboxId)
  })
})
