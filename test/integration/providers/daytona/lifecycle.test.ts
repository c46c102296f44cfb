import { randomUUID } from 'node:crypto'
import { afterAll, beforeAll, describe, expect, test } from 'vitest'
import { type DaytonaProvider, createDaytonaProvider } from '../../../../providers/daytona/index.js'
import { rejectionOf } from '../../../../src/sandbox/conformance/io-cases.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { LABELS } from '../../../../src/sandbox/types.js'
import { type FakeDaytona, startFakeDaytona } from '../../../fakes/daytona/index.js'
import { closeProvidersAndFake } from '../../../support/daytona-cleanup.js'

const TIMEOUT = 120_000
const base = { timeoutMs: 20_000, outputCapBytes: 64 * 1024 }

let fake: FakeDaytona
const providers: DaytonaProvider[] = []
const provider = (overrides: Partial<Parameters<typeof createDaytonaProvider>[0]> = {}): DaytonaProvider => {
  const p = createDaytonaProvider({ apiKey: fake.apiKey, apiUrl: fake.apiUrl, ...overrides })
  providers.push(p)
  return p
}
const record = (id: string) => {
  const found = fake.sandboxes().find((s) => s.id === id)
  if (!found) throw new Error(`the fake has no sandbox ${id}`)
  return found
}

beforeAll(async () => {
  fake = await startFakeDaytona()
})
afterAll(() => closeProvidersAndFake(providers, fake), TIMEOUT)

describe('Daytona provider lifecycle (real SDK against the fake)', () => {
  test(
    'every sandbox carries the create labels plus owner, profile and instance',
    async () => {
      const p = provider({ instanceId: 'lifecycle-test' })
      const labels = { [LABELS.tenant]: 'tenant-a', [LABELS.session]: 'session-hash-1' }
      const sb = await p.create(resolveProfile('labelled', { provider: 'daytona' }), { labels })
      expect(record(sb.ref.id).labels).toMatchObject({
        ...labels,
        [LABELS.owner]: 'sandbox-router',
        [LABELS.profile]: 'labelled',
        [LABELS.instance]: 'lifecycle-test',
      })
      expect(sb.ref.labels).toMatchObject(labels)
      const found = await p.list({ labels: { [LABELS.tenant]: 'tenant-a' } })
      expect(found.map((r) => r.id)).toEqual([sb.ref.id])
      expect(found[0]).toMatchObject({ providerId: 'daytona', profile: 'labelled' })
      await p.destroy(sb.ref)
    },
    TIMEOUT,
  )

  test(
    'a server-side lifetime is always set: auto-stop from the idle TTL, then auto-delete; options override',
    async () => {
      const idle = await provider().create(
        resolveProfile('idle', { provider: 'daytona', idleTtlMs: 90_000, env: { A: '1' } }),
        { labels: {} },
      )
      expect(record(idle.ref.id)).toMatchObject({
        autoStopInterval: 2,
        autoDeleteInterval: 0,
        networkBlockAll: true,
        env: { A: '1' },
      })
      expect(record(idle.ref.id).ttlMinutes).toBeUndefined()
      const explicit = await provider({ autoStopMinutes: 5, autoDeleteMinutes: 30, ttlMinutes: 120 }).create(
        resolveProfile('explicit', { provider: 'daytona' }),
        { labels: {} },
      )
      expect(record(explicit.ref.id)).toMatchObject({
        autoStopInterval: 5,
        autoDeleteInterval: 30,
        ttlMinutes: 120,
      })
    },
    TIMEOUT,
  )

  test(
    'profiles map to Daytona: image with resources rounded up, or snapshot',
    async () => {
      const p = provider()
      const fromImage = await p.create(
        resolveProfile('image', {
          provider: 'daytona',
          image: 'sandbox-router/base:latest',
          cpu: 1.5,
          memoryMb: 1536,
        }),
        { labels: {} },
      )
      expect(record(fromImage.ref.id)).toMatchObject({
        image: 'sandbox-router/base:latest',
        cpu: 2,
        memory: 2,
      })
      const fromSnapshot = await p.create(
        resolveProfile('snap', { provider: 'daytona', snapshot: 'my-snapshot' }),
        {
          labels: {},
        },
      )
      expect(record(fromSnapshot.ref.id)).toMatchObject({ snapshot: 'my-snapshot' })
      expect(record(fromSnapshot.ref.id).image).toBeUndefined()
      expect(
        await rejectionOf(p.create(resolveProfile('docker', { provider: 'docker' }), { labels: {} })),
      ).toMatchObject({ code: 'CONFIG_INVALID' })
    },
    TIMEOUT,
  )

  test(
    'list follows the cursor across pages and skips destroyed sandboxes',
    async () => {
      const p = provider()
      const run = { 'test.run': randomUUID() }
      const profile = resolveProfile('paged', { provider: 'daytona' })
      const made = await Promise.all([1, 2, 3, 4].map(() => p.create(profile, { labels: run })))
      const listed = await p.list({ labels: run })
      expect(listed.map((r) => r.id).sort()).toEqual(made.map((s) => s.ref.id).sort())
      await p.destroy(made[0]!.ref)
      expect((await p.list({ labels: run })).map((r) => r.id)).not.toContain(made[0]!.ref.id)
      for (const sb of made) await p.destroy(sb.ref)
      expect(await p.list({ labels: run })).toEqual([])
    },
    TIMEOUT,
  )

  test(
    'the profile cwd is created; connect from another instance restores cwd and the concurrency bound',
    async () => {
      const profile = resolveProfile('bounded', {
        provider: 'daytona',
        cwd: '/workspace/deep/cwd',
        maxConcurrentExecs: 1,
      })
      const sb = await provider().create(profile, { labels: {} })
      const other = await provider().connect(sb.ref)
      expect((await other.exec({ ...base, command: 'pwd' })).stdout).toBe('/workspace/deep/cwd\n')
      // One slot: the second command starts only after the first has removed its marker.
      const first = other.exec({ ...base, command: 'touch busy; sleep 0.3; rm busy' })
      const second = other.exec({
        ...base,
        command:
          'i=0; while [ ! -e busy ] && [ $i -lt 10 ]; do sleep 0.05; i=$((i+1)); done; ' +
          '[ -e busy ] && echo overlapped || echo alone',
      })
      await first
      expect((await second).stdout).toBe('alone\n')
      // A caller waiting for the slot can give up.
      const blocker = other.exec({ ...base, command: 'sleep 0.3' })
      const reason = new Error('gave up waiting')
      const controller = new AbortController()
      const waiting = other.exec({ ...base, command: 'echo never' }, { signal: controller.signal })
      controller.abort(reason)
      expect(await rejectionOf(waiting)).toBe(reason)
      await blocker
    },
    TIMEOUT,
  )

  test(
    'background processes: kept when they let go of the output, killed when they hold it; escaping the group cannot hang a command',
    async () => {
      const sb = await provider().create(resolveProfile('background', { provider: 'daytona' }), {
        labels: {},
      })
      const detached = await sb.exec({
        ...base,
        command: 'sleep 30 >/dev/null 2>&1 & echo $! > detached.pid; echo ok',
      })
      expect(detached.stdout).toBe('ok\n')
      expect((await sb.exec({ ...base, command: 'kill -0 $(cat detached.pid) && echo alive' })).stdout).toBe(
        'alive\n',
      )
      const holding = await sb.exec({ ...base, command: 'sleep 30 & echo $! > holding.pid; echo ok' })
      expect(holding.stdout).toBe('ok\n')
      expect((await sb.exec({ ...base, command: 'kill -0 $(cat holding.pid) || echo gone' })).stdout).toBe(
        'gone\n',
      )
      const escaped = await sb.exec({ ...base, command: 'setsid sleep 30 & echo ok' })
      expect(escaped).toMatchObject({ stdout: 'ok\n', exitCode: 0, timedOut: false })
      expect(escaped.durationMs).toBeLessThan(10_000)
      // The output readers of that run were killed whole: no orphaned reader (a dd whose reader
      // shell is gone) is left holding the daemon's pipe.
      const orphans = await sb.exec({
        ...base,
        command:
          "ps -o pid,ppid,comm | awk 'NR > 1 { c[$1] = $3; pp[$1] = $2 } " +
          'END { n = 0; for (p in c) if (c[p] == "dd" && c[pp[p]] != "sh") n++; print n }\'',
      })
      expect(orphans.stdout.trim()).toBe('0')
    },
    TIMEOUT,
  )

  test(
    'an aborted create rejects with the reason and leaves no sandbox',
    async () => {
      const p = provider()
      const run = { 'test.run': randomUUID() }
      const reason = new Error('caller went away')
      const controller = new AbortController()
      const pending = p.create(resolveProfile('aborted', { provider: 'daytona' }), {
        labels: run,
        signal: controller.signal,
      })
      controller.abort(reason)
      expect(await rejectionOf(pending)).toBe(reason)
      expect(await p.list({ labels: run })).toEqual([])
      expect(
        await rejectionOf(
          p.create(resolveProfile('aborted', { provider: 'daytona' }), {
            labels: run,
            signal: AbortSignal.abort(reason),
          }),
        ),
      ).toBe(reason)
    },
    TIMEOUT,
  )
})
