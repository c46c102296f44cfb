import { E2B } from 'e2b'
import { afterAll, describe, expect, test } from 'vitest'
import { droppedMarker } from '../../../../src/sandbox/output-cap.js'
import { resolveProfile } from '../../../../src/sandbox/profiles.js'
import { LABELS } from '../../../../src/sandbox/types.js'
import { startE2BEndpoint } from '../../../support/e2b-endpoint.js'
import { TEST_RUN_LABEL, e2bFixture, quick, rejectionOf } from '../../../support/e2b-fixture.js'

const T = 120_000
// Our E2B-compatible endpoint backed by Docker; small pages, so listing has to follow x-next-token.
const endpoint = await startE2BEndpoint({ maxPageSize: 2 })
const fx = e2bFixture(endpoint)

afterAll(async () => {
  expect(await fx.cleanup()).toBe(0)
  expect(await endpoint.close()).toBe(0)
}, T)

/** The body of the last create request of this file's provider (what it asked E2B for). */
function lastCreateBody(): Record<string, unknown> {
  const body = endpoint.requests
    .filter((r) => r.method === 'POST' && r.path === '/v2/sandboxes')
    .map((r) => r.body as { metadata?: Record<string, string> } | undefined)
    .findLast((b) => b?.metadata?.[TEST_RUN_LABEL] === fx.labels[TEST_RUN_LABEL])
  expect(body).toBeDefined()
  return body as Record<string, unknown>
}

describe('e2b provider lifecycle', () => {
  test(
    'a created sandbox carries the labels as metadata, the profile env, and a kill-on-timeout lifetime',
    async () => {
      const sb = await fx.create({
        env: { SBX_PROFILE_VAR: 'profile', SBX_BOTH: 'profile' },
        idleTtlMs: 600_000,
      })
      const info = await endpoint.info(sb.ref.id)
      expect(info?.metadata).toMatchObject({
        ...fx.labels,
        [LABELS.owner]: 'sandbox-router',
        [LABELS.profile]: 'test',
        [LABELS.instance]: 'e2b-integration-test',
      })
      expect(sb.ref.labels).toMatchObject(fx.labels)
      expect(info?.templateID).toBe('base')
      expect(info?.lifecycle).toEqual({ onTimeout: 'kill', autoResume: false })
      const body = lastCreateBody()
      expect(body['envVars']).toEqual({ SBX_PROFILE_VAR: 'profile', SBX_BOTH: 'profile' })
      expect(body['autoPause']).toBe(false)
      // network 'none' (the profile default) becomes allowInternetAccess: false.
      expect(body['allow_internet_access']).toBe(false)
      // The idle TTL plus the refresh slack (60 s, at most a quarter of the TTL), in seconds.
      expect(body['timeout']).toBe(660)
      const r = await sb.exec({
        ...quick,
        command: 'echo "$SBX_PROFILE_VAR $SBX_BOTH"',
        env: { SBX_BOTH: 'request' },
      })
      expect(r.stdout).toBe('profile request\n')
    },
    T,
  )

  test(
    'use refreshes the lifetime: a command longer than the idle TTL is not cut off',
    async () => {
      // idle TTL 3 s: created with a 4 s lifetime (3 s + a quarter of the TTL, rounded up to seconds).
      const sb = await fx.create({ idleTtlMs: 3000 })
      const refreshed = endpoint.nextAnswer(
        (r) => r.path === `/sandboxes/${sb.ref.id}/timeout` && r.status === 204,
      )
      const r = await sb.exec({ ...quick, timeoutMs: 15_000, command: 'sleep 6; echo survived' })
      expect(r).toMatchObject({ exitCode: 0, stdout: 'survived\n', timedOut: false })
      await refreshed
      const info = await endpoint.info(sb.ref.id)
      // Asked for the command's deadline (timeout + buffer) plus slack, not just the idle TTL.
      expect(Date.parse(info?.endAt ?? '') - Date.parse(info?.startedAt ?? '')).toBeGreaterThan(20_000)
      expect(info?.state).toBe('running')
    },
    T,
  )

  test(
    'an idle sandbox is killed by E2B when its lifetime ends; the handle then reports SANDBOX_LOST',
    async () => {
      const sb = await fx.create({ idleTtlMs: 2000 })
      // The endpoint logs the end of the lifetime, then deletes the session behind the sandbox.
      await endpoint.timedOut(sb.ref.id)
      expect(await endpoint.info(sb.ref.id)).toBeUndefined()
      expect(await rejectionOf(sb.exec({ ...quick, command: 'echo hi' }))).toMatchObject({
        code: 'SANDBOX_LOST',
      })
      expect(await rejectionOf(fx.provider.connect(sb.ref))).toMatchObject({ code: 'SANDBOX_LOST' })
    },
    T,
  )

  test(
    'list follows pagination and filters by every given label',
    async () => {
      const extra = { ...fx.labels, 'sandbox-router.test-group': 'paged' }
      const profile = resolveProfile('test', { provider: 'e2b' })
      const refs = await Promise.all([0, 1, 2].map(() => fx.provider.create(profile, { labels: extra })))
      const listed = await fx.provider.list({ labels: extra })
      expect(listed.map((r) => r.id).sort()).toEqual(refs.map((s) => s.ref.id).sort())
      expect(listed.every((r) => r.profile === 'test' && r.providerId === 'e2b')).toBe(true)
      expect(
        endpoint.requests.filter((r) => r.method === 'GET' && r.path === '/v2/sandboxes').length,
      ).toBeGreaterThan(1)
      // Plain http: the SDK's undici falls back to HTTP/1.1 for the API and envd alike.
      expect(new Set(endpoint.requests.map((r) => r.httpVersion))).toEqual(new Set(['1.1']))
    },
    T,
  )

  test(
    'connect from another provider instance keeps cwd, concurrency and TTL from metadata',
    async () => {
      const sb = await fx.create({ cwd: '/tmp/work', maxConcurrentExecs: 1 })
      const other = e2bFixture(endpoint)
      const again = await other.provider.connect({ ...sb.ref, labels: {} })
      expect((await again.exec({ ...quick, command: 'pwd' })).stdout).toBe('/tmp/work\n')
      // maxConcurrentExecs 1: two commands that would collide on a lock directory both succeed.
      const locked = 'mkdir /tmp/lock || exit 9; sleep 0.3; rmdir /tmp/lock'
      const results = await Promise.all([0, 1].map(() => again.exec({ ...quick, command: locked })))
      expect(results.map((r) => r.exitCode)).toEqual([0, 0])
      await again.close()
      await other.provider.close()
    },
    T,
  )

  test(
    'a profile cwd the default user cannot create: the root fallback, and where it is refused a CONFIG_INVALID naming the cwd',
    async () => {
      // E2B runs the fallback's `mkdir` + `chown` as root. Our endpoint runs nothing as root (its
      // sandboxes drop every capability, docs/e2b-endpoint.md), so here the fallback fails too: the
      // create must then say which directory and what to do, and leave no sandbox behind.
      const before = await fx.provider.list({ labels: fx.labels })
      const err = await rejectionOf(fx.create({ cwd: '/srv/app' }))
      expect(err).toMatchObject({ code: 'CONFIG_INVALID', retryable: false })
      expect((err as Error).message).toContain('/srv/app')
      expect(await fx.provider.list({ labels: fx.labels })).toHaveLength(before.length)
    },
    T,
  )

  test(
    'an output flood is capped inside the sandbox: the command is not blocked and the flood never reaches the client',
    async () => {
      const sb = await fx.create()
      const r = await sb.exec({
        ...quick,
        outputCapBytes: 4096,
        command: 'yes flood | head -c 20000000; echo tail >&2; yes err | head -c 20000000 >&2; exit 3',
      })
      expect(r).toMatchObject({ exitCode: 3, truncated: true, timedOut: false })
      // Head and tail of the cap (2 KiB each) with the marker between: the tail is the flood's end.
      const flood = 'flood\n'.repeat(3_333_334).slice(0, 20_000_000)
      expect(r.stdout).toBe(flood.slice(0, 2048) + droppedMarker(20_000_000 - 4096) + flood.slice(-2048))
      expect(r.stderr.startsWith('tail\nerr\n')).toBe(true)
      expect(r.stderr).toHaveLength(4096 + droppedMarker(20_000_005 - 4096).length)
      // 40 MB were written in the sandbox; what crossed the wire is about the two caps.
      const start = endpoint.requests
        .filter((q) => q.sandboxId === sb.ref.id && q.path === '/process.Process/Start')
        .at(-1)
      expect(start?.bytesOut).toBeLessThan(64 * 1024)
    },
    T,
  )

  test(
    'a process that escaped the group with setsid and holds stdout does not hold the result',
    async () => {
      const sb = await fx.create()
      // The pid file is written from inside the new session, so the escape is complete before the
      // command ends (a child still on its way out of the group would rightly go with the group).
      const r = await sb.exec({
        ...quick,
        command:
          "rm -f escaped.pid; setsid sh -c 'echo $$ > escaped.pid; exec sleep 60' & " +
          'while [ ! -s escaped.pid ]; do :; done; echo done',
      })
      expect(r).toMatchObject({ exitCode: 0, stdout: 'done\n', timedOut: false })
      expect(r.durationMs).toBeLessThan(quick.timeoutMs)
      // Still running (it left the group), until we end it.
      expect((await sb.exec({ ...quick, command: 'kill $(cat escaped.pid) && echo killed' })).stdout).toBe(
        'killed\n',
      )
    },
    T,
  )

  test(
    'a sandbox without the owner metadata is refused by connect',
    async () => {
      const foreign = await new E2B({
        apiKey: endpoint.apiKey,
        apiUrl: endpoint.apiUrl,
        sandboxUrl: endpoint.sandboxUrl,
      }).Sandbox.create()
      try {
        const err = await rejectionOf(
          fx.provider.connect({ providerId: 'e2b', id: foreign.sandboxId, profile: 'x' }),
        )
        expect(err).toMatchObject({ code: 'BAD_REQUEST' })
      } finally {
        await foreign.kill()
      }
    },
    T,
  )
  test(
    "pause freezes the sandbox with E2B's pause (its files kept), resume thaws it; a gone one is NOT_FOUND",
    async () => {
      const sb = await fx.create()
      await sb.exec({ ...quick, command: 'echo kept > p.txt' })
      await fx.provider.pause?.(sb.ref)
      expect((await endpoint.info(sb.ref.id))?.state).toBe('paused')
      // A second pause is not an error (the SPI's rule; E2B answers it with `false`).
      await fx.provider.pause?.(sb.ref)
      await fx.provider.resume?.(sb.ref)
      expect((await endpoint.info(sb.ref.id))?.state).toBe('running')
      // Resuming a running sandbox is not an error either.
      await fx.provider.resume?.(sb.ref)
      const again = await fx.provider.connect(sb.ref)
      expect((await again.exec({ ...quick, command: 'cat p.txt' })).stdout).toBe('kept\n')
      await fx.provider.destroy(sb.ref)
      expect(await rejectionOf(fx.provider.pause?.(sb.ref) ?? Promise.resolve())).toMatchObject({
        code: 'NOT_FOUND',
      })
    },
    T,
  )

  test(
    "stats are E2B's latest metric of the sandbox; a gone one is NOT_FOUND",
    async () => {
      const sb = await fx.create()
      await sb.exec({ ...quick, command: 'true' })
      // The endpoint behind it answers its engine's figures of the container.
      const stats = await fx.provider.stats?.(sb.ref)
      expect(stats?.cpuCount).toBeGreaterThanOrEqual(1)
      expect(stats?.memUsedBytes).toBeGreaterThan(0)
      expect(stats?.memTotalBytes).toBeGreaterThan(stats?.memUsedBytes ?? 0)
      expect(endpoint.requests.some((r) => r.path === `/sandboxes/${sb.ref.id}/metrics`)).toBe(true)
      await fx.provider.destroy(sb.ref)
      expect(await rejectionOf(fx.provider.stats?.(sb.ref) ?? Promise.resolve())).toMatchObject({
        code: 'NOT_FOUND',
      })
    },
    T,
  )
})
